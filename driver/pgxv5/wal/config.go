package wal

import (
	"fmt"
	"log/slog"
	"time"

	"github.com/jackc/pgx/v5/pgconn"

	"github.com/postbox-go/postbox"
)

// Defaults for RelayConfig.
const (
	DefaultBatchSize         = 500
	DefaultLinger            = 5 * time.Millisecond
	DefaultStatusInterval    = 10 * time.Second
	DefaultHeartbeatInterval = time.Minute
	DefaultSlotCheckInterval = 15 * time.Second
	DefaultRetainedWarnBytes = 1 << 30
	DefaultSpillAfter        = 5 * time.Second
)

// Config configures a Driver made with NewWithConfig.
type Config struct {
	// Secret signs every message the driver writes into the WAL (SignedVersion), so that a relay holding the same
	// secret (RelayConfig.Secret) publishes it and skips what other roles write. At least MinSecretBytes random
	// bytes; keep it out of the database. Empty: the messages are unsigned (Version 1).
	Secret []byte
}

// RelayConfig configures a Relay. The zero value is valid, and every field but Secret has a default; a relay
// without a Secret refuses to run while PUBLIC may execute pg_logical_emit_message (see Secret).
type RelayConfig struct {
	// Secret is the key the clients sign their messages with (Config.Secret): the relay publishes only the
	// messages whose tag it verifies, and counts (Stats.Unverified), logs once and skips the others, as settled,
	// so they never hold the slot. At least MinSecretBytes. Empty: the relay reads unsigned messages, which any
	// role that may execute pg_logical_emit_message can write; Run then refuses with ErrRefused while PUBLIC may
	// (revoke it, docs/WAL.md), unless InsecureUnsigned.
	Secret []byte
	// InsecureUnsigned lets a relay without a Secret run while PUBLIC may execute pg_logical_emit_message, with a
	// warning: any role that can log in can then publish through it. For throwaway clusters only.
	InsecureUnsigned bool
	// Slot is the logical replication slot, and the publication of the same name, that the relay creates when
	// missing and reads from. Default: SlotName of the client's table set ("postbox_postbox_outbox").
	Slot string
	// Replication is the connection the relay streams on; the relay adds replication=database to its runtime
	// parameters. Default: the pool's connection settings.
	Replication *pgconn.Config
	// BatchSize is the most messages one Publish call takes. A batch holds at most one message per key, so that a
	// message that fails holds back the later messages of its key. Default: DefaultBatchSize (500).
	BatchSize int
	// Linger is how long the relay keeps reading after the first message of a batch before it publishes a batch
	// that is not full. Default: DefaultLinger (5ms).
	Linger time.Duration
	// MaxPending bounds the messages read and not yet published or parked; past it the relay stops reading until
	// the broker takes some. Default: 10 × BatchSize.
	MaxPending int
	// PublishTimeout bounds each Publish call. Default: postbox.DefaultPublishTimeout (10s).
	PublishTimeout time.Duration
	// MaxAttempts is how many failed publishes park a message as dead in the outbox table. Default:
	// postbox.DefaultMaxAttempts (20).
	MaxAttempts int
	// BackoffBase and BackoffMax shape a failed message's retry delay: BackoffBase doubling per attempt up to
	// BackoffMax, jittered. Defaults: postbox.DefaultBackoffBase (1s), postbox.DefaultBackoffMax (10m).
	BackoffBase, BackoffMax time.Duration
	// Backoff, when set, replaces the delay above, as postbox.RelayConfig.Backoff does.
	Backoff func(attempt int) time.Duration
	// ErrorBackoffBase and ErrorBackoffMax shape the wait before reconnecting after a lost connection and the
	// pace at which a destination that is down is probed with one of its messages. Defaults:
	// postbox.DefaultErrorBackoffBase (100ms), postbox.DefaultErrorBackoffMax (1s), as for a table relay.
	ErrorBackoffBase, ErrorBackoffMax time.Duration
	// SlowPublish is how long one destination's share of a batch may take before the destination counts as
	// slow, as for a table relay. Default: postbox.DefaultSlowPublish (1s).
	SlowPublish time.Duration
	// SpillAfter is how long a message may wait, for a destination that is down or for its next retry, before
	// the relay writes it into the outbox table as a pending row (with its attempts and next retry time), where
	// the table relay beside it publishes it, and confirms past it: no destination and no message ever pins the
	// slot, so the WAL the server retains stays bounded. The later messages of its key follow it into the table,
	// keeping their order. A message is also spilled at once when MaxPending messages wait. Text a text column
	// refuses (NUL, invalid UTF-8) is stored with those bytes replaced by U+FFFD, said in its last error.
	// Default: DefaultSpillAfter (5s).
	SpillAfter time.Duration
	// StatusInterval is the longest time between two standby status updates, which confirm the LSN up to which
	// every message is settled and tell the server the relay is alive. An update is also sent after every batch
	// that moves the confirmed LSN. Keep it well under the server's wal_sender_timeout (60s by default). Default:
	// DefaultStatusInterval (10s).
	StatusInterval time.Duration
	// HeartbeatInterval is how often the relay writes a small non-transactional message into the WAL, so that a
	// database with no messages still moves the slot forward and the slot does not pin the WAL that other
	// databases of the cluster write. Negative turns heartbeats off. Default: DefaultHeartbeatInterval (1m).
	HeartbeatInterval time.Duration
	// SlotCheckInterval is how often the relay reads the slot's retained WAL and lag for Stats. Default:
	// DefaultSlotCheckInterval (15s).
	SlotCheckInterval time.Duration
	// RetainedWarnBytes is the retained WAL above which each slot check logs a warning. Default:
	// DefaultRetainedWarnBytes (1 GiB).
	RetainedWarnBytes int64
	// Logger receives the relay's logs. Default: the client's logger.
	Logger *slog.Logger
	// Observer, when set, receives the outcome of every batch, as a table relay's does.
	Observer postbox.RelayObserver
}

// WithDefaults returns a copy of c with every zero field set to its default. A nil c gives the defaults.
func (c *RelayConfig) WithDefaults() RelayConfig {
	var out RelayConfig
	if c != nil {
		out = *c
	}
	def(&out.BatchSize, DefaultBatchSize)
	def(&out.Linger, DefaultLinger)
	def(&out.MaxPending, 10*out.BatchSize)
	def(&out.PublishTimeout, postbox.DefaultPublishTimeout)
	p := out.Retry().WithDefaults()
	out.MaxAttempts, out.BackoffBase, out.BackoffMax = p.MaxAttempts, p.BackoffBase, p.BackoffMax
	out.ErrorBackoffBase, out.ErrorBackoffMax = p.ErrorBackoffBase, p.ErrorBackoffMax
	def(&out.SlowPublish, postbox.DefaultSlowPublish)
	def(&out.SpillAfter, DefaultSpillAfter)
	def(&out.StatusInterval, DefaultStatusInterval)
	def(&out.HeartbeatInterval, DefaultHeartbeatInterval)
	def(&out.SlotCheckInterval, DefaultSlotCheckInterval)
	def(&out.RetainedWarnBytes, DefaultRetainedWarnBytes)
	return out
}

// Retry returns the retry policy of c, which the relay's delivery step (postbox.Deliverer) rules by, as a table
// relay's does.
func (c RelayConfig) Retry() postbox.RetryPolicy {
	return postbox.RetryPolicy{MaxAttempts: c.MaxAttempts, BackoffBase: c.BackoffBase, BackoffMax: c.BackoffMax, Backoff: c.Backoff,
		ErrorBackoffBase: c.ErrorBackoffBase, ErrorBackoffMax: c.ErrorBackoffMax}
}

func def[T comparable](p *T, v T) {
	var zero T
	if *p == zero {
		*p = v
	}
}

func (c RelayConfig) validate() error {
	for _, p := range []struct {
		name string
		v    int64
	}{
		{"BatchSize", int64(c.BatchSize)}, {"Linger", int64(c.Linger)}, {"MaxPending", int64(c.MaxPending)},
		{"PublishTimeout", int64(c.PublishTimeout)}, {"MaxAttempts", int64(c.MaxAttempts)},
		{"BackoffBase", int64(c.BackoffBase)}, {"BackoffMax", int64(c.BackoffMax)},
		{"ErrorBackoffBase", int64(c.ErrorBackoffBase)}, {"ErrorBackoffMax", int64(c.ErrorBackoffMax)},
		{"StatusInterval", int64(c.StatusInterval)}, {"SlotCheckInterval", int64(c.SlotCheckInterval)},
		{"SlowPublish", int64(c.SlowPublish)}, {"SpillAfter", int64(c.SpillAfter)},
		{"RetainedWarnBytes", c.RetainedWarnBytes},
	} {
		if p.v < 0 {
			return fmt.Errorf("%w: wal.RelayConfig.%s is negative; use a positive value or 0 for the default", postbox.ErrInvalidConfig, p.name)
		}
	}
	if c.ErrorBackoffMax < c.ErrorBackoffBase {
		return fmt.Errorf("%w: wal.RelayConfig.ErrorBackoffMax (%v) is below ErrorBackoffBase (%v)", postbox.ErrInvalidConfig,
			c.ErrorBackoffMax, c.ErrorBackoffBase)
	}
	if c.MaxPending < c.BatchSize {
		return fmt.Errorf("%w: wal.RelayConfig.MaxPending (%d) is below BatchSize (%d)", postbox.ErrInvalidConfig, c.MaxPending, c.BatchSize)
	}
	if err := checkSecret("wal.RelayConfig.Secret", c.Secret); err != nil {
		return err
	}
	if c.Slot != "" && !validSlot(c.Slot) {
		return fmt.Errorf("%w: wal.RelayConfig.Slot %q is not a slot name; use 1 to 63 lower-case letters, digits and '_'", postbox.ErrInvalidConfig, c.Slot)
	}
	return nil
}

func validSlot(s string) bool {
	if len(s) == 0 || len(s) > 63 {
		return false
	}
	for _, c := range []byte(s) {
		if !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '_') {
			return false
		}
	}
	return true
}

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
	// ErrorBackoffBase and ErrorBackoffMax shape the wait before reconnecting after a lost connection and before
	// probing a broker that refused a whole batch as unavailable. Defaults: postbox.DefaultErrorBackoffBase
	// (100ms), 5s.
	ErrorBackoffBase, ErrorBackoffMax time.Duration
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
	def(&out.MaxAttempts, postbox.DefaultMaxAttempts)
	def(&out.BackoffBase, postbox.DefaultBackoffBase)
	def(&out.BackoffMax, postbox.DefaultBackoffMax)
	def(&out.ErrorBackoffBase, postbox.DefaultErrorBackoffBase)
	def(&out.ErrorBackoffMax, 5*time.Second)
	def(&out.StatusInterval, DefaultStatusInterval)
	def(&out.HeartbeatInterval, DefaultHeartbeatInterval)
	def(&out.SlotCheckInterval, DefaultSlotCheckInterval)
	def(&out.RetainedWarnBytes, DefaultRetainedWarnBytes)
	return out
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
		{"RetainedWarnBytes", c.RetainedWarnBytes},
	} {
		if p.v < 0 {
			return fmt.Errorf("%w: wal.RelayConfig.%s is negative; use a positive value or 0 for the default", postbox.ErrInvalidConfig, p.name)
		}
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

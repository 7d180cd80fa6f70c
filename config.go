package postbox

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	"github.com/postbox-go/postbox/driver"
)

// Defaults for Config.
const (
	DefaultTable           = "postbox_outbox"
	DefaultInboxTable      = "postbox_inbox"
	DefaultMaxPayloadBytes = driver.DefaultMaxPayloadBytes
	DefaultNotifyInterval  = driver.DefaultNotifyIntervalMillis * time.Millisecond
)

// Clock tells the time. Tests inject one to control backoff and retention; the default is the system clock.
type Clock interface {
	Now() time.Time
}

type systemClock struct{}

func (systemClock) Now() time.Time { return time.Now() }

// Config configures a Client. The zero value is valid: every field has a default.
type Config struct {
	// Schema holds the tables: a schema on PostgreSQL, a database on MySQL. Default: none, so the connection's
	// search path (PostgreSQL) or default database (MySQL) decides. SQLite has none.
	Schema string
	// Table is the outbox table. Default: DefaultTable ("postbox_outbox").
	Table string
	// InboxTable is the inbox table. Default: DefaultInboxTable ("postbox_inbox").
	InboxTable string
	// Partitioned makes Migrate create the outbox partitioned by creation time and the inbox partitioned by the
	// time in its message IDs (PostgreSQL and MySQL), the layout for high volume: old rows leave by dropping whole
	// partitions (package partition) instead of by deletes. It only shapes tables that Migrate has yet to create.
	// Default: false.
	Partitioned bool
	// Ordered makes the client's relays publish the messages of each key one at a time, in enqueue order, and
	// makes Migrate add the index they need to find each key's next message with one probe (migration 3). Set it
	// on every client of the table set, the relay's included, and run Migrate.
	//
	// An ordered relay claims a message only when no earlier message with its key is pending, so a failing message
	// holds back its own key and no other (RelayConfig.DeadHoldsKey makes a dead one hold it too). Keys are spread
	// over workers and relays; messages with an empty key are not ordered. Enqueue order is commit order only when
	// the application serialises the transactions of one key, as it does by locking the aggregate's row. A claim
	// walks pending messages in ID order until it has RelayConfig.BatchSize heads of keys; when fewer heads are
	// free to claim, because there are few keys or other workers and relays hold them, it walks the whole backlog.
	// A walk costs an index probe or two per message walked, whether or not the database has analysed the table
	// (docs/PERFORMANCE.md, "The ordered claim without statistics").
	// Keep BatchSize at most the number of busy keys divided by the number of ordered workers on the table (one
	// per relay by default). The index costs every Enqueue of a message with a key one more index entry, which is
	// why ordering is off by default. Default: false.
	Ordered bool
	// SQLAPI makes Migrate install the SQL enqueue API (migration 6): on PostgreSQL the functions
	// <table>_enqueue and <table>_enqueue_batch, on MySQL and MariaDB the procedure <table>_enqueue, which
	// validate a message as Enqueue does, give it a UUIDv7 and insert it in the caller's transaction, so that
	// producers in any language enqueue with SQL (docs/SCHEMA.md). It applies to existing tables too. Default:
	// false.
	SQLAPI bool
	// MaxPayloadBytes is the largest payload Enqueue accepts. Default: DefaultMaxPayloadBytes (1 MiB), which
	// fits the default limit of every supported broker.
	MaxPayloadBytes int
	// Clock stamps created and available times. Default: the system clock.
	Clock Clock
	// Logger receives the client's and its relays' logs. Default: slog.Default().
	Logger *slog.Logger
	// NotifyInterval is the least time between two wake-ups this client adds to enqueuing transactions, on
	// databases that have them (PostgreSQL). Transactions enqueued within the interval carry none: a relay claims
	// again shortly after each wake-up to catch them. A wake-up in every transaction would serialise commits.
	// Default: DefaultNotifyInterval (10ms).
	NotifyInterval time.Duration
	// DisableNotify stops Enqueue from waking listening relays; they then find new messages by polling. Default:
	// false.
	DisableNotify bool
	// Registry, when set, is the catalogue of event types this client may enqueue: Enqueue refuses a message
	// that breaks it (an error wrapping ErrInvalidMessage, nothing written), and the client's relays park such a
	// message as dead instead of publishing it. Default: none, every well-formed message is accepted.
	Registry *Registry
	// OnEnqueue, when set, is called with the Enqueue context for every message before it is validated, and may
	// add headers: a tracing integration adds the traceparent of the span that enqueues. The message's Headers
	// map is a copy, so changing it never changes the caller's. Default: none.
	OnEnqueue func(ctx context.Context, m *Message)
}

// WithDefaults returns a copy of c with every zero field set to its default. A nil c gives the defaults.
func (c *Config) WithDefaults() Config {
	var out Config
	if c != nil {
		out = *c
	}
	if out.Table == "" {
		out.Table = DefaultTable
	}
	if out.InboxTable == "" {
		out.InboxTable = DefaultInboxTable
	}
	if out.MaxPayloadBytes == 0 {
		out.MaxPayloadBytes = DefaultMaxPayloadBytes
	}
	if out.Clock == nil {
		out.Clock = systemClock{}
	}
	if out.Logger == nil {
		out.Logger = slog.Default()
	}
	if out.NotifyInterval == 0 {
		out.NotifyInterval = DefaultNotifyInterval
	}
	return out
}

func (c Config) names() driver.Names {
	return driver.Names{Schema: c.Schema, Outbox: c.Table, Inbox: c.InboxTable, Partitioned: c.Partitioned, Ordered: c.Ordered,
		SQLAPI: c.SQLAPI}
}

func (c Config) validate(caps driver.Capabilities) error {
	if err := c.names().Validate(); err != nil {
		return fmt.Errorf("%w: %w", ErrInvalidConfig, err)
	}
	if c.Schema != "" && !caps.Schemas {
		return fmt.Errorf("%w: Schema %q is set but %s has no schemas; leave Schema empty", ErrInvalidConfig, c.Schema, caps.Dialect)
	}
	if c.NotifyInterval < 0 {
		return fmt.Errorf("%w: NotifyInterval is %v; use a positive interval, 0 for the default, or set DisableNotify", ErrInvalidConfig, c.NotifyInterval)
	}
	if c.Partitioned && !caps.Partitions {
		return fmt.Errorf("%w: Partitioned is set but %s has no table partitioning; leave Partitioned false and use a Cleaner", ErrInvalidConfig, caps.Dialect)
	}
	if c.MaxPayloadBytes < 0 {
		return fmt.Errorf("%w: MaxPayloadBytes is %d; use a positive limit or 0 for the default", ErrInvalidConfig, c.MaxPayloadBytes)
	}
	return nil
}

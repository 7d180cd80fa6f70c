package postbox

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/postbox-go/postbox/driver"
)

// Client enqueues messages inside the caller's transactions and gives operators access to the outbox. TTx is the
// driver's transaction type: pgx.Tx for pgxv5, *sql.Tx for databasesql. A Client is safe for concurrent use.
type Client[TTx any] struct {
	drv    driver.Driver[TTx]
	store  driver.Store[TTx]
	cfg    Config
	notify *notifier[TTx]
	local  *localRelays // the running relays made from this client
}

// NewClient returns a client for the tables named in cfg (nil for the defaults). It does no I/O and creates no
// tables: run Migrate, or apply Migrations with your own tool, first.
func NewClient[TTx any](drv driver.Driver[TTx], cfg *Config) (*Client[TTx], error) {
	if drv == nil {
		return nil, fmt.Errorf("%w: driver is nil; pass one such as pgxv5.New(pool) or databasesql.New(db, databasesql.Postgres)", ErrInvalidConfig)
	}
	c := cfg.WithDefaults()
	if err := c.validate(drv.Capabilities()); err != nil {
		return nil, err
	}
	store, err := drv.Store(c.names())
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrInvalidConfig, err)
	}
	return &Client[TTx]{drv: drv, store: store, cfg: c, notify: newNotifier(store, c), local: &localRelays{}}, nil
}

// Config returns the client's configuration with defaults applied.
func (c *Client[TTx]) Config() Config { return c.cfg }

// Driver returns the driver the client was made with.
func (c *Client[TTx]) Driver() driver.Driver[TTx] { return c.drv }

// Enqueue writes m into the outbox inside tx and returns the message's ID: m.ID in lower case, or the UUIDv7 it
// generated when m.ID is empty. The message is published only if tx commits. Enqueue never commits or rolls back
// tx; when m is invalid it returns an error wrapping ErrInvalidMessage before writing anything, and tx stays usable.
// Relays made from this client that run in this process look for the message soon after (see RelayConfig.QuietDivisor).
func (c *Client[TTx]) Enqueue(ctx context.Context, tx TTx, m Message) (string, error) {
	r, err := c.prepare(ctx, m)
	if err != nil {
		return "", err
	}
	if err := c.notify.insert(ctx, tx, []driver.Record{r}); err != nil {
		return "", fmt.Errorf("postbox: enqueue %s: %w", r.ID, err)
	}
	c.local.enqueued()
	return r.ID, nil
}

// EnqueueBatch writes msgs into the outbox inside tx in one round trip. Every message is validated first: if one
// is invalid, nothing is written and the error names it. Generated IDs are written back into msgs.
func (c *Client[TTx]) EnqueueBatch(ctx context.Context, tx TTx, msgs []Message) error {
	if len(msgs) == 0 {
		return nil
	}
	recs := make([]driver.Record, len(msgs))
	seen := make(map[string]int, len(msgs))
	for i, m := range msgs {
		r, err := c.prepare(ctx, m)
		if err != nil {
			return fmt.Errorf("message %d of %d: %w", i, len(msgs), err)
		}
		if j, dup := seen[r.ID]; dup {
			return fmt.Errorf("message %d of %d: %w", i, len(msgs), invalid("ID %s is also message %d's; IDs must be unique", r.ID, j))
		}
		seen[r.ID] = i
		recs[i] = r
	}
	if err := c.notify.insert(ctx, tx, recs); err != nil {
		return fmt.Errorf("postbox: enqueue batch of %d: %w", len(recs), err)
	}
	c.local.enqueued()
	for i := range msgs {
		msgs[i].ID = recs[i].ID
	}
	return nil
}

// Migrate creates or upgrades the outbox tables, applying only the migrations not yet applied. It is safe to run
// from several processes at once. It returns the versions it applied.
func (c *Client[TTx]) Migrate(ctx context.Context) ([]int, error) {
	return c.store.Migrate(ctx)
}

// Migration is one versioned schema change for the client's tables.
type Migration struct {
	// Version orders the migrations: apply them in increasing order.
	Version int
	// Name says what the migration does.
	Name string
	// SQL is the migration's statements for the configured tables and database. It is idempotent.
	SQL string
}

// MigrationState is a migration and whether it has been applied.
type MigrationState struct {
	Migration
	Applied bool
	// AppliedAt is when Migrate applied it; zero unless Applied.
	AppliedAt time.Time
}

// MigrationStatus lists every migration and whether it has been applied.
func (c *Client[TTx]) MigrationStatus(ctx context.Context) ([]MigrationState, error) {
	states, err := c.store.MigrationStatus(ctx)
	if err != nil {
		return nil, err
	}
	out := make([]MigrationState, len(states))
	for i, s := range states {
		out[i] = MigrationState{Migration: Migration(s.Migration), Applied: s.Applied, AppliedAt: s.AppliedAt}
	}
	return out, nil
}

// Migrations returns the SQL of every migration for the configured tables, for golang-migrate, goose, atlas or a
// review. Each one is idempotent.
func (c *Client[TTx]) Migrations() []Migration {
	ms := c.store.Migrations()
	out := make([]Migration, len(ms))
	for i, m := range ms {
		out[i] = Migration(m)
	}
	return out
}

// InTx runs fn in a new transaction and commits it when fn returns nil; otherwise it rolls back and returns fn's
// error (with the rollback's error joined, if any). Once a transaction that enqueued commits, it wakes the relays
// made from this client that run in this process.
func (c *Client[TTx]) InTx(ctx context.Context, fn func(ctx context.Context, tx TTx) error) error {
	before := c.local.enqueues.Load()
	tx, err := c.drv.Begin(ctx)
	if err != nil {
		return fmt.Errorf("postbox: begin: %w", err)
	}
	if err := fn(ctx, tx); err != nil {
		if rerr := c.drv.Rollback(context.WithoutCancel(ctx), tx); rerr != nil {
			return errors.Join(err, fmt.Errorf("postbox: rollback: %w", rerr))
		}
		return err
	}
	if err := c.drv.Commit(ctx, tx); err != nil {
		return fmt.Errorf("postbox: commit: %w", err)
	}
	c.local.committed(before)
	return nil
}

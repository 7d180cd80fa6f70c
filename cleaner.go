package postbox

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/postbox-go/postbox/driver"
)

// Defaults for CleanupConfig.
const (
	// DefaultRetention is how long published messages are kept by default: 7 days.
	DefaultRetention = 7 * 24 * time.Hour
	// DefaultInboxRetention is how long inbox claims are kept by default: 7 days.
	DefaultInboxRetention  = 7 * 24 * time.Hour
	DefaultCleanupInterval = time.Minute
	DefaultCleanupBatch    = 1000
)

// CleanupConfig configures a Cleaner. The zero value is valid: every field has a default.
type CleanupConfig struct {
	// Retention is how long published messages (RelayConfig.KeepPublished) are kept after publishing. Default:
	// DefaultRetention (7 days).
	Retention time.Duration
	// DeadRetention, when set, deletes dead messages whose last failure is more than DeadRetention ago. Default:
	// 0, which keeps dead messages until an operator retries or purges them.
	DeadRetention time.Duration
	// InboxRetention is how long inbox claims are kept after they were received, and failure counts after their
	// last failure. A message redelivered after its claim was deleted is processed again, so InboxRetention must
	// exceed the broker's redelivery horizon: the longest time from a message's first delivery to its last
	// possible redelivery, counting the broker's own retries and retention, replays from a stored stream or an
	// offset reset, consumer downtime, and the relay republishing a batch it could not settle, with a margin.
	// Raise it when a message can come back later than 7 days, such as from a Kafka topic or NATS stream that
	// keeps messages for a week or more and a consumer that may rewind to its start. Default:
	// DefaultInboxRetention (7 days).
	InboxRetention time.Duration
	// KeepInbox leaves the inbox alone, for a cleaner that should delete outbox messages only. Default: false.
	KeepInbox bool
	// Interval is how often Run cleans. Default: DefaultCleanupInterval (1m).
	Interval time.Duration
	// BatchSize bounds the rows each delete removes, and so how long it holds its locks. Default:
	// DefaultCleanupBatch (1000).
	BatchSize int
	// Logger receives the cleaner's logs. Default: the client's logger.
	Logger *slog.Logger
}

// WithDefaults returns a copy of c with every zero field set to its default. A nil c gives the defaults.
func (c *CleanupConfig) WithDefaults() CleanupConfig {
	var out CleanupConfig
	if c != nil {
		out = *c
	}
	setDefault(&out.Retention, DefaultRetention)
	setDefault(&out.InboxRetention, DefaultInboxRetention)
	setDefault(&out.Interval, DefaultCleanupInterval)
	setDefault(&out.BatchSize, DefaultCleanupBatch)
	return out
}

func (c CleanupConfig) validate() error {
	for _, f := range []struct {
		name string
		v    int64
	}{{"Retention", int64(c.Retention)}, {"DeadRetention", int64(c.DeadRetention)}, {"InboxRetention", int64(c.InboxRetention)},
		{"Interval", int64(c.Interval)}, {"BatchSize", int64(c.BatchSize)}} {
		if f.v < 0 {
			return fmt.Errorf("%w: CleanupConfig.%s is negative; use a positive value or 0 for the default", ErrInvalidConfig, f.name)
		}
	}
	return nil
}

// CleanupResult counts what one cleanup run deleted.
type CleanupResult struct {
	Published int64 // published messages
	Dead      int64 // dead messages
	Inbox     int64 // inbox claims and failure counts
	Batches   int   // delete statements that removed at least one row
}

// cleanupStore is the part of a driver.Store a Cleaner uses, whatever its transaction type.
type cleanupStore interface {
	Cleanup(ctx context.Context, p driver.CleanupParams) (driver.CleanupResult, error)
}

// Cleaner keeps the outbox and the inbox small: on a schedule it deletes published messages past their
// retention, dead messages past theirs when asked, and inbox claims and failure counts past theirs, in bounded
// batches, one instance per table set at a time. It never deletes a pending message. Partitioned tables drop
// whole partitions instead (package partition), though a Cleaner works on them too.
//
// Run one wherever it suits: in every relay or consumer process (the others skip their turn while one cleans),
// or from cron with RunOnce.
type Cleaner struct {
	store cleanupStore
	clock Clock
	cfg   CleanupConfig
	log   *slog.Logger
}

// NewCleaner returns a cleaner of client's outbox and inbox. cfg may be nil for the defaults. It does no I/O;
// call Run or RunOnce.
func NewCleaner[TTx any](client *Client[TTx], cfg *CleanupConfig) (*Cleaner, error) {
	if client == nil {
		return nil, fmt.Errorf("%w: NewCleaner needs a client from NewClient", ErrInvalidConfig)
	}
	c := cfg.WithDefaults()
	if err := c.validate(); err != nil {
		return nil, err
	}
	log := c.Logger
	if log == nil {
		log = client.cfg.Logger
	}
	log = log.With("component", "postbox.cleaner", "table", client.cfg.Table, "inbox_table", client.cfg.InboxTable)
	return &Cleaner{store: client.store, clock: client.cfg.Clock, cfg: c, log: log}, nil
}

// RunOnce deletes everything past retention now, batch after batch, and returns what it deleted. It returns
// ErrLocked, having deleted nothing, when another instance is cleaning the same table set; when another takes
// over between two batches, it returns what it deleted and no error.
func (c *Cleaner) RunOnce(ctx context.Context) (CleanupResult, error) {
	now := c.clock.Now()
	limit := c.cfg.BatchSize
	p := driver.CleanupParams{PublishedBefore: now.Add(-c.cfg.Retention), Limit: limit}
	if c.cfg.DeadRetention > 0 {
		p.DeadBefore = now.Add(-c.cfg.DeadRetention)
	}
	if !c.cfg.KeepInbox {
		p.InboxBefore = now.Add(-c.cfg.InboxRetention)
	}
	var res CleanupResult
	for first := true; ; first = false {
		if err := ctx.Err(); err != nil {
			return res, err
		}
		b, err := c.store.Cleanup(ctx, p)
		if errors.Is(err, ErrLocked) && !first {
			return res, nil
		}
		if err != nil {
			return res, fmt.Errorf("postbox: cleanup: %w", err)
		}
		res.Published, res.Dead, res.Inbox = res.Published+b.Published, res.Dead+b.Dead, res.Inbox+b.InboxClaims+b.InboxFailures
		for _, n := range []int64{b.Published, b.Dead, b.InboxClaims, b.InboxFailures} {
			if n > 0 {
				res.Batches++
			}
		}
		// Ask again only for the sets that came back full.
		full := func(n int64) bool { return n >= int64(limit) }
		if !full(b.Published) {
			p.PublishedBefore = time.Time{}
		}
		if !full(b.Dead) {
			p.DeadBefore = time.Time{}
		}
		if !full(b.InboxClaims) && !full(b.InboxFailures) {
			p.InboxBefore = time.Time{}
		}
		if p.PublishedBefore.IsZero() && p.DeadBefore.IsZero() && p.InboxBefore.IsZero() {
			return res, nil
		}
	}
}

// Run cleans at once and then every Interval until ctx is done, and returns nil. Errors are logged and the next
// run tries again; a run that finds another instance cleaning skips its turn.
func (c *Cleaner) Run(ctx context.Context) error {
	t := time.NewTicker(c.cfg.Interval)
	defer t.Stop()
	for {
		res, err := c.RunOnce(ctx)
		switch {
		case ctx.Err() != nil:
			return nil
		case errors.Is(err, ErrLocked):
			c.log.DebugContext(ctx, "another instance is cleaning; skipping this run")
		case err != nil:
			c.log.ErrorContext(ctx, "cleanup failed", "err", err)
		case res.Published+res.Dead+res.Inbox > 0:
			c.log.InfoContext(ctx, "cleaned up", "published", res.Published, "dead", res.Dead, "inbox", res.Inbox,
				"batches", res.Batches)
		}
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
	}
}

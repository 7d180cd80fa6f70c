package postbox

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"
)

// DefaultInboxRetention is how long inbox claims are kept by default: 7 days.
const DefaultInboxRetention = 7 * 24 * time.Hour

// InboxCleanup deletes inbox claims received more than retention ago, and failure counts not updated for as long,
// in batches of at most batchSize rows per table, each batch its own short transaction, until none is left or ctx
// is done. It returns how many rows it deleted. Only one instance cleans an inbox at a time: a concurrent call
// returns ErrLocked (PostgreSQL) or waits its turn (SQLite).
//
// A message redelivered after its claim was deleted is processed again. So the retention must exceed the broker's
// redelivery horizon: the longest time from a message's first delivery to its last possible redelivery, counting
// the broker's own retries and retention, replays from a stored stream or an offset reset, consumer downtime, and
// the relay republishing a batch it could not settle, with a margin. Raise it above DefaultInboxRetention (7 days)
// when a message can come back later than that, such as from a Kafka topic or NATS stream that keeps messages
// for a week or more and a consumer that may rewind to its start.
func (c *Client[TTx]) InboxCleanup(ctx context.Context, retention time.Duration, batchSize int) (int64, error) {
	if retention <= 0 || batchSize <= 0 {
		return 0, fmt.Errorf("%w: InboxCleanup needs a positive retention and batch size, got %v and %d; the default retention is DefaultInboxRetention",
			ErrInvalidConfig, retention, batchSize)
	}
	before := c.cfg.Clock.Now().Add(-retention)
	var total int64
	for ctx.Err() == nil {
		n, err := c.store.InboxCleanup(ctx, before, batchSize)
		total += n
		if err != nil {
			return total, fmt.Errorf("postbox: inbox cleanup: %w", err)
		}
		// n counts both tables: below one batch, neither was full.
		if n < int64(batchSize) {
			break
		}
	}
	return total, ctx.Err()
}

// InboxCleanupConfig configures RunInboxCleanup. The zero value is valid: every field has a default.
type InboxCleanupConfig struct {
	// Retention is how long claims are kept; see InboxCleanup for how to choose it. Default:
	// DefaultInboxRetention (7 days).
	Retention time.Duration
	// Interval is the time between cleanups. Default: DefaultCleanupInterval (1m).
	Interval time.Duration
	// BatchSize is the most rows one delete takes. Default: DefaultCleanupBatch (1000).
	BatchSize int
	// Logger receives the cleaner's logs. Default: the client's logger.
	Logger *slog.Logger
}

// RunInboxCleanup runs InboxCleanup at once and then every cfg.Interval until ctx is done, and returns nil then.
// Errors are logged and retried at the next interval; it returns an error only for an invalid cfg (nil for the
// defaults). Run it in any number of instances: one cleans at a time and the others skip their turn.
func (c *Client[TTx]) RunInboxCleanup(ctx context.Context, cfg *InboxCleanupConfig) error {
	var cc InboxCleanupConfig
	if cfg != nil {
		cc = *cfg
	}
	setDefault(&cc.Retention, DefaultInboxRetention)
	setDefault(&cc.Interval, DefaultCleanupInterval)
	setDefault(&cc.BatchSize, DefaultCleanupBatch)
	if cc.Retention < 0 || cc.Interval < 0 || cc.BatchSize < 0 {
		return fmt.Errorf("%w: InboxCleanupConfig has a negative Retention, Interval or BatchSize (%v, %v, %d); use positive values or 0 for the defaults",
			ErrInvalidConfig, cc.Retention, cc.Interval, cc.BatchSize)
	}
	log := cc.Logger
	if log == nil {
		log = c.cfg.Logger
	}
	log = log.With("component", "postbox.inbox_cleanup", "table", c.cfg.InboxTable)
	t := time.NewTicker(cc.Interval)
	defer t.Stop()
	for {
		n, err := c.InboxCleanup(ctx, cc.Retention, cc.BatchSize)
		switch {
		case errors.Is(err, ErrLocked), ctx.Err() != nil:
		case err != nil:
			log.ErrorContext(ctx, "inbox cleanup failed", "err", err)
		case n > 0:
			log.InfoContext(ctx, "cleaned up inbox", "deleted", n)
		}
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
	}
}

package postbox

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/postbox-go/postbox/driver"
)

// CleanupResult counts what one cleanup run deleted.
type CleanupResult = driver.CleanupResult

// CleanupConfig configures a Cleaner. The zero value is valid: every field has a default.
type CleanupConfig struct {
	// Retention is how long published messages (RelayConfig.KeepPublished) are kept after publishing. Default:
	// DefaultRetention (7 days).
	Retention time.Duration
	// DeadRetention, when set, deletes dead messages whose last failure is more than DeadRetention ago. Default:
	// 0, which keeps dead messages until an operator retries or purges them.
	DeadRetention time.Duration
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
	setDefault(&out.Interval, DefaultCleanupInterval)
	setDefault(&out.BatchSize, DefaultCleanupBatch)
	return out
}

func (c CleanupConfig) validate() error {
	for _, f := range []struct {
		name string
		v    int64
	}{{"Retention", int64(c.Retention)}, {"DeadRetention", int64(c.DeadRetention)}, {"Interval", int64(c.Interval)}, {"BatchSize", int64(c.BatchSize)}} {
		if f.v < 0 {
			return fmt.Errorf("%w: CleanupConfig.%s is negative; use a positive value or 0 for the default", ErrInvalidConfig, f.name)
		}
	}
	return nil
}

// Cleaner keeps an unpartitioned outbox small: on a schedule it deletes published messages past their retention
// and, when asked, dead messages past theirs, in bounded batches, one instance at a time. It never deletes a
// pending message. Partitioned tables drop whole partitions instead (package partition), though a Cleaner works
// on them too.
//
// A relay with KeepPublished runs one itself; run a Cleaner of your own to delete dead messages, or to clean from
// one process only.
type Cleaner[TTx any] struct {
	client *Client[TTx]
	cfg    CleanupConfig
	log    *slog.Logger
}

// NewCleaner returns a cleaner of client's outbox. cfg may be nil for the defaults. It does no I/O; call Run or
// RunOnce.
func NewCleaner[TTx any](client *Client[TTx], cfg *CleanupConfig) (*Cleaner[TTx], error) {
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
	return &Cleaner[TTx]{client: client, cfg: c, log: log.With("component", "postbox.cleaner", "table", client.cfg.Table)}, nil
}

// RunOnce deletes everything past retention now, batch after batch, and returns what it deleted. It returns
// ErrLocked, having deleted nothing, when another instance is cleaning the same table.
func (c *Cleaner[TTx]) RunOnce(ctx context.Context) (CleanupResult, error) {
	now := c.client.cfg.Clock.Now()
	p := driver.CleanupParams{PublishedBefore: now.Add(-c.cfg.Retention), BatchSize: c.cfg.BatchSize}
	if c.cfg.DeadRetention > 0 {
		p.DeadBefore = now.Add(-c.cfg.DeadRetention)
	}
	return c.client.cleanup(ctx, p)
}

// Run cleans at once and then every Interval until ctx is done, and returns nil. Errors are logged and the next
// run tries again; a run that finds another instance cleaning skips its turn.
func (c *Cleaner[TTx]) Run(ctx context.Context) error {
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
		case res.Published+res.Dead > 0:
			c.log.InfoContext(ctx, "cleaned up", "published", res.Published, "dead", res.Dead, "batches", res.Batches)
		}
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
	}
}

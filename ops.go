package postbox

import (
	"context"
	"fmt"
	"time"

	"github.com/postbox-go/postbox/driver"
)

// TopicStats are the pending and dead counts of one topic.
type TopicStats struct {
	Topic   string
	Pending int64
	Dead    int64
	// OldestPending is the creation time of the topic's oldest pending message; zero when none is pending.
	OldestPending time.Time
}

// Stats summarise the outbox.
type Stats struct {
	Pending int64
	Dead    int64
	// OldestPending is the creation time of the oldest pending message; zero when none is pending.
	OldestPending time.Time
	Topics        []TopicStats
}

// DeadFilter selects dead messages by topic, by IDs, or all of them. A filter that selects nothing by accident is
// refused: set Topic, IDs or All.
type DeadFilter struct {
	// Topic selects the dead messages of one topic.
	Topic string
	// IDs selects dead messages by ID.
	IDs []string
	// All selects every dead message; it is how a filter says so on purpose.
	All bool
	// Limit bounds how many messages ListDead returns; 0 means no limit. The other calls ignore it.
	Limit int
}

// Empty reports whether f selects nothing, which ListDead, RetryDead and PurgeDead refuse.
func (f DeadFilter) Empty() bool { return f.Topic == "" && len(f.IDs) == 0 && !f.All }

// Stats counts pending and dead messages, in total and per topic.
func (c *Client[TTx]) Stats(ctx context.Context) (Stats, error) {
	topics, err := c.store.Stats(ctx)
	if err != nil {
		return Stats{}, fmt.Errorf("postbox: stats: %w", err)
	}
	var s Stats
	if topics != nil {
		s.Topics = make([]TopicStats, len(topics))
	}
	for i, t := range topics {
		s.Topics[i] = TopicStats(t)
		s.Pending += t.Pending
		s.Dead += t.Dead
		if !t.OldestPending.IsZero() && (s.OldestPending.IsZero() || t.OldestPending.Before(s.OldestPending)) {
			s.OldestPending = t.OldestPending
		}
	}
	return s, nil
}

func (c *Client[TTx]) checkFilter(f *DeadFilter) error {
	if f.Empty() {
		return fmt.Errorf("%w: the dead-letter filter selects nothing; set Topic, IDs or All", ErrInvalidConfig)
	}
	for i, id := range f.IDs {
		norm, err := parseUUID(id)
		if err != nil {
			return fmt.Errorf("%w: dead-letter filter: %v", ErrInvalidConfig, err)
		}
		f.IDs[i] = norm
	}
	return nil
}

// ListDead returns the dead messages f selects, oldest first, with their attempts and last error.
func (c *Client[TTx]) ListDead(ctx context.Context, f DeadFilter) ([]Record, error) {
	if err := c.checkFilter(&f); err != nil {
		return nil, err
	}
	rows, err := c.store.ListDead(ctx, driver.DeadFilter(f))
	if err != nil {
		return nil, fmt.Errorf("postbox: list dead: %w", err)
	}
	return fromRows(rows), nil
}

// RetryDead makes the dead messages f selects pending again, at once and with their attempts reset, and returns
// how many it revived. Their last error is kept until they are published.
func (c *Client[TTx]) RetryDead(ctx context.Context, f DeadFilter) (int64, error) {
	if err := c.checkFilter(&f); err != nil {
		return 0, err
	}
	n, err := c.store.RetryDead(ctx, driver.DeadFilter(f), c.cfg.Clock.Now())
	if err != nil {
		return 0, fmt.Errorf("postbox: retry dead: %w", err)
	}
	return n, nil
}

// PurgeDead deletes the dead messages f selects and returns how many it deleted.
func (c *Client[TTx]) PurgeDead(ctx context.Context, f DeadFilter) (int64, error) {
	if err := c.checkFilter(&f); err != nil {
		return 0, err
	}
	n, err := c.store.PurgeDead(ctx, driver.DeadFilter(f))
	if err != nil {
		return 0, fmt.Errorf("postbox: purge dead: %w", err)
	}
	return n, nil
}

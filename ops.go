package postbox

import (
	"context"
	"fmt"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/postbox-go/postbox/driver"
)

// TopicStats are the pending and dead counts of one topic.
type TopicStats struct {
	Topic string
	// Pending counts the messages waiting to be published: Ready + Scheduled.
	Pending int64
	// Ready counts the pending messages that are due: their AvailableAt has passed, or a publish failed and they
	// wait to be retried.
	Ready int64
	// Scheduled counts the pending messages enqueued with an AvailableAt still ahead and never attempted. They
	// are not late: they do not age OldestPending.
	Scheduled int64
	Dead      int64
	// OldestPending is when the topic's longest-waiting ready message became due: its creation time, or its
	// AvailableAt when it was scheduled later. Zero when no message is ready. A time far in the past means no
	// relay is keeping up, or publishes keep failing.
	OldestPending time.Time
}

// Stats summarise the outbox.
type Stats struct {
	// Pending counts the messages waiting to be published: Ready + Scheduled.
	Pending int64
	// Ready counts the pending messages that are due or waiting to retry a failed publish.
	Ready int64
	// Scheduled counts the pending messages whose AvailableAt is still ahead (send --delay); they are not lag.
	Scheduled int64
	Dead      int64
	// OldestPending is when the longest-waiting ready message became due (see TopicStats.OldestPending); zero
	// when no message is ready.
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
	topics, err := c.store.Stats(ctx, c.cfg.Clock.Now())
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
		s.Ready += t.Ready
		s.Scheduled += t.Scheduled
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

// checkFilterText refuses a dead-letter filter topic that Enqueue would refuse as a topic: a filter is an
// operator's input and travels to the database, where some drivers escape it themselves.
func checkFilterText(f DeadFilter) error {
	switch {
	case len(f.Topic) > MaxTopicLen:
		return fmt.Errorf("%w: dead-letter filter: topic is %d bytes; the limit is %d", ErrInvalidConfig, len(f.Topic), MaxTopicLen)
	case !utf8.ValidString(f.Topic):
		return fmt.Errorf("%w: dead-letter filter: topic %q is not valid UTF-8", ErrInvalidConfig, f.Topic)
	case strings.ContainsFunc(f.Topic, isControl):
		return fmt.Errorf("%w: dead-letter filter: topic %q contains a control character or a bidirectional override", ErrInvalidConfig, f.Topic)
	}
	return nil
}

// ListDead returns the dead messages f selects, oldest first, with their attempts and last error.
func (c *Client[TTx]) ListDead(ctx context.Context, f DeadFilter) ([]Record, error) {
	if err := checkFilterText(f); err != nil {
		return nil, err
	}
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
	if err := checkFilterText(f); err != nil {
		return 0, err
	}
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
	if err := checkFilterText(f); err != nil {
		return 0, err
	}
	if err := c.checkFilter(&f); err != nil {
		return 0, err
	}
	n, err := c.store.PurgeDead(ctx, driver.DeadFilter(f))
	if err != nil {
		return 0, fmt.Errorf("postbox: purge dead: %w", err)
	}
	return n, nil
}

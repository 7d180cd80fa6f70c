package postbox

import (
	"context"
	"errors"
	"fmt"
	"strconv"
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

// DeadFilter selects dead messages: those that match every field set. A filter that selects nothing by accident
// is refused: set Topic, IDs, Type, Key, ErrorContains, FailedFrom, FailedBefore, or All.
type DeadFilter struct {
	// Topic selects the dead messages of one topic.
	Topic string
	// IDs selects dead messages by ID.
	IDs []string
	// All selects every dead message; it is how a filter says so on purpose.
	All bool
	// Limit bounds how many messages ListDead returns; 0 means no limit. The other calls ignore it.
	Limit int
	// Type selects the dead messages of one event type (Message.Type, the CloudEvents type).
	Type string
	// Key selects the dead messages with this key.
	Key string
	// ErrorContains selects the dead messages whose last error contains this text, matched literally and
	// case-sensitively; % and _ are plain characters.
	ErrorContains string
	// FailedFrom and FailedBefore select the dead messages whose last failure falls in [FailedFrom,
	// FailedBefore); either may be zero for an open end. The time compared is the record's AvailableAt, which
	// the last failure set to the failure time plus its backoff, so it is at most BackoffMax after the failure.
	FailedFrom, FailedBefore time.Time
	// After continues a listing: ListDead returns only messages after this ID in its order (the last ID of the
	// previous page). The other calls ignore it.
	After string
	// Newest makes ListDead list newest first (by ID, which is creation time); default oldest first.
	Newest bool
	// Actor names who asks, for the log line RetryDead and PurgeDead write; it selects nothing.
	Actor string
}

// Empty reports whether f selects nothing, which ListDead, CountDead, RetryDead and PurgeDead refuse.
func (f DeadFilter) Empty() bool { return f.driver().Empty() }

// driver returns the store's form of f.
func (f DeadFilter) driver() driver.DeadFilter {
	return driver.DeadFilter{Topic: f.Topic, IDs: f.IDs, All: f.All, Limit: f.Limit, Type: f.Type, Key: f.Key,
		ErrorContains: f.ErrorContains, FailedFrom: f.FailedFrom, FailedBefore: f.FailedBefore, After: f.After,
		Newest: f.Newest}
}

// Count is a count that stops at a cap, so that it reads a bounded number of rows.
type Count struct {
	// N is the count, at most the cap.
	N int64
	// More reports that more than N match: N is the cap.
	More bool
}

// String returns N, or "more than N" when More is set.
func (c Count) String() string {
	if c.More {
		return "more than " + strconv.FormatInt(c.N, 10)
	}
	return strconv.FormatInt(c.N, 10)
}

// DefaultCountLimit is the cap CountDead and CountReplay use when given 0.
const DefaultCountLimit = 100_000

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

// checkFilter validates f and puts its IDs in canonical form.
func (c *Client[TTx]) checkFilter(f *DeadFilter) error {
	if f.Empty() {
		return fmt.Errorf("%w: the dead-letter filter selects nothing; set Topic, IDs, Type, Key, ErrorContains, FailedFrom, FailedBefore or All", ErrInvalidConfig)
	}
	ids := make([]string, len(f.IDs))
	for i, id := range f.IDs {
		norm, err := parseUUID(id)
		if err != nil {
			return fmt.Errorf("%w: dead-letter filter: %v", ErrInvalidConfig, err)
		}
		ids[i] = norm
	}
	if f.IDs != nil {
		f.IDs = ids
	}
	if f.After != "" {
		norm, err := parseUUID(f.After)
		if err != nil {
			return fmt.Errorf("%w: dead-letter filter: after: %v", ErrInvalidConfig, err)
		}
		f.After = norm
	}
	if f.Limit < 0 {
		return fmt.Errorf("%w: dead-letter filter: limit is %d; use a positive number, or 0 for no limit", ErrInvalidConfig, f.Limit)
	}
	if !f.FailedFrom.IsZero() && !f.FailedBefore.IsZero() && !f.FailedFrom.Before(f.FailedBefore) {
		return fmt.Errorf("%w: dead-letter filter: failed-from %s is not before failed-before %s", ErrInvalidConfig,
			f.FailedFrom.Format(time.RFC3339), f.FailedBefore.Format(time.RFC3339))
	}
	return nil
}

// checkFilterText refuses dead-letter filter text that Enqueue would refuse in a message (a topic, type or key
// too long, not UTF-8, or with control characters), and error text longer than a stored error: a filter is an
// operator's input and travels to the database, where some drivers escape it themselves.
func checkFilterText(f DeadFilter) error {
	for _, t := range []struct {
		name, s string
		max     int
	}{
		{"topic", f.Topic, MaxTopicLen},
		{"type", f.Type, MaxTypeLen},
		{"key", f.Key, MaxKeyLen},
		{"error text", f.ErrorContains, MaxLastErrorLen},
		{"actor", f.Actor, MaxActorLen},
	} {
		if err := checkOperatorText("dead-letter filter: "+t.name, t.s, t.max); err != nil {
			return err
		}
	}
	return nil
}

// MaxActorLen is the longest actor name operator calls accept.
const MaxActorLen = 255

// checkOperatorText refuses operator input that Enqueue would refuse as message text.
func checkOperatorText(what, s string, max int) error {
	switch {
	case len(s) > max:
		return fmt.Errorf("%w: %s is %d bytes; the limit is %d", ErrInvalidConfig, what, len(s), max)
	case !utf8.ValidString(s):
		return fmt.Errorf("%w: %s %q is not valid UTF-8", ErrInvalidConfig, what, s)
	case strings.ContainsFunc(s, isControl):
		return fmt.Errorf("%w: %s %q contains a control character or a bidirectional override", ErrInvalidConfig, what, s)
	}
	return nil
}

// checkDead validates f as ListDead, CountDead, RetryDead and PurgeDead do.
func (c *Client[TTx]) checkDead(f *DeadFilter) error {
	if err := checkFilterText(*f); err != nil {
		return err
	}
	return c.checkFilter(f)
}

// ListDead returns the dead messages f selects with their attempts and last error, oldest first (newest first
// with f.Newest), at most f.Limit. For the next page, call again with f.After set to the last ID returned.
func (c *Client[TTx]) ListDead(ctx context.Context, f DeadFilter) ([]Record, error) {
	if err := c.checkDead(&f); err != nil {
		return nil, err
	}
	rows, err := c.store.ListDead(ctx, f.driver())
	if err != nil {
		return nil, fmt.Errorf("postbox: list dead: %w", err)
	}
	return fromRows(rows), nil
}

// CountDead counts the dead messages f selects, reading at most limit+1 of them (0 means DefaultCountLimit): a
// Count with More set means more than limit, for a confirmation such as "more than 100000 messages will be
// retried".
func (c *Client[TTx]) CountDead(ctx context.Context, f DeadFilter, limit int64) (Count, error) {
	if err := c.checkDead(&f); err != nil {
		return Count{}, err
	}
	op, err := c.operator("count dead messages")
	if err != nil {
		return Count{}, err
	}
	limit = countLimit(limit)
	n, err := op.CountDead(ctx, f.driver(), limit)
	if err != nil {
		return Count{}, fmt.Errorf("postbox: count dead: %w", err)
	}
	return capped(n, limit), nil
}

// countLimit returns limit, or DefaultCountLimit for 0 or less.
func countLimit(limit int64) int64 {
	if limit <= 0 {
		return DefaultCountLimit
	}
	return limit
}

// capped turns a count read up to limit+1 into a Count.
func capped(n, limit int64) Count {
	if n > limit {
		return Count{N: limit, More: true}
	}
	return Count{N: n}
}

// RetryDead makes the dead messages f selects pending again, at once and with their attempts reset, and returns
// how many it revived. Their last error is kept until they are published. It logs the outcome with f.Actor.
func (c *Client[TTx]) RetryDead(ctx context.Context, f DeadFilter) (int64, error) {
	if err := c.checkDead(&f); err != nil {
		return 0, err
	}
	n, err := c.store.RetryDead(ctx, f.driver(), c.cfg.Clock.Now())
	if err != nil {
		return 0, fmt.Errorf("postbox: retry dead: %w", err)
	}
	c.logOp(ctx, "dead messages retried", f.Actor, "count", n, "filter", f.String())
	return n, nil
}

// PurgeDead deletes the dead messages f selects and returns how many it deleted. It logs the outcome with
// f.Actor.
func (c *Client[TTx]) PurgeDead(ctx context.Context, f DeadFilter) (int64, error) {
	if err := c.checkDead(&f); err != nil {
		return 0, err
	}
	n, err := c.store.PurgeDead(ctx, f.driver())
	if err != nil {
		return 0, fmt.Errorf("postbox: purge dead: %w", err)
	}
	c.logOp(ctx, "dead messages purged", f.Actor, "count", n, "filter", f.String())
	return n, nil
}

// String describes the fields of f that select, for logs.
func (f DeadFilter) String() string {
	var parts []string
	add := func(name, v string) {
		if v != "" {
			parts = append(parts, name+"="+strconv.Quote(v))
		}
	}
	add("topic", f.Topic)
	add("type", f.Type)
	add("key", f.Key)
	add("error", f.ErrorContains)
	if !f.FailedFrom.IsZero() {
		add("failed-from", f.FailedFrom.UTC().Format(time.RFC3339))
	}
	if !f.FailedBefore.IsZero() {
		add("failed-before", f.FailedBefore.UTC().Format(time.RFC3339))
	}
	if len(f.IDs) > 0 {
		parts = append(parts, "ids="+strconv.Itoa(len(f.IDs)))
	}
	if f.All {
		parts = append(parts, "all")
	}
	return strings.Join(parts, " ")
}

// logOp logs a change an operator made, with who made it.
func (c *Client[TTx]) logOp(ctx context.Context, msg, actor string, args ...any) {
	c.cfg.Logger.InfoContext(ctx, msg, append([]any{"component", "postbox.ops", "table", c.cfg.Table, "actor", actor}, args...)...)
}

// operator returns the store's driver.Operator, or an error wrapping errors.ErrUnsupported naming what.
func (c *Client[TTx]) operator(what string) (driver.Operator, error) {
	op, ok := c.store.(driver.Operator)
	if !ok {
		return nil, fmt.Errorf("postbox: the %s driver cannot %s: %w", c.drv.Capabilities().Dialect, what, errors.ErrUnsupported)
	}
	return op, nil
}

// Operator is what an operator's tool (the postbox command, a console) uses of a Client, without the Client's
// transaction type: a *Client of any driver is one. Every method is documented on Client.
type Operator interface {
	Config() Config
	Stats(ctx context.Context) (Stats, error)
	Overview(ctx context.Context, limit int64) (Overview, error)
	MigrationStatus(ctx context.Context) ([]MigrationState, error)

	ListDead(ctx context.Context, f DeadFilter) ([]Record, error)
	CountDead(ctx context.Context, f DeadFilter, limit int64) (Count, error)
	RetryDead(ctx context.Context, f DeadFilter) (int64, error)
	PurgeDead(ctx context.Context, f DeadFilter) (int64, error)

	FindMessage(ctx context.Context, id string) (Record, error)
	FindByKey(ctx context.Context, key string, limit int) ([]Record, error)
	CountReplay(ctx context.Context, f ReplayFilter, limit int64) (Count, error)
	ReplayPublished(ctx context.Context, f ReplayFilter, actor string) (int64, error)
	ResendEdited(ctx context.Context, originalID string, m Message, actor string) (string, error)

	PauseTopic(ctx context.Context, topic, actor string) (bool, error)
	ResumeTopic(ctx context.Context, topic, actor string) (bool, error)
	PausedTopics(ctx context.Context) ([]PausedTopic, error)

	InboxConsumers(ctx context.Context) ([]string, error)
	InboxView(ctx context.Context, consumer string, since time.Time, limit int) (InboxView, error)
	RetryInbox(ctx context.Context, consumer, messageID, actor string) (bool, error)

	Relays(ctx context.Context) ([]RelayStatus, error)
}

var _ Operator = (*Client[any])(nil)

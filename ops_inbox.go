package postbox

import (
	"context"
	"fmt"
	"time"

	"github.com/postbox-go/postbox/driver"
)

// Defaults of the inbox view.
const (
	// DefaultInboxViewLimit is how many failing and given-up messages InboxView lists when given 0.
	DefaultInboxViewLimit = 100
	// MaxInboxConsumers is the most consumer names InboxConsumers returns.
	MaxInboxConsumers = 1000
)

// InboxMinute counts one consumer's inbox claims received in one minute.
type InboxMinute struct {
	// Minute is the minute's start, in UTC.
	Minute time.Time
	// Processed counts the messages the consumer's handler committed.
	Processed int64
	// Failed counts the messages recorded as failed (given up) in that minute.
	Failed int64
}

// InboxEntry is a message a consumer failed to process.
type InboxEntry struct {
	Consumer string
	// MessageID is the inbox key: the message ID, or with ConsumerConfig.ScopeBySource the source, a space and
	// the ID. Pass it as is to RetryInbox.
	MessageID string
	// Failures counts the failed deliveries.
	Failures int
	// LastError is the handler's last error, truncated to MaxLastErrorLen bytes.
	LastError string
	// At is when the last failure was counted or, for a given-up message, when it was recorded as failed.
	At time.Time
}

// InboxView is what one consumer's inbox shows an operator. The inbox keeps keys, counts and errors, never a
// payload: a given-up message's payload is in the producer's outbox when it keeps published messages
// (FindMessage), or in the copy ConsumerConfig.DeadLetterTopic enqueues.
type InboxView struct {
	Consumer string
	// Minutes count the claims received per minute since the time given, oldest first; minutes without any
	// are left out.
	Minutes []InboxMinute
	// Failing are messages whose deliveries failed fewer than MaxFailures times so far, latest first: the broker
	// redelivers them.
	Failing []InboxEntry
	// GivenUp are messages recorded as failed (MaxFailures reached, or a Permanent error), latest first: later
	// deliveries are acknowledged as duplicates and skip the handler.
	GivenUp []InboxEntry
}

// InboxConsumers lists the consumer names with claims or failure counts in the inbox, in name order, at most
// MaxInboxConsumers. It reads the inbox's primary key one name at a time, never the claims of a name.
func (c *Client[TTx]) InboxConsumers(ctx context.Context) ([]string, error) {
	op, err := c.operator("list inbox consumers")
	if err != nil {
		return nil, err
	}
	names, err := op.InboxConsumers(ctx, MaxInboxConsumers)
	if err != nil {
		return nil, fmt.Errorf("postbox: inbox consumers: %w", err)
	}
	return names, nil
}

// InboxView returns consumer's claims per minute received since since (at most a day back; zero means the last
// hour), and its failing and given-up messages, at most limit of each (0 means DefaultInboxViewLimit).
func (c *Client[TTx]) InboxView(ctx context.Context, consumer string, since time.Time, limit int) (InboxView, error) {
	if err := checkConsumer(consumer); err != nil {
		return InboxView{}, err
	}
	if limit <= 0 {
		limit = DefaultInboxViewLimit
	}
	now := c.cfg.Clock.Now()
	if since.IsZero() {
		since = now.Add(-time.Hour)
	}
	if earliest := now.Add(-24 * time.Hour); since.Before(earliest) {
		since = earliest
	}
	since = since.Truncate(time.Minute)
	op, err := c.operator("show the inbox")
	if err != nil {
		return InboxView{}, err
	}
	v := InboxView{Consumer: consumer}
	minutes, err := op.InboxActivity(ctx, consumer, since, now.Add(time.Minute).Truncate(time.Minute))
	if err != nil {
		return InboxView{}, fmt.Errorf("postbox: inbox activity of %q: %w", consumer, err)
	}
	for _, m := range minutes {
		v.Minutes = append(v.Minutes, InboxMinute(m))
	}
	failing, err := op.InboxFailing(ctx, consumer, limit)
	if err != nil {
		return InboxView{}, fmt.Errorf("postbox: failing inbox messages of %q: %w", consumer, err)
	}
	givenUp, err := op.InboxGivenUp(ctx, consumer, limit)
	if err != nil {
		return InboxView{}, fmt.Errorf("postbox: given-up inbox messages of %q: %w", consumer, err)
	}
	v.Failing, v.GivenUp = inboxEntries(failing), inboxEntries(givenUp)
	return v, nil
}

// RetryInbox forgets that consumer gave up on the message with the inbox key messageID (InboxEntry.MessageID),
// or its failure count, so that the message's next delivery runs the handler again with a fresh count. It
// reports whether there was anything to forget; a processed message is left alone. The broker was told the
// message was handled, so it redelivers it only when asked: replay it from the producer (ReplayPublished, when
// the producer keeps published messages) or from the broker. It logs the change with actor.
func (c *Client[TTx]) RetryInbox(ctx context.Context, consumer, messageID, actor string) (bool, error) {
	if err := checkConsumer(consumer); err != nil {
		return false, err
	}
	if messageID == "" {
		return false, fmt.Errorf("%w: inbox retry: the message ID is empty", ErrInvalidConfig)
	}
	if err := checkOperatorText("inbox retry: message ID", messageID, MaxMessageIDLen); err != nil {
		return false, err
	}
	if err := checkOperatorText("inbox retry: actor", actor, MaxActorLen); err != nil {
		return false, err
	}
	op, err := c.operator("retry inbox messages")
	if err != nil {
		return false, err
	}
	done, err := op.InboxRetry(ctx, consumer, messageID)
	if err != nil {
		return false, fmt.Errorf("postbox: inbox retry %q of %q: %w", messageID, consumer, err)
	}
	if done {
		c.logOp(ctx, "inbox message retried", actor, "consumer", consumer, "message_id", messageID)
	}
	return done, nil
}

func checkConsumer(consumer string) error {
	if consumer == "" {
		return fmt.Errorf("%w: the consumer name is empty", ErrInvalidConfig)
	}
	return checkOperatorText("consumer", consumer, MaxConsumerLen)
}

func inboxEntries(rows []driver.InboxEntry) []InboxEntry {
	if rows == nil {
		return nil
	}
	out := make([]InboxEntry, len(rows))
	for i, r := range rows {
		out[i] = InboxEntry(r)
	}
	return out
}

package postbox

import (
	"context"
	"errors"
	"fmt"
)

// Handler processes one delivered message inside tx and returns the messages to enqueue into the outbox in the
// same transaction (nil for none). It must do its database work on tx and must not commit or roll it back. An
// error rolls back everything the delivery did, the inbox claim included; wrap it with Permanent when no
// redelivery can succeed. It is the one handler type of Postbox's consumers: Process, Consumer.Process,
// JSONHandler and broker.Consume all take it.
type Handler[TTx any] func(ctx context.Context, tx TTx, m Message) ([]Message, error)

// Outcome is what became of one delivery, and so how to settle it with the broker.
type Outcome int

// Outcomes of a delivery.
const (
	// Retry: the delivery failed and everything it did was rolled back; Process returned the error. Nack the
	// message (or let it time out) so that the broker redelivers it.
	Retry Outcome = iota
	// Processed: the handler ran and its writes, its messages and the claim committed. Ack the message.
	Processed
	// Duplicate: the message had been claimed already, so the handler did not run. Ack the message.
	Duplicate
	// Failed: the failure policy gave up on the message and recorded it as failed; it will not reach the handler
	// again. Ack the message.
	Failed
	// Rejected: the delivery can never be processed, so nothing was written and the error Process returned is
	// marked Permanent: its message ID is not valid, it exceeds one of the consumer's caps (ConsumerConfig), or
	// the handler failed with a Permanent error and no failure policy records it. Reject the message where the
	// broker can (it is dropped or dead-lettered), and ack and log it otherwise, so that it is not redelivered
	// forever.
	Rejected
)

// Ack reports whether the caller should acknowledge the message to the broker: for Processed, Duplicate and
// Failed. Retry is nacked and Rejected rejected (see Rejected).
func (o Outcome) Ack() bool { return o == Processed || o == Duplicate || o == Failed }

// String returns the outcome's name.
func (o Outcome) String() string {
	switch o {
	case Retry:
		return "retry"
	case Processed:
		return "processed"
	case Duplicate:
		return "duplicate"
	case Failed:
		return "failed"
	case Rejected:
		return "rejected"
	}
	return fmt.Sprintf("Outcome(%d)", int(o))
}

// Result reports what Process did with one delivery.
type Result struct {
	Outcome Outcome
	// Enqueued are the messages that committed into the outbox, with their IDs: the handler's when Processed,
	// the dead letter when Failed with a DeadLetterTopic.
	Enqueued []Message
	// Failures is the number of failed deliveries of the message counted so far, this one included, when this
	// delivery failed under a failure policy (ConsumerConfig.MaxFailures); 0 otherwise.
	Failures int
	// Err is the handler's last error when the outcome is Failed, and the reason when it is Rejected.
	Err error
}

// Process runs h exactly once for the message m delivered to the consumer called consumer: it begins a
// transaction, claims m's ID in the inbox, calls h, enqueues the messages h returns into the outbox, and commits.
// A message claimed before is a Duplicate and h does not run. The Result's Outcome says how to settle the message
// with the broker (see Outcome); broker.Consume does that for any broker.Subscriber. A non-nil error means
// everything was rolled back. It applies the default consumer configuration; make a Consumer with NewConsumer to
// give up after a number of failures, change the caps on delivered messages or scope the inbox by source.
func Process[TTx any](ctx context.Context, client *Client[TTx], consumer string, m Message, h Handler[TTx]) (Result, error) {
	c, err := NewConsumer(client, consumer, nil)
	if err != nil {
		return Result{}, err
	}
	return c.Process(ctx, m, h)
}

// Process runs h exactly once for the delivered message m, as the package function Process does, with the
// consumer's configuration: when the failure policy gives up on m the outcome is Failed and the error nil, so
// that the caller acks. m.ID must be the broker's message ID (the CloudEvents id), the same on every redelivery.
// A consumer whose inbox is scoped by source (ConsumerConfig.ScopeBySource) needs ProcessFrom instead.
func (c *Consumer[TTx]) Process(ctx context.Context, m Message, h Handler[TTx]) (Result, error) {
	return c.ProcessFrom(ctx, "", m, h)
}

// ProcessFrom is Process for a message produced by source, the CloudEvents source of the delivery
// (broker.Delivery.Source). With ConsumerConfig.ScopeBySource the inbox deduplicates m by (source, m.ID), so a
// producer cannot suppress another's message by reusing its ID; otherwise source is ignored.
func (c *Consumer[TTx]) ProcessFrom(ctx context.Context, source string, m Message, h Handler[TTx]) (Result, error) {
	if h == nil {
		return Result{}, fmt.Errorf("%w: Process needs a handler", ErrInvalidConfig)
	}
	key, err := c.checkDelivery(source, m)
	if err != nil {
		err = Permanent(err)
		return Result{Outcome: Rejected, Err: err}, err
	}
	res, handlerErr, err := c.attempt(ctx, key, m, h)
	if err == nil {
		return res, nil
	}
	// Failures beginning, claiming or committing say nothing about the message, and failures while ctx is done
	// may come from the shutdown: neither is held against the message.
	if !handlerErr || ctx.Err() != nil {
		return Result{Outcome: Retry}, err
	}
	if c.cfg.MaxFailures == 0 {
		if IsPermanent(err) {
			return Result{Outcome: Rejected, Err: err}, err
		}
		return Result{Outcome: Retry}, err
	}
	// Counted in a transaction of its own, after the delivery's has rolled back: on SQLite a second transaction
	// could not begin inside the first.
	fail, dead, ferr := c.recordFailure(ctx, key, m, err)
	if ferr != nil {
		return Result{Outcome: Retry}, errors.Join(err, ferr)
	}
	if !fail.Failed {
		return Result{Outcome: Retry, Failures: fail.Failures}, err
	}
	c.log.WarnContext(ctx, "message recorded as failed; it will not be processed again",
		"message_id", m.ID, "type", m.Type, "failures", fail.Failures, "err", err)
	return Result{Outcome: Failed, Enqueued: dead, Failures: fail.Failures, Err: err}, nil
}

// attempt runs one delivery in a transaction of its own: begin, inbox claim, handler, enqueue of the handler's
// messages, commit. handlerErr reports that err came from the message's own processing (the handler or the
// messages it returned), which the failure policy counts. Whatever fails, and on a panic, the transaction rolls
// back, and the rollback's error never hides the cause.
func (c *Consumer[TTx]) attempt(ctx context.Context, key string, m Message, h Handler[TTx]) (res Result, handlerErr bool, err error) {
	drv := c.client.drv
	enqueues := c.client.local.enqueues.Load()
	tx, err := drv.Begin(ctx)
	if err != nil {
		return Result{}, false, fmt.Errorf("postbox: begin: %w", err)
	}
	committed := false
	defer func() {
		if committed {
			return
		}
		// Roll back even when ctx is done.
		if rerr := drv.Rollback(context.WithoutCancel(ctx), tx); rerr != nil {
			err = errors.Join(err, fmt.Errorf("postbox: rollback: %w", rerr))
		}
	}()
	fresh, err := c.claim(ctx, tx, key)
	if err != nil {
		return Result{}, false, err
	}
	res.Outcome = Duplicate
	if fresh {
		out, err := h(ctx, tx, m)
		if err != nil {
			return Result{}, true, err
		}
		if err := c.client.EnqueueBatch(ctx, tx, out); err != nil {
			return Result{}, true, fmt.Errorf("postbox: enqueue the messages the handler returned: %w", err)
		}
		res = Result{Outcome: Processed, Enqueued: out}
	}
	if err := drv.Commit(ctx, tx); err != nil {
		// Whether or not the commit reached the database, a redelivery is safe: it is either processed or found
		// to be a duplicate.
		return Result{}, false, fmt.Errorf("postbox: commit: %w", err)
	}
	committed = true
	c.client.local.committed(enqueues) // wake this process's relays when the handler's messages committed
	return res, false, nil
}

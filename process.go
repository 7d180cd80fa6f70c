package postbox

import (
	"context"
	"errors"
	"fmt"
)

// Handler processes one delivered message inside tx and returns the messages to enqueue into the outbox in the
// same transaction (nil for none). It must do its database work on tx and must not commit or roll it back. An
// error rolls back everything the delivery did, the inbox claim included.
type Handler[TTx any] func(ctx context.Context, tx TTx, m Message) ([]Message, error)

// HandlerFunc is a handler in a middleware chain. The transaction, when a Transaction middleware began one, is
// in ctx (see TxFromContext). A nil error means the caller may ack the message.
type HandlerFunc func(ctx context.Context, m Message) ([]Message, error)

// Middleware wraps a HandlerFunc, for users who route messages themselves.
type Middleware func(next HandlerFunc) HandlerFunc

// Chain composes middleware; the first one is the outermost.
func Chain(mw ...Middleware) Middleware {
	return func(next HandlerFunc) HandlerFunc {
		for i := len(mw) - 1; i >= 0; i-- {
			next = mw[i](next)
		}
		return next
	}
}

// TxHandler adapts h to a HandlerFunc that takes its transaction from ctx, for use behind a Transaction
// middleware. Without a transaction in ctx it returns an error and does not call h.
func TxHandler[TTx any](h Handler[TTx]) HandlerFunc {
	return func(ctx context.Context, m Message) ([]Message, error) {
		tx, ok := TxFromContext[TTx](ctx)
		if !ok {
			return nil, errNoTx("the handler")
		}
		return h(ctx, tx, m)
	}
}

type txKey struct{}

// TxFromContext returns the transaction a Transaction middleware put in ctx.
func TxFromContext[TTx any](ctx context.Context) (TTx, bool) {
	tx, ok := ctx.Value(txKey{}).(TTx)
	return tx, ok
}

func errNoTx(who string) error {
	return fmt.Errorf("postbox: %s needs a transaction in its context; put the Transaction middleware before it", who)
}

// Outcome is what became of one delivery.
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
)

// Ack reports whether the caller should acknowledge the message to the broker: for every outcome but Retry.
func (o Outcome) Ack() bool { return o != Retry }

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
	// Err is the handler's last error when the outcome is Failed.
	Err error
}

// report collects the outcome of one delivery as it passes through the middleware.
type report struct {
	outcome    Outcome
	enqueued   []Message
	failures   int
	err        error
	handlerErr bool // the error came from inside the claim, where the message's own processing runs
}

type reportKey struct{}

// withReport returns ctx's report, or a new one in a derived context.
func withReport(ctx context.Context) (context.Context, *report) {
	if r, ok := ctx.Value(reportKey{}).(*report); ok {
		return ctx, r
	}
	r := &report{}
	return context.WithValue(ctx, reportKey{}, r), r
}

// reportFrom returns ctx's report, or a throwaway one when no middleware reads the outcome.
func reportFrom(ctx context.Context) *report {
	if r, ok := ctx.Value(reportKey{}).(*report); ok {
		return r
	}
	return &report{}
}

// Process runs h exactly once for the message m delivered to the consumer called consumer: it begins a
// transaction, claims m's ID in the inbox, calls h, enqueues the messages h returns into the outbox, and commits.
// A message claimed before is a Duplicate and h does not run. Ack the message when the error is nil (Processed or
// Duplicate); a non-nil error means everything was rolled back and the broker should redeliver it. It applies the
// default failure policy; make a Consumer with NewConsumer to give up after a number of failures.
func Process[TTx any](ctx context.Context, client *Client[TTx], consumer string, m Message, h Handler[TTx]) (Result, error) {
	c, err := NewConsumer(client, consumer, nil)
	if err != nil {
		return Result{}, err
	}
	return c.Process(ctx, m, h)
}

// Process runs h exactly once for the delivered message m, as the package function Process does, with the
// consumer's failure policy: when it gives up on m the outcome is Failed and the error nil, so that the caller
// acks. m.ID must be the broker's message ID (the CloudEvents id), the same on every redelivery.
func (c *Consumer[TTx]) Process(ctx context.Context, m Message, h Handler[TTx]) (Result, error) {
	if h == nil {
		return Result{}, fmt.Errorf("%w: Process needs a handler", ErrInvalidConfig)
	}
	if err := checkMessageID(m.ID); err != nil {
		return Result{}, err
	}
	// A report of our own, even inside another delivery's handler.
	rep := &report{}
	ctx = context.WithValue(ctx, reportKey{}, rep)
	_, err := c.Middleware()(TxHandler(h))(ctx, m)
	res := Result{Outcome: rep.outcome, Enqueued: rep.enqueued, Failures: rep.failures, Err: rep.err}
	if err != nil {
		res.Outcome, res.Enqueued = Retry, nil
	}
	return res, err
}

// Middleware returns the consumer's whole chain: Failures, Transaction, Inbox, Outbox. Wrap your handler with it
// (TxHandler adapts a Handler) and ack when it returns a nil error.
func (c *Consumer[TTx]) Middleware() Middleware {
	return Chain(c.Failures(), c.Transaction(), c.Inbox(), c.Outbox())
}

// Transaction begins a transaction for each delivery, puts it in the context for the middleware and handler
// inside, and commits it when they return a nil error; otherwise, or if they panic, it rolls back.
func (c *Consumer[TTx]) Transaction() Middleware {
	drv := c.client.drv
	return func(next HandlerFunc) HandlerFunc {
		return func(ctx context.Context, m Message) (_ []Message, err error) {
			tx, err := drv.Begin(ctx)
			if err != nil {
				return nil, fmt.Errorf("postbox: begin: %w", err)
			}
			committed := false
			defer func() {
				if committed {
					return
				}
				// Roll back even when ctx is done, and never let the rollback's error hide the cause.
				if rerr := drv.Rollback(context.WithoutCancel(ctx), tx); rerr != nil {
					err = errors.Join(err, fmt.Errorf("postbox: rollback: %w", rerr))
				}
			}()
			out, err := next(context.WithValue(ctx, txKey{}, tx), m)
			if err != nil {
				return nil, err
			}
			if err := drv.Commit(ctx, tx); err != nil {
				// Whether or not the commit reached the database, a redelivery is safe: it is either processed
				// or found to be a duplicate.
				return nil, fmt.Errorf("postbox: commit: %w", err)
			}
			committed = true
			return out, nil
		}
	}
}

// Inbox claims each message in the transaction from ctx before calling next. A duplicate returns nil without
// calling next, so that the caller acks it. It must run inside Transaction.
func (c *Consumer[TTx]) Inbox() Middleware {
	return func(next HandlerFunc) HandlerFunc {
		return func(ctx context.Context, m Message) ([]Message, error) {
			rep := reportFrom(ctx)
			tx, ok := TxFromContext[TTx](ctx)
			if !ok {
				return nil, errNoTx("the Inbox middleware")
			}
			fresh, err := c.Claim(ctx, tx, m.ID)
			if err != nil {
				return nil, err
			}
			if !fresh {
				rep.outcome = Duplicate
				return nil, nil
			}
			out, err := next(ctx, m)
			if err != nil {
				rep.handlerErr = true
				return nil, err
			}
			rep.outcome = Processed
			return out, nil
		}
	}
}

// Outbox enqueues the messages next returns into the outbox, in the transaction from ctx, and returns none, so
// that they are published by the relay once the transaction commits and never directly. It must run inside
// Transaction.
func (c *Consumer[TTx]) Outbox() Middleware {
	return func(next HandlerFunc) HandlerFunc {
		return func(ctx context.Context, m Message) ([]Message, error) {
			out, err := next(ctx, m)
			if err != nil || len(out) == 0 {
				return nil, err
			}
			tx, ok := TxFromContext[TTx](ctx)
			if !ok {
				return nil, errNoTx("the Outbox middleware")
			}
			if err := c.client.EnqueueBatch(ctx, tx, out); err != nil {
				return nil, fmt.Errorf("postbox: enqueue the messages the handler returned: %w", err)
			}
			reportFrom(ctx).enqueued = out
			return nil, nil
		}
	}
}

// Failures applies the consumer's failure policy (ConsumerConfig.MaxFailures). When a delivery fails inside the
// inbox claim, it counts the failure in a transaction of its own and, when the count reaches MaxFailures or the
// error is Permanent, records the message as failed and returns nil so that the caller acks it. Errors beginning,
// claiming or committing say nothing about the message and are not counted, nor are failures while ctx is done
// (a consumer shutting down). It must be the outermost of the consumer's middleware: on SQLite a transaction of
// its own could not begin inside another.
func (c *Consumer[TTx]) Failures() Middleware {
	return func(next HandlerFunc) HandlerFunc {
		return func(ctx context.Context, m Message) ([]Message, error) {
			ctx, rep := withReport(ctx)
			out, err := next(ctx, m)
			if err == nil || !rep.handlerErr || c.cfg.MaxFailures == 0 || ctx.Err() != nil {
				return out, err
			}
			rep.enqueued = nil
			res, ferr := c.recordFailure(ctx, m, err, rep)
			if ferr != nil {
				return nil, errors.Join(err, ferr)
			}
			rep.failures = res.Failures
			if !res.Failed {
				return nil, err
			}
			rep.outcome, rep.err = Failed, err
			c.log.WarnContext(ctx, "message recorded as failed; it will not be processed again",
				"message_id", m.ID, "type", m.Type, "failures", res.Failures, "err", err)
			return nil, nil
		}
	}
}

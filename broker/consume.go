package broker

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/postbox-go/postbox"
)

// ConsumeConfig configures Consume. The zero value is valid: every field has a default.
type ConsumeConfig struct {
	// NackDelay returns how long the broker should wait before delivering a message again after a delivery
	// whose outcome was Retry, given the delivery's Attempt (0 when the broker does not count). Brokers without
	// delayed redelivery ignore it. Default: DefaultMinNackDelay doubling with each attempt up to
	// DefaultMaxNackDelay, with jitter, so that a failing message does not spin.
	NackDelay func(attempt int) time.Duration
	// SettleTimeout bounds each Ack, Nack or Reject. Settling uses a context detached from ctx's cancellation,
	// so a message whose effects committed is acked even while Consume is stopping. Default:
	// DefaultSettleTimeout.
	SettleTimeout time.Duration
	// Logger receives the deliveries that failed or were rejected, and settle failures. Default: slog.Default().
	Logger *slog.Logger
	// OnOutcome, when set, is called with each delivery's Result and error after it was processed and before it
	// is settled, for metrics. It must not settle the delivery. Default: none.
	OnOutcome func(ctx context.Context, d *Delivery, res postbox.Result, err error)
}

// WithDefaults returns a copy of c with every zero field set to its default. A nil c gives the defaults.
func (c *ConsumeConfig) WithDefaults() ConsumeConfig {
	var out ConsumeConfig
	if c != nil {
		out = *c
	}
	if out.NackDelay == nil {
		out.NackDelay = nackDelay
	}
	if out.SettleTimeout == 0 {
		out.SettleTimeout = DefaultSettleTimeout
	}
	if out.Logger == nil {
		out.Logger = slog.Default()
	}
	return out
}

func (c ConsumeConfig) validate() error {
	if c.SettleTimeout < 0 {
		return fmt.Errorf("%w: ConsumeConfig.SettleTimeout is %v; use a positive duration, or 0 for the default", postbox.ErrInvalidConfig, c.SettleTimeout)
	}
	return nil
}

// Consume receives messages from sub and processes each exactly once through consumer with h, settling every
// delivery by its outcome, so that no ack glue is needed:
//
//   - Processed, Duplicate and Failed are acked, after the transaction committed;
//   - Retry is nacked, to be delivered again after cfg.NackDelay (at once when ctx is done);
//   - Rejected (an invalid message ID, a message over the consumer's caps, a Permanent error with no failure
//     policy) is rejected where the broker can reject, and otherwise acked and logged as an error, so that a
//     message that can never be processed is not redelivered forever.
//
// It passes each delivery's CloudEvents source to consumer.ProcessFrom, for consumers that scope their inbox by
// source. Like sub.Receive, Consume blocks: it returns nil after ctx is cancelled and every running delivery
// settled, or an error when the subscriber cannot go on. Deliveries run as concurrently as the subscriber's
// configuration allows. cfg may be nil for the defaults.
//
// Consumers that skip the inbox call sub.Receive with a DeliveryHandler of their own and settle each Delivery
// themselves.
func Consume[TTx any](ctx context.Context, sub Subscriber, consumer *postbox.Consumer[TTx], h postbox.Handler[TTx], cfg *ConsumeConfig) error {
	switch {
	case sub == nil:
		return fmt.Errorf("%w: Consume needs a subscriber from a broker adapter", postbox.ErrInvalidConfig)
	case consumer == nil:
		return fmt.Errorf("%w: Consume needs a consumer; make one with postbox.NewConsumer(client, \"billing\", nil)", postbox.ErrInvalidConfig)
	case h == nil:
		return fmt.Errorf("%w: Consume needs a handler", postbox.ErrInvalidConfig)
	}
	c := cfg.WithDefaults()
	if err := c.validate(); err != nil {
		return err
	}
	return sub.Receive(ctx, c.handler(func(ctx context.Context, d *Delivery) (postbox.Result, error) {
		return consumer.ProcessFrom(ctx, d.Source, d.Message, h)
	}))
}

// handler returns the DeliveryHandler that runs process and settles each delivery by its outcome.
func (c ConsumeConfig) handler(process func(context.Context, *Delivery) (postbox.Result, error)) DeliveryHandler {
	return func(ctx context.Context, d *Delivery) {
		res, err := process(ctx, d)
		if c.OnOutcome != nil {
			c.OnOutcome(ctx, d, res, err)
		}
		sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), c.SettleTimeout)
		defer cancel()
		attrs := []any{"id", d.Message.ID, "topic", d.Message.Topic, "attempt", d.Attempt, "outcome", res.Outcome}
		switch {
		case res.Outcome.Ack():
			if aerr := d.Ack(sctx); aerr != nil {
				c.Logger.WarnContext(ctx, "ack failed; the broker will deliver the message again", append(attrs, "err", aerr)...)
			}
		case res.Outcome == postbox.Rejected:
			attrs = append(attrs, "err", err)
			rerr := d.Reject(sctx)
			switch {
			case rerr == nil:
				c.Logger.ErrorContext(ctx, "message can never be processed; rejected", attrs...)
			case errors.Is(rerr, errors.ErrUnsupported):
				c.Logger.ErrorContext(ctx, "message can never be processed; acked, as this broker cannot reject", attrs...)
				if aerr := d.Ack(sctx); aerr != nil {
					c.Logger.WarnContext(ctx, "ack failed; the broker will deliver the message again", append(attrs, "ack_err", aerr)...)
				}
			default:
				c.Logger.WarnContext(ctx, "reject failed; the broker will deliver the message again", append(attrs, "reject_err", rerr)...)
			}
		case ctx.Err() != nil:
			// Stopping: offer the message to another consumer at once rather than after a backoff.
			_ = d.Nack(sctx, 0)
		default:
			wait := c.NackDelay(d.Attempt)
			c.Logger.WarnContext(ctx, "delivery failed; the message will be delivered again", append(attrs, "err", err, "retry_in", wait)...)
			if nerr := d.Nack(sctx, wait); nerr != nil {
				c.Logger.WarnContext(ctx, "nack failed; the broker will deliver the message again after its ack timeout",
					append(attrs, "nack_err", nerr)...)
			}
		}
	}
}

package broker

import (
	"context"
	"errors"
	"log/slog"
	"time"

	"github.com/postbox-go/postbox"
)

// Handler processes one message. Returning nil means the message's effects are committed; an error means they
// are not and the message should come again. Wrap the error with postbox.Permanent when no retry can succeed.
// postbox.Process, with its inbox, fits here.
type Handler func(ctx context.Context, m postbox.Message) error

// Defaults for AckPolicy.
const (
	DefaultMinNackDelay = time.Second
	DefaultMaxNackDelay = time.Minute
)

// AckPolicy says how AckAfter settles deliveries. The zero value is ready to use.
type AckPolicy struct {
	// NackDelay returns how long the broker should wait before delivering a failed message again, given the
	// delivery's Attempt (0 when the broker does not count). Default: DefaultMinNackDelay doubling with each
	// attempt up to DefaultMaxNackDelay, so a failing message does not spin. Brokers without delayed
	// redelivery ignore it.
	NackDelay func(attempt int) time.Duration
	// SettleTimeout bounds each Ack, Nack or Reject. Settling uses a context detached from the handler's
	// cancellation: a message whose effects committed is acked even while Receive is stopping. Default:
	// DefaultSettleTimeout.
	SettleTimeout time.Duration
	// Logger receives handler and settle failures. Default: slog.Default().
	Logger *slog.Logger
}

// AckAfter returns a DeliveryHandler that runs h and acks the delivery only after h returned nil. An error
// nacks it with the default backoff; an error wrapped with postbox.Permanent rejects it where the broker can
// reject, and nacks it otherwise. It is AckPolicy{}.Wrap(h).
func AckAfter(h Handler) DeliveryHandler { return AckPolicy{}.Wrap(h) }

// Wrap returns a DeliveryHandler that runs h and settles each delivery by the policy: ack after h returned nil,
// reject after a permanent error (nack if the broker cannot reject), nack after any other error.
func (p AckPolicy) Wrap(h Handler) DeliveryHandler {
	delay := p.NackDelay
	if delay == nil {
		delay = backoff
	}
	timeout := p.SettleTimeout
	if timeout <= 0 {
		timeout = DefaultSettleTimeout
	}
	log := p.Logger
	if log == nil {
		log = slog.Default()
	}
	return func(ctx context.Context, d *Delivery) {
		err := h(ctx, d.Message)
		sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), timeout)
		defer cancel()
		if err == nil {
			if aerr := d.Ack(sctx); aerr != nil {
				log.WarnContext(ctx, "ack failed; the broker will deliver the message again", "id", d.Message.ID,
					"topic", d.Message.Topic, "err", aerr)
			}
			return
		}
		attrs := []any{"id", d.Message.ID, "topic", d.Message.Topic, "attempt", d.Attempt, "err", err}
		if postbox.IsPermanent(err) {
			rerr := d.Reject(sctx)
			if rerr == nil {
				log.ErrorContext(ctx, "handler failed permanently; message rejected", attrs...)
				return
			}
			if !errors.Is(rerr, errors.ErrUnsupported) {
				log.WarnContext(ctx, "reject failed; the broker will deliver the message again", append(attrs, "reject_err", rerr)...)
				return
			}
		}
		if ctx.Err() != nil {
			// Stopping: offer the message to another consumer at once rather than after a backoff.
			_ = d.Nack(sctx, 0)
			return
		}
		wait := delay(d.Attempt)
		log.WarnContext(ctx, "handler failed; message will be delivered again", append(attrs, "retry_in", wait)...)
		if nerr := d.Nack(sctx, wait); nerr != nil {
			log.WarnContext(ctx, "nack failed; the broker will deliver the message again after its ack timeout",
				append(attrs, "nack_err", nerr)...)
		}
	}
}

// backoff is the default NackDelay: 1s, 2s, 4s… up to a minute.
func backoff(attempt int) time.Duration {
	d := DefaultMinNackDelay
	for i := 1; i < attempt && d < DefaultMaxNackDelay; i++ {
		d *= 2
	}
	return min(d, DefaultMaxNackDelay)
}

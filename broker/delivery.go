package broker

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"time"
)

// Subscriber receives messages from a broker. What it consumes (stream and consumer, topics and group, queue,
// subscription) is fixed by the adapter's configuration, so one Subscriber is one consumer.
type Subscriber interface {
	// Receive calls handle for each delivered message until ctx is cancelled, then waits for every running call
	// of handle to return and returns nil. It returns an error early only when it cannot go on (the consumer was
	// deleted, the credentials were refused); transient broker errors are retried, not returned.
	//
	// handle may be called concurrently, up to the adapter's configured concurrency, except that calls for
	// messages the broker orders relative to each other (the same key, partition or ordering key) never overlap
	// and come in broker order. Every delivery is settled when handle returns: one handle left unsettled is
	// nacked (adapters call Dispatch for that). Messages that are not Postbox CloudEvents are dropped (rejected,
	// or acked where the broker has no reject) and logged, never passed to handle.
	//
	// Receive must not be called again on the same Subscriber while it runs; it may be called again after it
	// returned.
	Receive(ctx context.Context, handle DeliveryHandler) error
}

// DeliveryHandler handles one delivery and settles it with Ack, Nack or Reject before returning. ctx is done
// when Receive is stopping; a handler that gives up then should return without acking, so the message is
// delivered again.
type DeliveryHandler func(ctx context.Context, d *Delivery)

// Acker settles one received message on its broker. Adapters implement it; users call the Delivery methods,
// which make sure a delivery is settled once.
type Acker interface {
	// Ack tells the broker the message is done with; it is not delivered again (to this consumer group).
	Ack(ctx context.Context) error
	// Nack asks the broker to deliver the message again, after about delay when the broker supports delayed
	// redelivery and as soon as it will otherwise. delay 0 means at once.
	Nack(ctx context.Context, delay time.Duration) error
}

// Rejecter is implemented by Ackers whose broker can drop or dead-letter a message so it is never delivered
// again (NATS Term, AMQP reject without requeue).
type Rejecter interface {
	// Reject settles the message as failed for good.
	Reject(ctx context.Context) error
}

// ErrSettled is returned when a delivery is settled a second time. The second call did nothing.
var ErrSettled = errors.New("broker: delivery already settled")

// Delivery is one message received from a broker, with the means to settle it. Its methods are safe for
// concurrent use; only the first Ack, Nack or successful Reject reaches the broker.
type Delivery struct {
	// Event is the decoded message with its CloudEvents time and source.
	Event
	// Attempt counts deliveries of this message to this consumer: 1 the first time, 2 after one redelivery. It is
	// 0 when the broker does not say.
	Attempt int

	acker   Acker
	settled atomic.Int32 // a settlement constant
}

const (
	unsettled int32 = iota
	acked
	nacked
	rejected
)

// NewDelivery returns a delivery of e settled through a. attempt is the delivery count, or 0 when unknown.
func NewDelivery(e Event, attempt int, a Acker) *Delivery {
	return &Delivery{Event: e, Attempt: attempt, acker: a}
}

// Ack settles the delivery as done: the broker will not deliver the message again. Call it only after the
// message's effects are durable (the inbox transaction committed). An error means the broker may deliver the
// message again, which the inbox absorbs.
func (d *Delivery) Ack(ctx context.Context) error {
	if err := d.claim(acked); err != nil {
		return err
	}
	if err := d.acker.Ack(ctx); err != nil {
		return fmt.Errorf("broker: ack message %s: %w", d.Message.ID, err)
	}
	return nil
}

// Nack settles the delivery as failed for now: the broker delivers the message again after about delay (see
// Acker.Nack). If Nack fails the broker still redelivers once its ack timeout passes.
func (d *Delivery) Nack(ctx context.Context, delay time.Duration) error {
	if err := d.claim(nacked); err != nil {
		return err
	}
	if err := d.acker.Nack(ctx, max(delay, 0)); err != nil {
		return fmt.Errorf("broker: nack message %s: %w", d.Message.ID, err)
	}
	return nil
}

// Reject settles the delivery as failed for good: the broker drops or dead-letters the message. When the broker
// cannot reject, Reject returns an error wrapping errors.ErrUnsupported and leaves the delivery unsettled, so
// the caller can Nack it instead.
func (d *Delivery) Reject(ctx context.Context) error {
	r, ok := d.acker.(Rejecter)
	if !ok {
		return fmt.Errorf("broker: this broker cannot reject message %s: %w", d.Message.ID, errors.ErrUnsupported)
	}
	if err := d.claim(rejected); err != nil {
		return err
	}
	if err := r.Reject(ctx); err != nil {
		return fmt.Errorf("broker: reject message %s: %w", d.Message.ID, err)
	}
	return nil
}

// Settled reports whether Ack, Nack or Reject was called.
func (d *Delivery) Settled() bool { return d.settled.Load() != unsettled }

func (d *Delivery) claim(how int32) error {
	if d.settled.CompareAndSwap(unsettled, how) {
		return nil
	}
	was := [...]string{acked: "acked", nacked: "nacked", rejected: "rejected"}[d.settled.Load()]
	return fmt.Errorf("%w: message %s was %s before", ErrSettled, d.Message.ID, was)
}

// DefaultSettleTimeout bounds the Ack, Nack or Reject calls that Dispatch and Consume make on a context detached from
// cancellation.
const DefaultSettleTimeout = 10 * time.Second

// Dispatch calls handle with d and then nacks d if handle left it unsettled, also when handle panics. Adapters
// call it for every message so that each delivery is settled exactly once by the time Dispatch returns. The nack
// runs on a context detached from ctx's cancellation, so a message abandoned by a stopping subscriber is offered
// to other consumers at once instead of after the broker's ack timeout.
func Dispatch(ctx context.Context, d *Delivery, handle DeliveryHandler) {
	defer func() {
		if !d.Settled() {
			sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), DefaultSettleTimeout)
			defer cancel()
			_ = d.Nack(sctx, 0) // on failure the broker redelivers after its ack timeout
		}
	}()
	handle(ctx, d)
}

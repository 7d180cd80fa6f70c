package postboxtest

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/postbox-go/postbox/broker"
)

// Subscriber is an in-memory broker.Subscriber for tests of consumers (broker.Consume): Receive delivers the
// events given to Send in order, one at a time, delivers a nacked event again at once with its Attempt increased,
// and records how every delivery was settled. It is safe for concurrent use; the zero value is ready.
type Subscriber struct {
	// NoReject makes it a broker that cannot reject: Reject returns an error wrapping errors.ErrUnsupported.
	NoReject bool

	mu      sync.Mutex
	queue   []broker.Event
	attempt map[string]int
	settled []Settlement
	changed changes
}

// Settlement is how one delivery was settled.
type Settlement struct {
	// ID is the delivered message's ID.
	ID string
	// Attempt is the delivery's Attempt: 1 the first time.
	Attempt int
	// How is "ack", "nack" or "reject".
	How string
	// Delay is the nack's delay.
	Delay time.Duration
}

// String returns the settlement as "ack m-1", "nack m-1 after 1s" or "reject m-1".
func (s Settlement) String() string {
	if s.How == "nack" {
		return fmt.Sprintf("nack %s after %v", s.ID, s.Delay)
	}
	return s.How + " " + s.ID
}

// Send queues events for delivery.
func (s *Subscriber) Send(events ...broker.Event) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.queue = append(s.queue, events...)
	s.changed.signal()
}

// Receive delivers the queued events to handle, one at a time, until ctx is cancelled, and then returns nil.
func (s *Subscriber) Receive(ctx context.Context, handle broker.DeliveryHandler) error {
	if handle == nil {
		return errors.New("postboxtest: Receive needs a handler")
	}
	for {
		s.mu.Lock()
		if len(s.queue) == 0 {
			ch := s.changed.wait()
			s.mu.Unlock()
			select {
			case <-ch:
				continue
			case <-ctx.Done():
				return nil
			}
		}
		e := s.queue[0]
		s.queue = s.queue[1:]
		if s.attempt == nil {
			s.attempt = map[string]int{}
		}
		s.attempt[e.Message.ID]++
		n := s.attempt[e.Message.ID]
		var a broker.Acker = &rejecter{acker{s: s, e: e, attempt: n}}
		if s.NoReject {
			a = &acker{s: s, e: e, attempt: n}
		}
		s.mu.Unlock()
		broker.Dispatch(ctx, broker.NewDelivery(e, n, a), handle)
		if ctx.Err() != nil {
			return nil
		}
	}
}

// Settlements returns every settlement so far, in order.
func (s *Subscriber) Settlements() []Settlement {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]Settlement(nil), s.settled...)
}

// WaitSettled waits until n deliveries were settled, or timeout passes, or ctx is done, and reports whether n
// were reached.
func (s *Subscriber) WaitSettled(ctx context.Context, n int, timeout time.Duration) bool {
	return s.changed.waitUntil(ctx, &s.mu, timeout, func() bool { return len(s.settled) >= n })
}

func (s *Subscriber) settle(st Settlement, again *broker.Event) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.settled = append(s.settled, st)
	if again != nil {
		s.queue = append(s.queue, *again)
	}
	s.changed.signal()
}

type acker struct {
	s       *Subscriber
	e       broker.Event
	attempt int
}

func (a *acker) Ack(context.Context) error {
	a.s.settle(Settlement{ID: a.e.Message.ID, Attempt: a.attempt, How: "ack"}, nil)
	return nil
}

func (a *acker) Nack(_ context.Context, delay time.Duration) error {
	a.s.settle(Settlement{ID: a.e.Message.ID, Attempt: a.attempt, How: "nack", Delay: delay}, &a.e)
	return nil
}

// rejecter is the acker of a Subscriber that can reject.
type rejecter struct{ acker }

func (r *rejecter) Reject(context.Context) error {
	r.s.settle(Settlement{ID: r.e.Message.ID, Attempt: r.attempt, How: "reject"}, nil)
	return nil
}

package brokertest

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/postbox-go/postbox"
	"github.com/postbox-go/postbox/broker"
)

func (s *suite) testRedeliverNacked(t *testing.T) {
	topic := Topic()
	pub, sub := s.new(t, topic)
	recs := Records(topic, 1, 1)
	s.publish(t, pub, recs, 1)
	var mu sync.Mutex
	n := 0
	r := s.receive(t, sub, func(ctx context.Context, d *broker.Delivery) {
		mu.Lock()
		n++
		first := n == 1
		mu.Unlock()
		if first {
			if err := d.Nack(ctx, 0); err != nil {
				t.Errorf("Nack: %v", err)
			}
			return
		}
		_ = d.Ack(ctx)
	})
	got := r.waitCount(recs[0].ID, 2)
	s.checkDelivered(t, recs, got)
	s.checkAttempts(t, got[:2])
}

func (s *suite) checkAttempts(t *testing.T, got []received) {
	t.Helper()
	if s.f.Attempts && (got[0].attempt != 1 || got[1].attempt != 2) {
		t.Errorf("Attempt %d then %d, want 1 then 2", got[0].attempt, got[1].attempt)
	}
}

// testRedeliverUnsettled: a subscriber stops while its handler holds a message unsettled; another subscriber of
// the same group gets the message.
func (s *suite) testRedeliverUnsettled(t *testing.T) {
	topic := Topic()
	pub, sub := s.new(t, topic)
	recs := Records(topic, 1, 1)
	s.publish(t, pub, recs, 1)
	r := s.receive(t, sub, func(ctx context.Context, d *broker.Delivery) {
		<-ctx.Done() // never settles; Dispatch nacks it
	})
	r.waitIDs(recs)
	r.stop()

	_, sub2 := s.new(t, topic)
	got := s.receive(t, sub2, nil).waitIDs(recs)
	s.checkDelivered(t, recs, got)
	// Attempt is not checked here: a message offered to a subscriber that is going away may be counted as
	// delivered to it by some brokers (NATS) and not by others.
}

// testAckTimeout: a handler that hangs holding a message does not keep it from the group for longer than the
// broker's ack timeout.
func (s *suite) testAckTimeout(t *testing.T) {
	topic := Topic()
	pub, sub := s.new(t, topic)
	_, sub2 := s.new(t, topic)
	recs := Records(topic, 1, 1)
	release := make(chan struct{})
	defer close(release) // unblocks the hung handler before the receivers are stopped
	var mu sync.Mutex
	calls := 0
	again := make(chan struct{})
	handle := func(ctx context.Context, d *broker.Delivery) {
		mu.Lock()
		calls++
		n := calls
		mu.Unlock()
		switch n {
		case 1:
			<-release // hung: neither acks nor returns
			return
		case 2:
			close(again)
		}
		_ = d.Ack(ctx)
	}
	s.receive(t, sub, handle)
	s.receive(t, sub2, handle)
	s.publish(t, pub, recs, 1)
	select {
	case <-again:
	case <-time.After(s.f.Timeout):
		t.Fatalf("a message held by a hung handler was not delivered again within %v; is the ack timeout the "+
			"Constructor configures shorter than that?", s.f.Timeout)
	}
}

// testAckIsFinal: an acked message does not come back, even after the ack timeout.
func (s *suite) testAckIsFinal(t *testing.T) {
	topic := Topic()
	pub, sub := s.new(t, topic)
	recs := Records(topic, 2, 1)
	r := s.receive(t, sub, nil)
	s.publish(t, pub, recs[:1], 1)
	r.waitIDs(recs[:1])
	time.Sleep(2 * s.f.AckWait) // long enough for the broker to redeliver it, were the ack lost
	s.publish(t, pub, recs[1:], 1)
	got := r.waitIDs(recs)
	if n := countID(got, recs[0].ID); n != 1 {
		t.Fatalf("an acked message was delivered %d times within twice the ack timeout; want once", n)
	}
}

func countID(got []received, id string) int {
	n := 0
	for _, g := range got {
		if g.msg.ID == id {
			n++
		}
	}
	return n
}

func (s *suite) testDedup(t *testing.T) {
	topic := Topic()
	pub, sub := s.new(t, topic)
	recs := Records(topic, 2, 1) // one key: the marker arrives after any duplicate would
	dup, marker := recs[:1], recs[1:]
	s.publish(t, pub, []postbox.Record{dup[0], dup[0]}, 2)
	s.publish(t, pub, dup, 1)
	s.publish(t, pub, marker, 1)
	got := s.receive(t, sub, nil).waitIDs(marker)
	s.checkDelivered(t, recs, got)
	if n := countID(got, dup[0].ID); n != 1 {
		t.Fatalf("a message published three times with one ID was delivered %d times before a later message; want once", n)
	}
}

func (s *suite) testUnroutable(t *testing.T) {
	topic := Topic()
	pub, sub := s.new(t, topic)
	good := Records(topic, 3, 0) // no keys: a publisher may hold back a failed message's later same-key ones
	bad := Records(Topic(), 1, 0)
	r := s.receive(t, sub, nil)
	s.publish(t, pub, good[2:], 1) // the subscriber is ready once this arrives
	r.waitIDs(good[2:])
	err := pub.Publish(context.Background(), []postbox.Record{good[0], bad[0], good[1]})
	var be *postbox.BatchError
	if !errors.As(err, &be) || len(be.Errs) != 3 || be.Errs[0] != nil || be.Errs[1] == nil || be.Errs[2] != nil {
		t.Fatalf("Publish of [routable, unroutable, routable] = %v; want a *postbox.BatchError failing only the second", err)
	}
	s.checkDelivered(t, good, r.waitIDs(good))
}

func (s *suite) testUnreachable(t *testing.T) {
	pub := s.f.Unreachable(t)
	recs := Records(Topic(), 3, 1)
	ctx := ctxTimeout(t, s.f.Timeout)
	checkRetryable(t, "Publish to an unreachable broker", pub.Publish(ctx, recs), len(recs))
}

package brokertest

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/postbox-go/postbox"
	"github.com/postbox-go/postbox/broker"
)

func (s *suite) testPublishReceive(t *testing.T) {
	topic := Topic()
	pub, sub := s.new(t, topic)
	recs := Records(topic, s.f.Messages, 7)
	r := s.receive(t, sub, nil)
	s.publish(t, pub, recs, 50)
	got := r.waitIDs(recs)
	s.checkDelivered(t, recs, got)
	if s.f.Attempts {
		for _, g := range got {
			if g.attempt != 1 {
				t.Errorf("message %s: Attempt %d on its first delivery, want 1", g.msg.ID, g.attempt)
				break
			}
		}
	}
}

func (s *suite) testConcurrentPublish(t *testing.T) {
	// Relays run several workers on one publisher.
	topic := Topic()
	pub, sub := s.new(t, topic)
	recs := Records(topic, s.f.Messages, 5)
	r := s.receive(t, sub, nil)
	var wg sync.WaitGroup
	const workers = 4
	errs := make(chan error, workers)
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := w * 10; i < len(recs); i += workers * 10 {
				if err := s.tryPublish(context.Background(), pub, recs[i:min(i+10, len(recs))], 10); err != nil {
					errs <- err
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatalf("concurrent Publish: %v", err)
	}
	s.checkDelivered(t, recs, r.waitIDs(recs))
}

// testBacklog: messages published while no subscriber runs wait for one.
func (s *suite) testBacklog(t *testing.T) {
	topic := Topic()
	pub, sub := s.new(t, topic)
	recs := Records(topic, s.f.Messages, 7)
	s.publish(t, pub, recs, 50)
	s.checkDelivered(t, recs, s.receive(t, sub, nil).waitIDs(recs))
}

func (s *suite) testEmptyBatch(t *testing.T) {
	pub, _ := s.new(t, Topic())
	for _, batch := range [][]postbox.Record{nil, {}} {
		if err := pub.Publish(context.Background(), batch); err != nil {
			t.Fatalf("Publish of an empty batch: %v", err)
		}
	}
}

func (s *suite) testCancelledPublish(t *testing.T) {
	topic := Topic()
	pub, _ := s.new(t, topic)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	recs := Records(topic, 3, 1)
	checkRetryable(t, "Publish with a cancelled context", pub.Publish(ctx, recs), len(recs))
}

func (s *suite) testReceiveStops(t *testing.T) {
	topic := Topic()
	pub, sub := s.new(t, topic)

	t.Run("CancelledBeforeStart", func(t *testing.T) {
		ctx, cancel := context.WithCancel(context.Background())
		cancel()
		done := make(chan error, 1)
		go func() { done <- sub.Receive(ctx, func(context.Context, *broker.Delivery) {}) }()
		select {
		case err := <-done:
			if err != nil {
				t.Fatalf("Receive with a cancelled context: %v, want nil", err)
			}
		case <-time.After(s.f.Timeout):
			t.Fatalf("Receive with a cancelled context did not return within %v", s.f.Timeout)
		}
	})

	t.Run("WaitsForHandlers", func(t *testing.T) {
		first := Records(topic, 1, 1)
		var finished atomic.Bool
		r := s.receive(t, sub, func(ctx context.Context, d *broker.Delivery) {
			if d.Message.ID != first[0].ID {
				_ = d.Ack(ctx)
				return
			}
			<-ctx.Done() // in flight when Receive is stopped
			finished.Store(true)
			_ = d.Nack(context.WithoutCancel(ctx), 0)
		})
		// Publish in the background: a synchronous transport (webhooks) answers only once the handler settles.
		pctx, stopPublishing := context.WithCancel(context.Background())
		defer stopPublishing()
		published := make(chan error, 1)
		go func() { published <- s.tryPublish(pctx, pub, first, 1) }()
		r.waitIDs(first)
		r.stop()
		stopPublishing()
		<-published // the nack may have failed it; either outcome is fine here
		if !finished.Load() {
			t.Fatal("Receive returned while a handler was still running")
		}
		n := len(r.snapshot())

		// Receive may run again once it returned.
		second := Records(topic, 1, 1)
		r2 := s.receive(t, sub, nil)
		s.publish(t, pub, second, 1)
		r2.waitIDs(second)
		r2.stop()
		if late := len(r.snapshot()); late != n {
			t.Fatalf("the handler of a Receive that had returned was called %d more times", late-n)
		}
	})
}

// testNackThenAck: a delivery nacked with a delay comes again when the broker redelivers nacked messages, and
// acked deliveries do not.
func (s *suite) testNackThenAck(t *testing.T) {
	topic := Topic()
	pub, sub := s.new(t, topic)
	recs := Records(topic, 10, 3)
	failing := recs[4].ID
	var mu sync.Mutex
	handled := map[string]int{}
	handle := func(ctx context.Context, d *broker.Delivery) {
		mu.Lock()
		handled[d.Message.ID]++
		first := handled[d.Message.ID] == 1
		mu.Unlock()
		if d.Message.ID == failing && first && s.f.NackRedelivery {
			_ = d.Nack(ctx, 10*time.Millisecond)
			return
		}
		_ = d.Ack(ctx)
	}
	r := s.receive(t, sub, handle)
	s.publish(t, pub, recs, 10)
	s.checkDelivered(t, recs, r.waitIDs(recs))
	if s.f.NackRedelivery {
		got := r.waitCount(failing, 2)
		s.checkDelivered(t, recs, got)
	}
}

func (s *suite) testPerKeyOrder(t *testing.T) {
	topic := Topic()
	pub, sub := s.new(t, topic)
	recs := Records(topic, s.f.Messages, 5)
	r := s.receive(t, sub, nil)
	s.publish(t, pub, recs, 20)
	got := r.waitIDs(recs)
	want := map[string][]string{}
	for _, r := range recs {
		want[r.Key] = append(want[r.Key], r.ID)
	}
	have := map[string][]string{}
	for _, g := range got {
		have[g.msg.Key] = append(have[g.msg.Key], g.msg.ID)
	}
	for key, ids := range want {
		if fmt.Sprint(have[key]) != fmt.Sprint(ids) {
			t.Errorf("key %q delivered out of publish order:\n got %v\nwant %v", key, have[key], ids)
		}
	}
}

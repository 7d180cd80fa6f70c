package brokertest

import (
	"context"
	"errors"
	"io"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/postbox-go/postbox"
	"github.com/postbox-go/postbox/broker"
)

// pinger is the optional health check of publishers that own their connection.
type pinger interface {
	Ping(ctx context.Context) error
}

// testReceiveOnce: Receive refuses a nil handler, and a second Receive while one runs on the same subscriber.
func (s *suite) testReceiveOnce(t *testing.T) {
	topic := Topic()
	pub, sub := s.new(t, topic)
	if err := sub.Receive(context.Background(), nil); err == nil {
		t.Error("Receive with a nil handler returned nil, want an error")
	}
	second := make(chan error, 1)
	ctx, stop := context.WithCancel(context.Background())
	defer stop()
	var once sync.Once
	r := s.receive(t, sub, func(hctx context.Context, d *broker.Delivery) {
		// Receive is running: this handler is called from it.
		once.Do(func() { go func() { second <- sub.Receive(ctx, func(context.Context, *broker.Delivery) {}) }() })
		_ = d.Ack(hctx)
	})
	recs := Records(topic, 1, 1)
	s.publish(t, pub, recs, 1)
	r.waitIDs(recs)
	select {
	case err := <-second:
		if err == nil || !strings.Contains(err.Error(), "already running") {
			t.Errorf("a second Receive while one runs = %v, want an error saying Receive is already running", err)
		}
	case <-time.After(s.f.Timeout):
		t.Errorf("a second Receive while one runs did not return within %v; want an error saying Receive is already running", s.f.Timeout)
	}
}

// testClose: after Close, Publish fails with ErrClosed, retryably, and Close may be called again.
func (s *suite) testClose(t *testing.T) {
	topic := Topic()
	pub, _ := s.new(t, topic)
	c, ok := pub.(io.Closer)
	if !ok {
		t.Fatalf("the publisher %T has no Close method, but Features.ErrClosed is set", pub)
	}
	if err := c.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	err := pub.Publish(context.Background(), Records(topic, 1, 1))
	if !errors.Is(err, s.f.ErrClosed) || postbox.IsPermanent(err) {
		t.Errorf("Publish after Close = %v, want a retryable error wrapping %v", err, s.f.ErrClosed)
	}
	if err := c.Close(); err != nil {
		t.Errorf("second Close: %v", err)
	}
}

// testPing: a publisher with a Ping method reports a reachable broker with nil and an unreachable one with an
// error.
func (s *suite) testPing(t *testing.T) {
	pub, _ := s.new(t, Topic())
	p, ok := pub.(pinger)
	if !ok {
		t.Skipf("the publisher %T has no Ping method", pub)
	}
	ctx := ctxTimeout(t, s.f.Timeout)
	if err := p.Ping(ctx); err != nil {
		t.Errorf("Ping of a reachable broker: %v", err)
	}
	if s.f.Unreachable == nil {
		return
	}
	if err := s.f.Unreachable(t).(pinger).Ping(ctx); err == nil {
		t.Error("Ping of an unreachable broker returned nil")
	}
}

// testReconnect: after the network drops the publisher's connection, Publish fails retryably at most until the
// publisher reconnects, and every message it confirmed is delivered.
func (s *suite) testReconnect(t *testing.T) {
	topic := Topic()
	_, sub := s.new(t, topic)
	pub, cut := s.f.Reconnect(t, topic)
	recs := Records(topic, 20, 3)
	s.publish(t, pub, recs[:10], 10)
	cut()
	var err error
	for range 100 {
		ctx, cancel := context.WithTimeout(context.Background(), s.f.Timeout)
		err = pub.Publish(ctx, recs[10:])
		cancel()
		if err == nil || postbox.IsPermanent(err) {
			break
		}
	}
	if err != nil {
		t.Fatalf("Publish after a connection loss: %v; want retryable failures, then success once reconnected", err)
	}
	s.checkDelivered(t, recs, s.receive(t, sub, nil).waitIDs(recs))
}

// Outcome is what CheckBatch expects of one record of a batch: published (the zero Outcome), or failed with an
// error containing Err, marked with postbox.Permanent exactly when Permanent is set.
type Outcome struct {
	Err       string
	Permanent bool
}

// CheckBatch checks the result of publishing a batch against want, which has one Outcome per record.
func CheckBatch(t *testing.T, err error, want []Outcome) {
	t.Helper()
	var be *postbox.BatchError
	if !errors.As(err, &be) || len(be.Errs) != len(want) {
		t.Fatalf("Publish = %v, want a *postbox.BatchError with %d entries", err, len(want))
	}
	for i, w := range want {
		e := be.Errs[i]
		switch {
		case w.Err == "" && e != nil:
			t.Errorf("record %d failed: %v", i, e)
		case w.Err != "" && (e == nil || !strings.Contains(e.Error(), w.Err) || postbox.IsPermanent(e) != w.Permanent):
			t.Errorf("record %d: error %v; want one mentioning %q, permanent %v", i, e, w.Err, w.Permanent)
		}
	}
}

// CheckRefused is CheckBatch for a batch whose failures are all permanent (records no retry can publish): want
// has one entry per record, "" for a record that must be published, and otherwise a text its error contains.
func CheckRefused(t *testing.T, err error, want []string) {
	t.Helper()
	outcomes := make([]Outcome, len(want))
	for i, w := range want {
		outcomes[i] = Outcome{Err: w, Permanent: w != ""}
	}
	CheckBatch(t, err, outcomes)
}

// ReceiveN runs sub.Receive until handle was called n times, and returns the deliveries in order; it fails the
// test when Receive returns an error or fewer than n deliveries arrive within 30 seconds. A nil handle acks
// each delivery.
func ReceiveN(t *testing.T, sub broker.Subscriber, n int, handle broker.DeliveryHandler) []*broker.Delivery {
	t.Helper()
	if handle == nil {
		handle = func(ctx context.Context, d *broker.Delivery) { _ = d.Ack(context.WithoutCancel(ctx)) }
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var mu sync.Mutex
	var got []*broker.Delivery
	err := sub.Receive(ctx, func(ctx context.Context, d *broker.Delivery) {
		mu.Lock()
		got = append(got, d)
		if len(got) == n {
			cancel()
		}
		mu.Unlock()
		handle(ctx, d)
	})
	if err != nil {
		t.Fatalf("Receive: %v", err)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(got) < n {
		t.Fatalf("received %d of %d messages", len(got), n)
	}
	return got
}

package drivertest

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/postbox-go/postbox"
	"github.com/postbox-go/postbox/postboxtest"
)

func testRelay[TTx any](t *testing.T, newDriver NewDriver[TTx]) {
	drv := newDriver(t)

	t.Run("RunDrainsAndStops", func(t *testing.T) {
		c := Client(t, drv, nil)
		msgs := messages(1200, "orders")
		enqueue(t, c, msgs...)
		rec := &postboxtest.Recorder{}
		r := relay(t, c, rec, &postbox.RelayConfig{BatchSize: 100, Workers: 2})
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan error, 1)
		go func() { done <- r.Run(ctx) }()
		if !rec.WaitDistinct(ctx, len(msgs), 30*time.Second) {
			t.Fatalf("relay published %d of %d", rec.Distinct(), len(msgs))
		}
		// A message committed while the relay idles is picked up too.
		enqueue(t, c, messages(1, "late")...)
		r.Wake()
		if !rec.WaitDistinct(ctx, len(msgs)+1, 10*time.Second) {
			t.Fatal("relay did not publish a message enqueued while it was idle")
		}
		cancel()
		select {
		case err := <-done:
			if err != nil {
				t.Fatalf("Run: %v", err)
			}
		case <-time.After(10 * time.Second):
			t.Fatal("Run did not return after cancel")
		}
		if err := r.Run(ctx); err != nil {
			t.Fatalf("Run after Run returned: %v (a relay may run again once stopped)", err)
		}
		if st := r.Stats(); st.Published != int64(len(msgs)+1) || st.Errors != 0 {
			t.Fatalf("relay stats %+v, want %d published and no errors", st, len(msgs)+1)
		}
	})

	t.Run("ShutdownSettlesInFlightBatch", func(t *testing.T) {
		c := Client(t, drv, nil)
		enqueue(t, c, messages(10, "orders")...)
		started, release := make(chan struct{}), make(chan struct{})
		var once sync.Once
		var inFlight atomic.Int64
		pub := postbox.PublisherFunc(func(ctx context.Context, batch []postbox.Record) error {
			inFlight.Add(int64(len(batch)))
			once.Do(func() { close(started) })
			<-release
			return ctx.Err() // the publish context must survive the relay's cancellation
		})
		r := relay(t, c, pub, &postbox.RelayConfig{Workers: 1})
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan error, 1)
		go func() { done <- r.Run(ctx) }()
		<-started
		cancel()
		select {
		case <-done:
			t.Fatal("Run returned while a batch was still publishing")
		case <-time.After(50 * time.Millisecond):
		}
		close(release)
		if err := <-done; err != nil {
			t.Fatal(err)
		}
		if s := stats(t, c); s.Pending != 10-inFlight.Load() {
			t.Fatalf("%d pending after a graceful stop with %d of 10 in flight; the in-flight batch must settle as published",
				s.Pending, inFlight.Load())
		}
	})

	t.Run("KeepPublishedAndCleanup", func(t *testing.T) {
		clock := postboxtest.NewClock(time.Now())
		c := Client(t, drv, Tables(clock))
		enqueue(t, c, messages(25, "orders")...)
		rec := &postboxtest.Recorder{}
		r := relay(t, c, rec, &postbox.RelayConfig{KeepPublished: true})
		if n := drain(t, r); n != 25 {
			t.Fatalf("published %d, want 25", n)
		}
		if n := drain(t, r); n != 0 {
			t.Fatalf("a kept message was claimed again (%d)", n)
		}
		ctx := context.Background()
		cl := cleaner(t, c, &postbox.CleanupConfig{Retention: time.Hour, BatchSize: 10})
		if res, err := cl.RunOnce(ctx); err != nil || res.Published != 0 {
			t.Fatalf("cleanup before retention = %+v, %v; want nothing deleted", res, err)
		}
		enqueue(t, c, messages(3, "orders")...) // pending: never cleaned up
		clock.Advance(2 * time.Hour)
		res, err := cl.RunOnce(ctx)
		if err != nil || res.Published != 25 || res.Batches != 3 {
			t.Fatalf("cleanup after retention = %+v, %v; want the 25 published, in 3 batches of at most 10", res, err)
		}
		if s := stats(t, c); s.Pending != 3 {
			t.Fatalf("%d pending after cleanup, want the 3 unpublished", s.Pending)
		}
		if _, err := postbox.NewCleaner(c, &postbox.CleanupConfig{Retention: -time.Hour}); !errors.Is(err, postbox.ErrInvalidConfig) {
			t.Fatalf("a cleaner with a negative retention: %v, want ErrInvalidConfig", err)
		}
	})
}

func testFailures[TTx any](t *testing.T, newDriver NewDriver[TTx]) {
	drv := newDriver(t)
	ctx := context.Background()

	t.Run("BackoffThenDead", func(t *testing.T) {
		clock := postboxtest.NewClock(time.Now().UTC().Truncate(time.Millisecond))
		c := Client(t, drv, Tables(clock))
		msgs := messages(1, "orders")
		enqueue(t, c, msgs...)
		boom := errors.New("broker said no")
		rec := &postboxtest.Recorder{Fail: func(postbox.Record) error { return boom }}
		r := relay(t, c, rec, &postbox.RelayConfig{MaxAttempts: 3, BackoffBase: time.Second, BackoffMax: time.Minute})
		for attempt := 1; attempt <= 3; attempt++ {
			if n := drain(t, r); n != 1 {
				t.Fatalf("attempt %d: claimed %d, want 1", attempt, n)
			}
			if n := drain(t, r); n != 0 {
				t.Fatalf("attempt %d: retried before its backoff elapsed", attempt)
			}
			if attempt < 3 {
				// Backoff 1s, then 2s, with equal jitter: the message is due by then, and not before half of it.
				full := time.Second << (attempt - 1)
				clock.Advance(full * 49 / 100)
				if n := drain(t, r); n != 0 {
					t.Fatalf("attempt %d: retried after %v, before half of its %v backoff", attempt, full*49/100, full)
				}
				clock.Advance(full * 51 / 100)
			}
		}
		dead, err := c.ListDead(ctx, postbox.DeadFilter{All: true})
		if err != nil {
			t.Fatal(err)
		}
		if len(dead) != 1 || dead[0].Attempts != 3 || dead[0].Status != postbox.StatusDead || !strings.Contains(dead[0].LastError, "broker said no") {
			t.Fatalf("dead = %+v; want the message with 3 attempts and its last error", dead)
		}
		clock.Advance(time.Hour)
		if n := drain(t, r); n != 0 {
			t.Fatal("a dead message was claimed")
		}
		if s := stats(t, c); s.Dead != 1 || s.Pending != 0 {
			t.Fatalf("stats %+v, want 1 dead and none pending", s)
		}
		// An operator retries it once the broker is fixed.
		rec.Fail = nil
		if n, err := c.RetryDead(ctx, postbox.DeadFilter{IDs: []string{msgs[0].ID}}); err != nil || n != 1 {
			t.Fatalf("RetryDead = %d, %v", n, err)
		}
		if n := drain(t, r); n != 1 || rec.Counts()[msgs[0].ID] != 1 {
			t.Fatalf("retried message not published (claimed %d)", n)
		}
	})

	t.Run("BrokerUnavailableCostsNoAttempt", func(t *testing.T) {
		clock := postboxtest.NewClock(time.Now().UTC().Truncate(time.Millisecond))
		c := Client(t, drv, Tables(clock))
		msgs := messages(3, "orders")
		enqueue(t, c, msgs...)
		down := true
		rec := &postboxtest.Recorder{Fail: func(postbox.Record) error {
			if down {
				return postbox.Unavailable(errors.New("connection to the broker lost"))
			}
			return nil
		}}
		r := relay(t, c, rec, &postbox.RelayConfig{MaxAttempts: 2})
		once := func() int {
			t.Helper()
			n, err := r.RunOnce(ctx)
			if err != nil {
				t.Fatalf("RunOnce: %v", err)
			}
			return n
		}
		// An outage longer than MaxAttempts publishes: every message keeps its attempts, and is available again
		// within RelayConfig.ErrorBackoffBase (100ms), not after its own backoff (BackoffBase, 1s).
		for range 3 {
			if n := once(); n != 3 {
				t.Fatalf("claimed %d during the outage, want all 3 again: an unavailable broker must not delay them", n)
			}
			clock.Advance(postbox.DefaultErrorBackoffBase)
		}
		if s := stats(t, c); s.Pending != 3 || s.Dead != 0 {
			t.Fatalf("stats %+v after the outage, want 3 pending and none dead: an outage must not use up attempts", s)
		}
		// The broker is back: everything goes at once, with no clock advance.
		down = false
		if n := once(); n != 3 || len(rec.Counts()) != 3 {
			t.Fatalf("claimed %d, published %d once the broker was back; want all 3 at once", n, len(rec.Counts()))
		}
	})

	t.Run("PermanentIsDeadAtOnce", func(t *testing.T) {
		c := Client(t, drv, nil)
		msgs := messages(4, "orders")
		enqueue(t, c, msgs...)
		poison := msgs[2].ID
		rec := &postboxtest.Recorder{Fail: func(r postbox.Record) error {
			if r.ID == poison {
				return postbox.Permanent(fmt.Errorf("message too large"))
			}
			return nil
		}}
		r := relay(t, c, rec, nil)
		if n := drain(t, r); n != 4 {
			t.Fatalf("claimed %d, want 4", n)
		}
		counts := rec.Counts()
		if len(counts) != 3 || counts[poison] != 0 {
			t.Fatalf("published %v; want the three good messages only", counts)
		}
		dead, err := c.ListDead(ctx, postbox.DeadFilter{Topic: "orders"})
		if err != nil || len(dead) != 1 || dead[0].ID != poison || dead[0].Attempts != 1 {
			t.Fatalf("dead = %+v, %v; want the poison message after one attempt", dead, err)
		}
		if st := r.Stats(); st.Dead != 1 || st.Published != 3 {
			t.Fatalf("relay stats %+v", st)
		}
	})

	t.Run("PublisherPanicIsAFailure", func(t *testing.T) {
		c := Client(t, drv, nil)
		enqueue(t, c, messages(2, "orders")...)
		r := relay(t, c, postbox.PublisherFunc(func(context.Context, []postbox.Record) error { panic("bug") }), nil)
		if n := drain(t, r); n != 2 {
			t.Fatalf("claimed %d", n)
		}
		if s := stats(t, c); s.Pending != 2 {
			t.Fatalf("after a publisher panic %d pending, want both kept for retry", s.Pending)
		}
	})

	t.Run("PublishTimeout", func(t *testing.T) {
		c := Client(t, drv, nil)
		enqueue(t, c, messages(1, "orders")...)
		pub := postbox.PublisherFunc(func(ctx context.Context, _ []postbox.Record) error {
			<-ctx.Done()
			return ctx.Err()
		})
		r := relay(t, c, pub, &postbox.RelayConfig{PublishTimeout: 50 * time.Millisecond})
		start := time.Now()
		if n := drain(t, r); n != 1 {
			t.Fatalf("claimed %d", n)
		}
		if time.Since(start) > 5*time.Second {
			t.Fatal("a publish that never returns was not bounded by PublishTimeout")
		}
		recs, err := c.Stats(ctx)
		if err != nil || recs.Pending != 1 {
			t.Fatalf("timed-out message not kept pending: %+v %v", recs, err)
		}
	})
}

func testOperations[TTx any](t *testing.T, newDriver NewDriver[TTx]) {
	drv := newDriver(t)
	ctx := context.Background()
	clock := postboxtest.NewClock(time.Now().UTC().Truncate(time.Second))
	c := Client(t, drv, Tables(clock))
	enqueue(t, c, messages(3, "orders")...)
	clock.Advance(time.Minute)
	enqueue(t, c, messages(2, "invoices")...)
	enqueue(t, c, messages(2, "poison")...)

	rec := &postboxtest.Recorder{Fail: func(r postbox.Record) error {
		if r.Topic == "poison" {
			return postbox.Permanent(errors.New("rejected"))
		}
		return nil
	}}
	s := stats(t, c)
	if s.Pending != 7 || s.Dead != 0 || len(s.Topics) != 3 || !s.OldestPending.Equal(clock.Now().Add(-time.Minute)) {
		t.Fatalf("stats %+v; want 7 pending over 3 topics, oldest a minute old", s)
	}
	if n := drain(t, relay(t, c, rec, &postbox.RelayConfig{BatchSize: 2})); n != 7 {
		t.Fatalf("claimed %d", n)
	}
	s = stats(t, c)
	if s.Pending != 0 || s.Dead != 2 || len(s.Topics) != 1 || s.Topics[0].Topic != "poison" || s.Topics[0].Dead != 2 {
		t.Fatalf("stats %+v; want the 2 poison messages dead", s)
	}
	for _, f := range []postbox.DeadFilter{{}, {IDs: []string{"not-a-uuid"}}} {
		if _, err := c.PurgeDead(ctx, f); !errors.Is(err, postbox.ErrInvalidConfig) {
			t.Fatalf("PurgeDead(%+v) = %v, want ErrInvalidConfig", f, err)
		}
	}
	if dead, err := c.ListDead(ctx, postbox.DeadFilter{Topic: "orders"}); err != nil || len(dead) != 0 {
		t.Fatalf("ListDead(orders) = %v, %v", dead, err)
	}
	dead, err := c.ListDead(ctx, postbox.DeadFilter{Topic: "poison", Limit: 1})
	if err != nil || len(dead) != 1 {
		t.Fatalf("ListDead(limit 1) = %v, %v", dead, err)
	}
	if n, err := c.PurgeDead(ctx, postbox.DeadFilter{IDs: []string{dead[0].ID}}); err != nil || n != 1 {
		t.Fatalf("PurgeDead(one) = %d, %v", n, err)
	}
	if n, err := c.RetryDead(ctx, postbox.DeadFilter{Topic: "poison"}); err != nil || n != 1 {
		t.Fatalf("RetryDead(topic) = %d, %v", n, err)
	}
	rec.Fail = nil
	if n := drain(t, relay(t, c, rec, nil)); n != 1 {
		t.Fatalf("retried %d, want 1", n)
	}
	if n, err := c.PurgeDead(ctx, postbox.DeadFilter{All: true}); err != nil || n != 0 {
		t.Fatalf("PurgeDead(all) = %d, %v; want nothing left", n, err)
	}
}

func testConcurrentRelays[TTx any](t *testing.T, newDriver NewDriver[TTx]) {
	const total, relays = 20000, 3
	drv := newDriver(t)
	c := Client(t, drv, nil)
	for i := 0; i < total; i += 2000 {
		enqueue(t, c, messages(2000, "orders")...)
	}
	rec := &postboxtest.Recorder{}
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	var rs []*postbox.Relay
	for range relays {
		// Each relay has its own client and connections, as it would in its own process.
		rc, err := postbox.NewClient(newDriver(t), ptr(c.Config()))
		if err != nil {
			t.Fatal(err)
		}
		r := relay(t, rc, rec, &postbox.RelayConfig{BatchSize: 200})
		rs = append(rs, r)
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := r.Run(ctx); err != nil {
				t.Error(err)
			}
		}()
	}
	reached := rec.WaitDistinct(ctx, total, 2*time.Minute)
	cancel()
	wg.Wait()
	if !reached {
		t.Fatalf("3 relays published %d distinct of %d", rec.Distinct(), total)
	}
	if n := len(rec.Records()); n != total {
		t.Fatalf("3 relays published %d messages for %d distinct: %d duplicates", n, total, n-total)
	}
	if s := stats(t, c); s.Pending != 0 {
		t.Fatalf("%d still pending", s.Pending)
	}
	shares := make([]int64, len(rs))
	for i, r := range rs {
		shares[i] = r.Stats().Published
	}
	t.Logf("messages published by each relay: %v", shares)
	// With SKIP LOCKED the relays claim side by side, so each takes part; without it (SQLite) they take turns,
	// and one may drain everything.
	if drv.Capabilities().SkipLocked && slices.Contains(shares, 0) {
		t.Fatalf("messages published by each relay: %v; every relay should have claimed batches", shares)
	}
}

func ptr[T any](v T) *T { return &v }

package postbox

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/postbox-go/postbox/driver"
)

type testClock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *testClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *testClock) Advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
}

func recordsOf(topics ...string) []Record {
	out := make([]Record, len(topics))
	for i, t := range topics {
		out[i] = Record{Message: Message{ID: NewID(), Topic: t, Type: "t"}}
	}
	return out
}

func kinds(vs []Verdict) []VerdictKind {
	out := make([]VerdictKind, len(vs))
	for i, v := range vs {
		out[i] = v.Kind
	}
	return out
}

func TestDelivererRulesOnEachMessage(t *testing.T) {
	clock := &testClock{now: time.Unix(1_700_000_000, 0)}
	recs := recordsOf("a", "a", "a", "a")
	recs[2].Attempts = 2
	pub := PublisherFunc(func(ctx context.Context, batch []Record) error {
		return &BatchError{Errs: []error{nil, errors.New("refused"), errors.New("refused again"), Permanent(errors.New("too big\x00"))}}
	})
	d := NewDeliverer(pub, DelivererConfig{Clock: clock, Retry: RetryPolicy{MaxAttempts: 3, Backoff: func(n int) time.Duration { return time.Duration(n) * time.Minute }}})
	vs := d.Deliver(context.Background(), recs)
	want := []VerdictKind{VerdictPublished, VerdictRetry, VerdictDead, VerdictDead}
	for i, v := range vs {
		if v.Kind != want[i] {
			t.Fatalf("verdicts %v, want %v", kinds(vs), want)
		}
	}
	if vs[1].Attempts != 1 || !vs[1].RetryAt.Equal(clock.now.Add(time.Minute)) {
		t.Errorf("retry verdict %+v: want attempt 1, due in the policy's 1m", vs[1])
	}
	if vs[2].Attempts != 3 {
		t.Errorf("the third failure of a message with MaxAttempts 3 has attempts %d, want 3 (and dead)", vs[2].Attempts)
	}
	if strings.Contains(vs[3].LastError, "\x00") || vs[3].Err == nil {
		t.Errorf("LastError %q keeps a NUL, which a text column refuses", vs[3].LastError)
	}

	panicky := NewDeliverer(PublisherFunc(func(context.Context, []Record) error { panic("boom") }), DelivererConfig{Clock: clock})
	for _, v := range panicky.Deliver(context.Background(), recordsOf("a", "b")) {
		if v.Kind != VerdictRetry || !strings.Contains(v.LastError, "panicked: boom") {
			t.Errorf("a panicking publisher gave %v %q, want a retry naming the panic", v.Kind, v.LastError)
		}
	}

	reg, err := NewRegistry(EventType{Type: "known", Topic: "a"})
	if err != nil {
		t.Fatal(err)
	}
	var calls atomic.Int64
	checked := NewDeliverer(PublisherFunc(func(_ context.Context, b []Record) error { calls.Add(int64(len(b))); return nil }),
		DelivererConfig{Clock: clock, Registry: reg})
	vs = checked.Deliver(context.Background(), recordsOf("a"))
	if vs[0].Kind != VerdictDead || calls.Load() != 0 {
		t.Errorf("a message the registry refuses: %v after %d publishes, want dead and never published", vs[0].Kind, calls.Load())
	}
}

// route is a test destination that can be down.
type testRoute struct {
	down  atomic.Bool
	calls atomic.Int64 // messages it was asked to publish
}

func (r *testRoute) Publish(_ context.Context, b []Record) error {
	r.calls.Add(int64(len(b)))
	if r.down.Load() {
		return Unavailable(errors.New("connection refused"))
	}
	return nil
}

func TestDelivererHoldsOnlyTheDownDestination(t *testing.T) {
	clock := &testClock{now: time.Unix(1_700_000_000, 0)}
	orders, stock := &testRoute{}, &testRoute{}
	stock.down.Store(true)
	var logs bytes.Buffer
	d := NewDeliverer(&Router{Routes: []Route{{Topics: "stock.*", Publisher: stock, Name: "stock"}}, Default: orders, DefaultName: "orders"},
		DelivererConfig{Clock: clock, Logger: slog.New(slog.NewTextHandler(&logs, nil))})
	ctx := context.Background()

	vs := d.Deliver(ctx, recordsOf("orders", "stock.eu", "stock.us", "orders"))
	if got := kinds(vs); got[0] != VerdictPublished || got[1] != VerdictHeld || got[2] != VerdictHeld || got[3] != VerdictPublished {
		t.Fatalf("verdicts %v: want the orders published and the stock messages held", got)
	}
	if vs[1].Attempts != 0 || vs[1].Destination != "stock" || vs[0].Destination != "orders" {
		t.Errorf("held verdict %+v: want no attempt counted, destination stock", vs[1])
	}
	if avoid := d.Avoid(); strings.Join(avoid, ",") != "stock.eu,stock.us" {
		t.Errorf("Avoid() = %v, want the down destination's topics", avoid)
	}
	if d.AllDown() {
		t.Error("AllDown with the orders destination working")
	}
	h := d.Health()
	if len(h) != 2 || h[1].Name != "stock" || h[1].State != DestinationDown || h[1].Waiting != 2 || h[0].State != DestinationOK {
		t.Errorf("Health() = %+v, want orders ok and stock down with 2 waiting", h)
	}

	// Before its probe is due the down destination is not asked at all; its messages are held.
	stock.calls.Store(0)
	if vs := d.Deliver(ctx, recordsOf("stock.eu", "stock.eu", "orders")); vs[0].Kind != VerdictHeld || vs[2].Kind != VerdictPublished {
		t.Fatalf("verdicts %v before the probe, want held, held, published", kinds(vs))
	}
	if n := stock.calls.Load(); n != 0 {
		t.Errorf("the down destination got %d messages before its probe was due, want 0", n)
	}
	// A due probe sends one message, and the rest wait.
	clock.Advance(time.Second)
	vs = d.Deliver(ctx, recordsOf("stock.eu", "stock.eu", "stock.eu"))
	if n := stock.calls.Load(); n != 1 || vs[0].Kind != VerdictHeld || vs[2].Kind != VerdictHeld {
		t.Errorf("probe sent %d messages (verdicts %v), want 1 and every message held", n, kinds(vs))
	}
	// Back: the probe goes through and the rest follow in the same delivery.
	stock.down.Store(false)
	clock.Advance(2 * time.Second)
	vs = d.Deliver(ctx, recordsOf("stock.eu", "stock.us", "stock.eu"))
	for _, v := range vs {
		if v.Kind != VerdictPublished {
			t.Fatalf("verdicts %v after the destination came back, want all published", kinds(vs))
		}
	}
	if len(d.Avoid()) != 0 || d.Health()[1].State != DestinationOK || d.Health()[1].Unavailable != 3*time.Second {
		t.Errorf("after the outage: Avoid() = %v, Health() = %+v; want nothing avoided, stock ok after 3s down", d.Avoid(), d.Health())
	}
	out := logs.String()
	if strings.Count(out, "destination down") != 1 || strings.Count(out, "destination available again") != 1 ||
		!strings.Contains(out, "destination=stock") || !strings.Contains(out, "unavailable_for=3s") || !strings.Contains(out, "waited=") {
		t.Errorf("logs: want one line when stock went down and one when it came back, with its time down:\n%s", out)
	}
}

func TestDelivererDoesNotTieUpClaimsBehindASlowDestination(t *testing.T) {
	release := make(chan struct{})
	started := make(chan struct{})
	var calls atomic.Int64
	slow := PublisherFunc(func(ctx context.Context, b []Record) error {
		if calls.Add(1) > 1 {
			return nil // only the first share hangs
		}
		close(started)
		select {
		case <-release:
		case <-ctx.Done():
		}
		return nil
	})
	d := NewDeliverer(&Router{Routes: []Route{{Topics: "slow", Publisher: slow}}, Default: &testRoute{}},
		DelivererConfig{SlowPublish: 50 * time.Millisecond})
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	first := make(chan []Verdict, 1)
	go func() { first <- d.Deliver(ctx, recordsOf("slow")) }()
	select {
	case <-started:
	case <-ctx.Done():
		t.Fatal("the first delivery never reached the slow publisher")
	}
	// Once the first share has been in flight past SlowPublish/10, another claim's share is held, not queued.
	// Keep the first share in flight past 2·SlowPublish, so that it counts as slow when it ends.
	began, deadline := time.Now(), time.Now().Add(5*time.Second)
	held := false
	for !held || time.Since(began) < 100*time.Millisecond {
		vs := d.Deliver(ctx, recordsOf("slow", "fast"))
		if vs[1].Kind != VerdictPublished {
			t.Fatalf("the fast destination's message: %v, want published", vs[1].Kind)
		}
		held = held || vs[0].Kind == VerdictHeld
		if time.Now().After(deadline) {
			t.Fatal("a second share to a destination still busy after SlowPublish/10 was never held")
		}
	}
	close(release)
	if vs := <-first; vs[0].Kind != VerdictPublished {
		t.Fatalf("the slow share: %v, want published", vs[0].Kind)
	}
	if h := d.Health(); h[1].Name != "slow" || h[1].State != DestinationSlow || len(d.Avoid()) != 1 {
		t.Errorf("Health() = %+v, Avoid() = %v: want slow marked slow and its topic avoided", h, d.Avoid())
	}
	if vs := d.Deliver(ctx, recordsOf("slow")); vs[0].Kind != VerdictPublished || d.Health()[1].State != DestinationOK {
		t.Errorf("a fast share: %v, state %s; want published and the destination ok again", vs[0].Kind, d.Health()[1].State)
	}
}

// readyStore always has one ready message on topic "stock", claimed afresh each time.
type readyStore struct {
	driver.Store[int]
}

func (s *readyStore) Claimable(context.Context, time.Time) (bool, error) { return true, nil }

func (s *readyStore) Stats(context.Context, time.Time) ([]driver.TopicStats, error) { return nil, nil }

func (s *readyStore) Claim(context.Context, driver.ClaimParams) (driver.Claim, error) {
	return &recordsClaim{recs: []driver.Record{{Message: driver.Message{ID: NewID(), Topic: "stock", Type: "t"}}}}, nil
}

// TestRelayReportsAStall: a relay with ready messages whose only destination is down reports itself stalled after
// StallAfter, naming the destination and its topic, in its stats and its log, and says when it publishes again.
func TestRelayReportsAStall(t *testing.T) {
	var down atomic.Bool
	down.Store(true)
	var logs syncBuffer
	c, err := NewClient[int](txDriver{storeDriver{store: &readyStore{}}}, &Config{DisableNotify: true,
		Logger: slog.New(slog.NewTextHandler(&logs, nil))})
	if err != nil {
		t.Fatal(err)
	}
	r, err := NewRelay(c, PublisherFunc(func(context.Context, []Record) error {
		if down.Load() {
			return Unavailable(errors.New("connection refused"))
		}
		return nil
	}), &RelayConfig{StallAfter: 100 * time.Millisecond, Workers: 1, PollInterval: 10 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	runRelay(t, r)
	waitFor(t, "a stall reported", func() bool { return !r.Stats().StalledSince.IsZero() })
	if w := strings.Join(r.Stats().Waiting, ";"); w != "broker (down): stock" {
		t.Errorf("Waiting = %q, want the down broker and its topic", w)
	}
	down.Store(false)
	waitFor(t, "the stall's end", func() bool { return r.Stats().StalledSince.IsZero() })
	out := logs.String()
	if strings.Count(out, "relay stalled") != 1 || !strings.Contains(out, "relay publishing again after a stall") {
		t.Errorf("want one line for the stall and one for its end:\n%s", out)
	}
}

// syncBuffer is a bytes.Buffer safe for a logger's concurrent writes.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

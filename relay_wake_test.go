package postbox

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/postbox-go/postbox/driver"
)

// peekStore accepts every insert and claims nothing; it counts inserts, looks (Claimable) and claims.
type peekStore struct {
	driver.Store[int]
	inserts, looks, claims atomic.Int64
}

func (s *peekStore) Insert(context.Context, int, []driver.Record) error {
	s.inserts.Add(1)
	return nil
}

func (s *peekStore) Claimable(context.Context, time.Time) (bool, error) {
	s.looks.Add(1)
	return false, nil
}

func (s *peekStore) Claim(context.Context, driver.ClaimParams) (driver.Claim, error) {
	s.claims.Add(1)
	return emptyClaim{}, nil
}

// txDriver is a storeDriver whose transactions are numbers that need no database.
type txDriver struct{ storeDriver }

func (txDriver) Begin(context.Context) (int, error)  { return 1, nil }
func (txDriver) Commit(context.Context, int) error   { return nil }
func (txDriver) Rollback(context.Context, int) error { return nil }

// startIdleRelay runs a relay on a store that is always empty, with a poll interval no test outlives: an idle
// worker looks only when something makes it.
func startIdleRelay(t *testing.T, cfg *RelayConfig) (*Client[int], *peekStore, *Relay) {
	t.Helper()
	store := &peekStore{}
	c, err := NewClient[int](txDriver{storeDriver{store: store}}, &Config{DisableNotify: true})
	if err != nil {
		t.Fatal(err)
	}
	if cfg == nil {
		cfg = &RelayConfig{}
	}
	cfg.PollInterval, cfg.Workers = time.Hour, 1
	r, err := NewRelay(c, PublisherFunc(func(context.Context, []Record) error { return nil }), cfg)
	if err != nil {
		t.Fatal(err)
	}
	runRelay(t, r)
	waitFor(t, "the relay's first claim", func() bool { return store.claims.Load() >= 1 && c.local.running.Load() == 1 })
	return c, store, r
}

// runRelay runs r until the test ends, and fails the test if Run returns an error.
func runRelay(t *testing.T, r *Relay) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- r.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		select {
		case err := <-done:
			if err != nil {
				t.Error(err)
			}
		case <-time.After(10 * time.Second):
			t.Error("the relay's Run did not return within 10s of its context's end")
		}
	})
}

// waitIdle waits until the relay's workers have made n claims between them and all of them wait idle: each
// worker's first claim found nothing, so it waits for a wake-up, and the next Wake goes to one of them.
func waitIdle(t *testing.T, r *Relay, claims *atomic.Int64, n int64) {
	t.Helper()
	waitFor(t, fmt.Sprintf("%d first claims with every worker idle after them", n), func() bool {
		return claims.Load() >= n && r.busy.Load() == 0
	})
}

// receive waits for a value on ch, and fails the test, saying what did not happen, when none comes within 10s.
func receive[T any](t *testing.T, ch <-chan T, what string) T {
	t.Helper()
	select {
	case v := <-ch:
		return v
	case <-time.After(10 * time.Second):
		t.Fatalf("%s did not happen within 10s", what)
		panic("unreachable")
	}
}

func waitFor(t *testing.T, what string, ok func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !ok() {
		if time.Now().After(deadline) {
			t.Fatalf("no %s within 10s", what)
		}
		time.Sleep(time.Millisecond)
	}
}

// TestEnqueueMakesLocalRelayLook: an Enqueue in a transaction the caller commits itself makes an idle relay of
// the same client look soon, rather than at its next poll (an hour away here).
func TestEnqueueMakesLocalRelayLook(t *testing.T) {
	c, store, _ := startIdleRelay(t, nil)
	if n := store.looks.Load(); n != 0 {
		t.Fatalf("an idle relay with nothing to do looked %d times before its poll interval", n)
	}
	if _, err := c.Enqueue(context.Background(), 1, Message{Topic: "orders", Type: "order.created"}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "look after an enqueue", func() bool { return store.looks.Load() >= 1 })
	claims := store.claims.Load()
	waitFor(t, "second look as the relay slows down", func() bool { return store.looks.Load() >= 2 })
	if store.claims.Load() != claims {
		t.Fatal("the relay claimed although its looks found nothing")
	}
}

// TestInTxWakesLocalRelay: a transaction that enqueued wakes an idle relay of the same client when InTx commits
// it, so the relay claims at once; one that enqueued nothing does not.
func TestInTxWakesLocalRelay(t *testing.T) {
	c, store, r := startIdleRelay(t, &RelayConfig{RecheckDelay: time.Hour})
	ctx := context.Background()
	wakes := r.wakes.Load()
	if err := c.InTx(ctx, func(context.Context, int) error { return nil }); err != nil {
		t.Fatal(err)
	}
	// InTx wakes the relays before it returns, so a wake-up it sent would be counted by now.
	if n := r.wakes.Load() - wakes; n != 0 {
		t.Fatalf("a transaction that enqueued nothing woke the relay %d times, want 0", n)
	}
	if n := store.claims.Load(); n != 1 {
		t.Fatalf("a transaction that enqueued nothing made the relay claim (%d claims, want 1)", n)
	}
	err := c.InTx(ctx, func(ctx context.Context, tx int) error {
		_, err := c.Enqueue(ctx, tx, Message{Topic: "orders", Type: "order.created"})
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	waitFor(t, "claim after the commit", func() bool { return store.claims.Load() >= 2 })
}

// TestLookDelay: an idle worker looks again after the quiet time divided by QuietDivisor, no sooner than
// 4·RecheckDelay, no later than PollInterval; with no activity yet, once per PollInterval.
func TestLookDelay(t *testing.T) {
	c, err := NewClient[int](storeDriver{store: &peekStore{}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	r, err := NewRelay(c, PublisherFunc(func(context.Context, []Record) error { return nil }),
		&RelayConfig{PollInterval: time.Second, RecheckDelay: time.Millisecond, QuietDivisor: 4})
	if err != nil {
		t.Fatal(err)
	}
	if d := r.lookDelay(); d != time.Second {
		t.Fatalf("before any activity: %v, want the poll interval", d)
	}
	for quiet, want := range map[time.Duration]time.Duration{
		0: 4 * time.Millisecond, 100 * time.Millisecond: 25 * time.Millisecond, time.Hour: time.Second,
	} {
		r.lastActive.Store(int64(time.Since(r.epoch) - quiet))
		if d := r.lookDelay(); d < want || d > want+want/10 {
			t.Errorf("after %v quiet: %v, want %v", quiet, d, want)
		}
	}
	if err := (&RelayConfig{QuietDivisor: -1}).WithDefaults().validate(); err == nil {
		t.Error("a negative QuietDivisor was accepted")
	}
}

// TestIdleRelayLooksOncePerPollInterval: once the quiet spell after activity is QuietDivisor poll intervals long,
// an idle relay's workers together look once per PollInterval: at most once (the pollGate), so that an idle relay
// costs no more with more workers, and at least once, so that a message committed without a wake-up waits about one
// interval.
func TestIdleRelayLooksOncePerPollInterval(t *testing.T) {
	store := &peekStore{}
	c, err := NewClient[int](txDriver{storeDriver{store: store}}, &Config{DisableNotify: true})
	if err != nil {
		t.Fatal(err)
	}
	const poll = 20 * time.Millisecond
	r, err := NewRelay(c, PublisherFunc(func(context.Context, []Record) error { return nil }),
		&RelayConfig{PollInterval: poll, RecheckDelay: time.Millisecond, QuietDivisor: 4, Workers: 3})
	if err != nil {
		t.Fatal(err)
	}
	runRelay(t, r)
	waitFor(t, "the relay running", func() bool { return c.local.running.Load() == 1 })
	if _, err := c.Enqueue(context.Background(), 1, Message{Topic: "orders", Type: "order.created"}); err != nil {
		t.Fatal(err) // activity: the relay looks often, then ever less often
	}
	waitFor(t, "a look after the enqueue", func() bool { return store.looks.Load() >= 1 })
	waitFor(t, "quiet spell of QuietDivisor poll intervals after the enqueue", func() bool {
		return r.busy.Load() == 0 && time.Since(r.epoch)-time.Duration(r.lastActive.Load()) >= 4*poll
	})
	// A wait armed before the spell was long enough ends within one interval, and two looks are at least 9/10 of
	// one apart: after three more looks, every worker waits a whole interval.
	settled := store.looks.Load() + 3
	waitFor(t, "three looks once the relay was quiet (one per PollInterval is due)", func() bool { return store.looks.Load() >= settled })

	// The window is 25 waits of one interval each, one after the other as a worker's are: on a loaded machine its
	// timers run as late as the workers', so the lower bound below does not depend on the machine's speed.
	const waits = 25
	before, start := store.looks.Load(), time.Now()
	for range waits {
		time.Sleep(poll)
	}
	looks, window := store.looks.Load()-before, time.Since(start)
	t.Logf("%d looks in %v (%d waits of %v)", looks, window, waits, poll)
	// The pollGate lets workers look 9/10 of an interval apart, to allow for timer drift.
	if most := int64(window/(poll*9/10)) + 1; looks > most {
		t.Fatalf("an idle relay of 3 workers looked %d times in %v, want at most %d (one per PollInterval %v)", looks, window, most, poll)
	}
	// The worker that looked last looks again one interval later, unless another did meanwhile, so the relay
	// looks as often as the window's waits; half of them leaves room for the timers' jitter.
	if least := int64(waits / 2); looks < least {
		t.Fatalf("an idle relay of 3 workers looked %d times in %v (%d waits of its PollInterval %v), want at least %d: a message committed without a wake-up waits longer than an interval",
			looks, window, waits, poll, least)
	}
}

// skipLockedStore holds one message and claims it as a database with SKIP LOCKED does: a claim returns it only
// when the claim read its clock after the message committed and no other claim holds the row, even for a moment.
// A claim of a clock read before the commit locks the row while it finds the message not yet due. The next claim
// to start after hold is set waits until release is closed.
type skipLockedStore struct {
	driver.Store[int]
	mu        sync.Mutex
	committed time.Time // zero until the message commits
	claimed   bool
	inFlight  int
	hold      bool
	held      chan struct{} // closed when the held claim started
	release   chan struct{}
	claims    atomic.Int64
}

func (s *skipLockedStore) Claim(_ context.Context, p driver.ClaimParams) (driver.Claim, error) {
	s.mu.Lock()
	others := s.inFlight
	s.inFlight++
	hold := s.hold
	s.hold = false
	s.mu.Unlock()
	if hold {
		close(s.held)
		<-s.release
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	defer s.claims.Add(1)
	s.inFlight--
	if s.committed.IsZero() || s.claimed || p.Now.Before(s.committed) || others > 0 {
		return emptyClaim{}, nil
	}
	s.claimed = true
	return &recordsClaim{recs: []driver.Record{{Message: driver.Message{ID: "m1", Topic: "orders", Type: "order.created"}}}}, nil
}

type recordsClaim struct {
	driver.Claim
	recs []driver.Record
}

func (c *recordsClaim) Records() []driver.Record                        { return c.recs }
func (c *recordsClaim) Settle(context.Context, driver.Settlement) error { return nil }

// TestWakeDuringClaimIsNotLost: a wake-up that comes while one worker's claim runs, and is taken by another
// worker whose claim skips the message that the first claim holds locked for a moment, still makes a claim find
// the message. Neither a poll (an hour) nor a recheck (an hour) comes within the test's time.
func TestWakeDuringClaimIsNotLost(t *testing.T) {
	store := &skipLockedStore{held: make(chan struct{}), release: make(chan struct{})}
	c, err := NewClient[int](storeDriver{store: store}, &Config{DisableNotify: true})
	if err != nil {
		t.Fatal(err)
	}
	published := make(chan struct{}, 1)
	r, err := NewRelay(c, PublisherFunc(func(context.Context, []Record) error {
		published <- struct{}{}
		return nil
	}), &RelayConfig{PollInterval: time.Hour, RecheckDelay: time.Hour, Workers: 2})
	if err != nil {
		t.Fatal(err)
	}
	runRelay(t, r)
	t.Cleanup(func() { close(store.release) }) // runs before the relay is stopped: the held claim must end
	waitIdle(t, r, &store.claims, 2)

	store.mu.Lock()
	store.hold = true
	store.mu.Unlock()
	r.Wake() // worker A claims, with a clock read before the commit below, and holds the row
	receive(t, store.held, "the woken worker's claim")
	store.mu.Lock()
	store.committed = time.Now()
	store.mu.Unlock()
	claims := store.claims.Load()
	r.Wake() // the commit's wake-up: worker B claims and skips the row A holds
	waitFor(t, "worker B's claim", func() bool { return store.claims.Load() > claims })
	store.release <- struct{}{} // A's claim ends, finding the message not yet due
	select {
	case <-published:
	case <-time.After(5 * time.Second):
		t.Fatalf("the message was not published within 5s: the wake-up that came during a claim was lost (%d claims)", store.claims.Load())
	}
}

// queueStore hands out the messages put into it, each to one claim; the first claim's settle waits until
// release is closed, as a commit waiting for the disk does.
type queueStore struct {
	driver.Store[int]
	mu      sync.Mutex
	queue   []driver.Record
	settles int
	release chan struct{}
	claims  atomic.Int64
}

func (s *queueStore) put(id string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.queue = append(s.queue, driver.Record{Message: driver.Message{ID: id, Topic: "orders", Type: "order.created"}})
}

func (s *queueStore) Claim(context.Context, driver.ClaimParams) (driver.Claim, error) {
	defer s.claims.Add(1)
	s.mu.Lock()
	defer s.mu.Unlock()
	recs := s.queue
	s.queue = nil
	return &settleClaim{s: s, recs: recs}, nil
}

type settleClaim struct {
	driver.Claim
	s    *queueStore
	recs []driver.Record
}

func (c *settleClaim) Records() []driver.Record { return c.recs }

func (c *settleClaim) Settle(context.Context, driver.Settlement) error {
	c.s.mu.Lock()
	c.s.settles++
	first := c.s.settles == 1
	c.s.mu.Unlock()
	if first {
		<-c.s.release
	}
	return nil
}

// TestRecheckWhileSettling: while one worker's batch settles slowly, the look due RecheckDelay after its claim is
// taken by an idle worker, so a message committed meanwhile is published before that batch has settled.
func TestRecheckWhileSettling(t *testing.T) {
	store := &queueStore{release: make(chan struct{})}
	c, err := NewClient[int](storeDriver{store: store}, &Config{DisableNotify: true})
	if err != nil {
		t.Fatal(err)
	}
	published := make(chan string, 2)
	r, err := NewRelay(c, PublisherFunc(func(_ context.Context, recs []Record) error {
		for _, rec := range recs {
			published <- rec.ID
		}
		return nil
	}), &RelayConfig{PollInterval: time.Hour, RecheckDelay: 5 * time.Millisecond, Workers: 2})
	if err != nil {
		t.Fatal(err)
	}
	runRelay(t, r)
	t.Cleanup(func() { close(store.release) }) // runs before the relay is stopped: the settle held must end
	waitIdle(t, r, &store.claims, 2)
	store.put("m1")
	r.Wake()
	if id := receive(t, published, "m1's publish after a wake-up"); id != "m1" {
		t.Fatalf("published %s first, want m1", id)
	}
	store.put("m2") // m1's batch is settling, and stays so until the end of the test
	select {
	case <-published:
	case <-time.After(5 * time.Second):
		t.Fatal("a message committed while the batch before it settled waited for that settle: no idle worker took the look due RecheckDelay after the claim")
	}
}

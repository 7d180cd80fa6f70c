package postbox

import (
	"context"
	"errors"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/postbox-go/postbox/driver"
)

func TestNotifierSendsOnePerInterval(t *testing.T) {
	nt := &notifier[int]{interval: 5 * time.Millisecond}
	nt.last.Store(-int64(nt.interval))
	steps := []struct {
		at   time.Duration
		want bool
	}{
		{0, true}, {time.Millisecond, false}, {4 * time.Millisecond, false}, {5 * time.Millisecond, true},
		{9 * time.Millisecond, false}, {30 * time.Millisecond, true}, {30 * time.Millisecond, false},
	}
	for _, s := range steps {
		if got := nt.take(s.at); got != s.want {
			t.Fatalf("take at %v = %v, want %v", s.at, got, s.want)
		}
	}
}

func TestNotifierOneWinnerAmongConcurrentCallers(t *testing.T) {
	nt := &notifier[int]{interval: time.Hour}
	nt.last.Store(-int64(nt.interval))
	var wins atomic.Int64
	var wg sync.WaitGroup
	for range 64 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if nt.take(time.Second) {
				wins.Add(1)
			}
		}()
	}
	wg.Wait()
	if wins.Load() != 1 {
		t.Fatalf("%d concurrent transactions notified within one interval, want 1", wins.Load())
	}
}

// countingStore counts plain inserts and inserts with a wake-up.
type countingStore struct {
	driver.Store[int]
	plain, notified atomic.Int64
	err             error
}

func (c *countingStore) Insert(context.Context, int, []driver.Record) error {
	c.plain.Add(1)
	return nil
}

func (c *countingStore) InsertNotify(context.Context, int, []driver.Record) error {
	c.notified.Add(1)
	return c.err
}

func TestNotifierHonoursConfig(t *testing.T) {
	ctx := context.Background()
	store := &countingStore{}
	on := newNotifier[int](store, (&Config{NotifyInterval: time.Hour}).WithDefaults())
	for range 3 {
		if err := on.insert(ctx, 0, nil); err != nil {
			t.Fatal(err)
		}
	}
	if store.notified.Load() != 1 || store.plain.Load() != 2 {
		t.Fatalf("3 inserts within an interval: %d with a wake-up, %d without; want 1 and 2", store.notified.Load(), store.plain.Load())
	}
	off := newNotifier[int](store, (&Config{DisableNotify: true}).WithDefaults())
	if err := off.insert(ctx, 0, nil); err != nil || store.notified.Load() != 1 {
		t.Fatalf("DisableNotify: err %v, %d wake-ups; want none more", err, store.notified.Load())
	}
	store.err = errors.New("queue full")
	failing := newNotifier[int](store, (&Config{}).WithDefaults())
	if err := failing.insert(ctx, 0, nil); !errors.Is(err, store.err) {
		t.Fatalf("a failed insert with a wake-up returned %v; the caller must see it", err)
	}
	if err := (Config{NotifyInterval: -1, Table: "a", InboxTable: "b"}).validate(driver.Capabilities{}); !errors.Is(err, ErrInvalidConfig) {
		t.Fatalf("negative NotifyInterval: %v, want ErrInvalidConfig", err)
	}
}

func TestPollGateLetsOneWorkerPollPerInterval(t *testing.T) {
	var g pollGate
	if !g.take(time.Hour) {
		t.Fatal("the first poll was refused")
	}
	if g.take(time.Hour) {
		t.Fatal("a second worker polled within the interval")
	}
	var fast pollGate
	fast.take(time.Nanosecond)
	time.Sleep(time.Millisecond)
	if !fast.take(time.Nanosecond) {
		t.Fatal("a poll after the interval was refused")
	}
}

// claimStore records which claim a relay makes; it claims nothing.
type claimStore struct {
	driver.Store[int]
	plain, ordered int
	deadHoldsKey   bool
}

func (s *claimStore) Claim(context.Context, driver.ClaimParams) (driver.Claim, error) {
	s.plain++
	return emptyClaim{}, nil
}

type orderedStore struct{ *claimStore }

func (s orderedStore) ClaimOrdered(_ context.Context, _ driver.ClaimParams, deadHoldsKey bool) (driver.Claim, error) {
	s.ordered++
	s.deadHoldsKey = deadHoldsKey
	return emptyClaim{}, nil
}

type emptyClaim struct{ driver.Claim }

func (emptyClaim) Records() []driver.Record { return nil }

// storeDriver is a driver whose every table set is one store.
type storeDriver struct {
	driver.Driver[int]
	store driver.Store[int]
}

func (d storeDriver) Capabilities() driver.Capabilities             { return driver.Capabilities{Dialect: "test"} }
func (d storeDriver) Store(driver.Names) (driver.Store[int], error) { return d.store, nil }

// TestRelayOrderedFollowsClient: a relay is ordered exactly when its client is, and DeadHoldsKey, which means
// nothing to an unordered relay, is refused there rather than ignored.
func TestRelayOrderedFollowsClient(t *testing.T) {
	ctx := context.Background()
	pub := PublisherFunc(func(context.Context, []Record) error { return nil })
	newClient := func(store driver.Store[int], ordered bool) *Client[int] {
		t.Helper()
		c, err := NewClient[int](storeDriver{store: store}, &Config{Ordered: ordered})
		if err != nil {
			t.Fatal(err)
		}
		return c
	}

	plain := &claimStore{}
	r, err := NewRelay(newClient(orderedStore{plain}, false), pub, nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := r.RunOnce(ctx); err != nil || plain.plain != 1 || plain.ordered != 0 {
		t.Fatalf("relay of an unordered client: err %v, %d claims, %d ordered claims; want 1 and 0", err, plain.plain, plain.ordered)
	}
	if r.cfg.Workers != DefaultWorkers {
		t.Fatalf("relay of an unordered client defaults to %d workers, want %d", r.cfg.Workers, DefaultWorkers)
	}
	if _, err := NewRelay(newClient(orderedStore{plain}, false), pub, &RelayConfig{DeadHoldsKey: true}); !errors.Is(err, ErrInvalidConfig) ||
		!strings.Contains(err.Error(), "Config.Ordered") {
		t.Fatalf("DeadHoldsKey on an unordered client: %v; want ErrInvalidConfig naming Config.Ordered", err)
	}

	ordered := &claimStore{}
	r, err = NewRelay(newClient(orderedStore{ordered}, true), pub, &RelayConfig{DeadHoldsKey: true})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := r.RunOnce(ctx); err != nil || ordered.plain != 0 || ordered.ordered != 1 || !ordered.deadHoldsKey {
		t.Fatalf("relay of an ordered client: err %v, %d claims, %d ordered claims (dead holds key: %v); want 0, 1 (true)",
			err, ordered.plain, ordered.ordered, ordered.deadHoldsKey)
	}
	if r.cfg.Workers != 1 {
		t.Fatalf("relay of an ordered client defaults to %d workers, want 1", r.cfg.Workers)
	}
	if r, err := NewRelay(newClient(orderedStore{ordered}, true), pub, &RelayConfig{Workers: 3}); err != nil || r.cfg.Workers != 3 {
		t.Fatalf("ordered relay with 3 workers: %v", err)
	}
	if _, err := NewRelay(newClient(&claimStore{}, true), pub, nil); !errors.Is(err, ErrInvalidConfig) {
		t.Fatalf("ordered client on a store that cannot claim in order: %v; want ErrInvalidConfig", err)
	}
	if err := (&RelayConfig{RecheckDelay: -1}).WithDefaults().validate(); !errors.Is(err, ErrInvalidConfig) {
		t.Fatalf("negative RecheckDelay: %v, want ErrInvalidConfig", err)
	}
}

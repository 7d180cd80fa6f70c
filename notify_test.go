package postbox

import (
	"context"
	"errors"
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

func (c *countingStore) Insert(context.Context, int, []Record) error {
	c.plain.Add(1)
	return nil
}

func (c *countingStore) InsertNotify(context.Context, int, []Record) error {
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

func TestRelayConfigOrdered(t *testing.T) {
	c := (&RelayConfig{DeadHoldsKey: true}).WithDefaults()
	if err := c.validate(); !errors.Is(err, ErrInvalidConfig) {
		t.Fatalf("DeadHoldsKey without Ordered: %v, want ErrInvalidConfig", err)
	}
	c = (&RelayConfig{Ordered: true, DeadHoldsKey: true, RecheckDelay: -1}).WithDefaults()
	if err := c.validate(); !errors.Is(err, ErrInvalidConfig) {
		t.Fatalf("negative RecheckDelay: %v, want ErrInvalidConfig", err)
	}
	if d := (*RelayConfig)(nil).WithDefaults(); d.RecheckDelay != DefaultRecheckDelay || d.Workers != DefaultWorkers {
		t.Fatalf("defaults: RecheckDelay %v, Workers %d", d.RecheckDelay, d.Workers)
	}
	if d := (&RelayConfig{Ordered: true}).WithDefaults(); d.Workers != 1 {
		t.Fatalf("ordered relay defaults to %d workers, want 1", d.Workers)
	}
	if d := (&RelayConfig{Ordered: true, Workers: 3}).WithDefaults(); d.Workers != 3 {
		t.Fatalf("ordered relay with 3 workers got %d", d.Workers)
	}
}

package drivertest

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/postbox-go/postbox"
	"github.com/postbox-go/postbox/postboxtest"
)

func testOrdered[TTx any](t *testing.T, newDriver NewDriver[TTx]) {
	drv := newDriver(t)
	ctx := context.Background()
	t.Run("NeedsOrderedTables", func(t *testing.T) {
		c := Client(t, drv, nil)
		// A relay is ordered when its client is: an ordered option on an unordered client is refused.
		if _, err := postbox.NewRelay(c, &postboxtest.Recorder{}, &postbox.RelayConfig{DeadHoldsKey: true}); !errors.Is(err, postbox.ErrInvalidConfig) ||
			!strings.Contains(err.Error(), "Config.Ordered") {
			t.Fatalf("DeadHoldsKey on a client without Config.Ordered: %v; want ErrInvalidConfig naming Config.Ordered", err)
		}
		for _, m := range c.Migrations() {
			if strings.Contains(m.Name, "ordered") {
				t.Fatalf("migration %d (%s) listed for a table set without Config.Ordered", m.Version, m.Name)
			}
		}
		// Turning Config.Ordered on later applies the index to the existing tables.
		cfg := c.Config()
		cfg.Ordered = true
		oc, err := postbox.NewClient(drv, &cfg)
		if err != nil {
			t.Fatal(err)
		}
		applied, err := oc.Migrate(ctx)
		ordered := slices.IndexFunc(oc.Migrations(), func(m postbox.Migration) bool { return strings.Contains(m.Name, "ordered") })
		if err != nil || len(applied) != 1 || ordered < 0 || applied[0] != oc.Migrations()[ordered].Version {
			t.Fatalf("Migrate with Config.Ordered on migrated tables applied %v, %v; want the ordered index alone", applied, err)
		}
		if _, err := postbox.NewRelay(oc, &postboxtest.Recorder{}, &postbox.RelayConfig{DeadHoldsKey: true}); err != nil {
			t.Fatalf("ordered relay with Config.Ordered: %v", err)
		}
	})

	t.Run("OneHeadPerKeyPerClaim", func(t *testing.T) {
		c := Client(t, drv, orderedTables(nil))
		msgs := keyed("a", "b", "a", "c", "b", "a", "")
		enqueue(t, c, msgs...)
		rec := &postboxtest.Recorder{}
		r := relay(t, c, rec, nil)
		// The heads of a, b and c, and the message without a key, which is not ordered.
		if n, err := r.RunOnce(ctx); err != nil || n != 4 {
			t.Fatalf("first claim took %d (%v); want the 3 heads and the unkeyed message", n, err)
		}
		if n, err := r.RunOnce(ctx); err != nil || n != 2 {
			t.Fatalf("second claim took %d (%v); want the second a and b", n, err)
		}
		if n := drain(t, r); n != 1 {
			t.Fatalf("third claim took %d; want the last a", n)
		}
		checkKeyOrder(t, msgs, rec.Records())
	})

	t.Run("FailureHoldsOnlyItsKey", func(t *testing.T) {
		clock := postboxtest.NewClock(time.Now().UTC().Truncate(time.Millisecond))
		c := Client(t, drv, orderedTables(clock))
		msgs := keyed("a", "b", "a", "b", "b")
		enqueue(t, c, msgs...)
		broken := true
		rec := &postboxtest.Recorder{Fail: func(r postbox.Record) error {
			if broken && r.ID == msgs[0].ID {
				return errors.New("broker rejects the first a for now")
			}
			return nil
		}}
		r := relay(t, c, rec, &postbox.RelayConfig{BackoffBase: time.Minute, BackoffMax: time.Minute})
		drain(t, r)
		if got := publishedIDs(rec); !slices.Equal(got, ids(pick(msgs, 1, 3, 4))) {
			t.Fatalf("published %v; want every b in order and no a while the first a fails", got)
		}
		broken = false
		clock.Advance(time.Minute)
		drain(t, r)
		checkKeyOrder(t, msgs, rec.Records())
		if len(rec.Records()) != len(msgs) {
			t.Fatalf("published %d of %d after the failure cleared", len(rec.Records()), len(msgs))
		}
	})

	t.Run("DelayedMessageHoldsItsKey", func(t *testing.T) {
		clock := postboxtest.NewClock(time.Now().UTC().Truncate(time.Millisecond))
		c := Client(t, drv, orderedTables(clock))
		first := postbox.Message{Topic: "orders", Type: "order.paid", Key: "a", AvailableAt: clock.Now().Add(time.Hour)}
		enqueue(t, c, first)
		enqueue(t, c, postbox.Message{Topic: "orders", Type: "order.shipped", Key: "a"})
		rec := &postboxtest.Recorder{}
		r := relay(t, c, rec, nil)
		if n := drain(t, r); n != 0 {
			t.Fatalf("claimed %d; a message due in an hour must hold back the later message of its key", n)
		}
		clock.Advance(time.Hour)
		if n := drain(t, r); n != 2 {
			t.Fatalf("claimed %d once the first was due, want 2", n)
		}
		if recs := rec.Records(); recs[0].Type != "order.paid" {
			t.Fatalf("published %s first, want order.paid", recs[0].Type)
		}
	})

	t.Run("DeadReleasesItsKey", func(t *testing.T) {
		c := Client(t, drv, orderedTables(nil))
		msgs := keyed("a", "a", "a")
		enqueue(t, c, msgs...)
		rec := &postboxtest.Recorder{Fail: failID(msgs[0].ID)}
		r := relay(t, c, rec, nil)
		drain(t, r)
		if got := publishedIDs(rec); !slices.Equal(got, ids(msgs[1:])) {
			t.Fatalf("published %v; want the two messages after the dead one, in order", got)
		}
	})

	t.Run("DeadHoldsItsKeyWhenAsked", func(t *testing.T) {
		c := Client(t, drv, orderedTables(nil))
		msgs := keyed("a", "a", "b")
		enqueue(t, c, msgs...)
		rec := &postboxtest.Recorder{Fail: failID(msgs[0].ID)}
		r := relay(t, c, rec, &postbox.RelayConfig{DeadHoldsKey: true})
		drain(t, r)
		if got := publishedIDs(rec); !slices.Equal(got, ids(msgs[2:])) {
			t.Fatalf("published %v; want only b while a's first message is dead", got)
		}
		// The operator fixes the message and retries it: the key flows again, in order.
		rec.Fail = nil
		if n, err := c.RetryDead(ctx, postbox.DeadFilter{IDs: []string{msgs[0].ID}}); err != nil || n != 1 {
			t.Fatalf("RetryDead = %d, %v", n, err)
		}
		drain(t, r)
		checkKeyOrder(t, msgs, rec.Records())
		if len(rec.Records()) != 3 {
			t.Fatalf("published %d after the retry, want all 3", len(rec.Records()))
		}
		// Purging a dead message releases its key too.
		more := keyed("c", "c")
		enqueue(t, c, more...)
		rec.Fail = failID(more[0].ID)
		drain(t, r)
		if n, err := c.PurgeDead(ctx, postbox.DeadFilter{IDs: []string{more[0].ID}}); err != nil || n != 1 {
			t.Fatalf("PurgeDead = %d, %v", n, err)
		}
		if n := drain(t, r); n != 1 || rec.Counts()[more[1].ID] != 1 {
			t.Fatalf("after purging the dead head, claimed %d; want the message behind it", n)
		}
	})

	t.Run("PerKeyOrderWithSeveralRelays", func(t *testing.T) {
		testOrderedRelays(t, newDriver)
	})

	if drv.Capabilities().SkipLocked {
		t.Run("RelaysShareKeys", func(t *testing.T) {
			// Relay A holds the head of a in flight; relay B meanwhile takes b's head and nothing of a.
			c := Client(t, drv, orderedTables(nil))
			msgs := keyed("a", "b", "a", "b")
			enqueue(t, c, msgs...)
			inFlight, release := make(chan struct{}), make(chan struct{})
			slow := postbox.PublisherFunc(func(context.Context, []postbox.Record) error {
				close(inFlight)
				<-release
				return nil
			})
			rc, err := postbox.NewClient(newDriver(t), ptr(c.Config()))
			if err != nil {
				t.Fatal(err)
			}
			a := relay(t, c, slow, &postbox.RelayConfig{BatchSize: 1})
			done := make(chan error, 1)
			go func() {
				_, err := a.RunOnce(ctx)
				done <- err
			}()
			<-inFlight
			rec := &postboxtest.Recorder{}
			b := relay(t, rc, rec, nil)
			n, err := b.RunOnce(ctx)
			close(release)
			if err := <-done; err != nil {
				t.Fatal(err)
			}
			if err != nil || n != 1 || rec.Counts()[msgs[1].ID] != 1 {
				t.Fatalf("relay B claimed %d (%v), published %v; want b's head only while a's is in flight", n, err, rec.Counts())
			}
		})
	}
}

// testOrderedRelays runs three ordered relays of two workers each over 20 keys and checks that no key ever has
// two messages in flight and that each key's messages are published in enqueue order.
func testOrderedRelays[TTx any](t *testing.T, newDriver NewDriver[TTx]) {
	const keys, perKey, relays = 20, 40, 3
	c := Client(t, newDriver(t), orderedTables(nil))
	var msgs []postbox.Message
	for i := range keys * perKey {
		msgs = append(msgs, postbox.Message{Topic: "orders", Type: "order.updated", Key: fmt.Sprintf("k%02d", i%keys),
			Payload: fmt.Appendf(nil, `{"n":%d}`, i)})
	}
	for i := 0; i < len(msgs); i += 100 {
		enqueue(t, c, msgs[i:i+100]...)
	}
	pub := &orderChecker{inFlight: map[string]bool{}}
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	for range relays {
		rc, err := postbox.NewClient(newDriver(t), ptr(c.Config()))
		if err != nil {
			t.Fatal(err)
		}
		r := relay(t, rc, pub, &postbox.RelayConfig{Workers: 2, BatchSize: 8})
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := r.Run(ctx); err != nil {
				t.Error(err)
			}
		}()
	}
	reached := pub.rec.WaitDistinct(ctx, len(msgs), 2*time.Minute)
	cancel()
	wg.Wait()
	if !reached {
		t.Fatalf("ordered relays published %d of %d", pub.rec.Distinct(), len(msgs))
	}
	if v := pub.violations(); len(v) > 0 {
		t.Fatalf("%d ordering violations, first: %s", len(v), v[0])
	}
	checkKeyOrder(t, msgs, pub.rec.Records())
}

// orderedTables returns Tables(clock) for an ordered client: its relays claim in per-key order, and its migration
// adds the key index they need.
func orderedTables(clock postbox.Clock) *postbox.Config {
	cfg := Tables(clock)
	cfg.Ordered = true
	return cfg
}

// orderChecker is a publisher that records a violation whenever a key has two messages in flight at once.
type orderChecker struct {
	rec      postboxtest.Recorder
	mu       sync.Mutex
	inFlight map[string]bool
	bad      []string
}

func (o *orderChecker) Publish(ctx context.Context, batch []postbox.Record) error {
	o.mu.Lock()
	for _, r := range batch {
		if o.inFlight[r.Key] {
			o.bad = append(o.bad, fmt.Sprintf("message %s of key %s published while another of its key was in flight", r.ID, r.Key))
		}
		o.inFlight[r.Key] = true
	}
	o.mu.Unlock()
	err := o.rec.Publish(ctx, batch)
	o.mu.Lock()
	for _, r := range batch {
		delete(o.inFlight, r.Key)
	}
	o.mu.Unlock()
	return err
}

func (o *orderChecker) violations() []string {
	o.mu.Lock()
	defer o.mu.Unlock()
	return slices.Clone(o.bad)
}

// checkKeyOrder fails t unless, for every key, published holds that key's messages once each, in enqueue order.
func checkKeyOrder(t *testing.T, enqueued []postbox.Message, published []postbox.Record) {
	t.Helper()
	want, got := map[string][]string{}, map[string][]string{}
	for _, m := range enqueued {
		if m.Key != "" {
			want[m.Key] = append(want[m.Key], m.ID)
		}
	}
	for _, r := range published {
		if r.Key != "" {
			got[r.Key] = append(got[r.Key], r.ID)
		}
	}
	for k, w := range want {
		if !slices.Equal(got[k], w) {
			t.Fatalf("key %s published as %v; want %v (enqueue order, once each)", k, got[k], w)
		}
	}
}

// keyed returns one message per key given, in that order.
func keyed(keys ...string) []postbox.Message {
	out := make([]postbox.Message, len(keys))
	for i, k := range keys {
		out[i] = postbox.Message{Topic: "orders", Type: "order.updated", Key: k, Payload: fmt.Appendf(nil, `{"n":%d}`, i)}
	}
	return out
}

func pick(msgs []postbox.Message, idx ...int) []postbox.Message {
	out := make([]postbox.Message, len(idx))
	for i, j := range idx {
		out[i] = msgs[j]
	}
	return out
}

func publishedIDs(rec *postboxtest.Recorder) []string {
	var out []string
	for _, r := range rec.Records() {
		out = append(out, r.ID)
	}
	return out
}

// failID returns a Recorder.Fail that parks the message with the given ID as dead.
func failID(id string) func(postbox.Record) error {
	return func(r postbox.Record) error {
		if r.ID == id {
			return postbox.Permanent(errors.New("rejected"))
		}
		return nil
	}
}

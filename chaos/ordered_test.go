package chaos

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/postbox-go/postbox"
	natsbroker "github.com/postbox-go/postbox/broker/natsbroker"
)

// TestPoisonOrdered: a relay in ordered mode meets a poison message on key k00, a message to a subject no stream
// covers, whose every publish fails. Two messages of k00 committed before it go out; the rest of k00 waits behind
// it while it is retried, and every other key flows all the while. Past MaxAttempts it is parked as dead, and then:
//   - by default (DeadReleasesKey), the dead message releases its key and the rest of k00 flows;
//   - with DeadHoldsKey, the rest of k00 stays pending, however long, until an operator acts: here by adding the
//     subject to the stream, the fix, and retrying the dead message with RetryDead. It is then published, and
//     the rest of k00 after it.
//
// The consumer handles each key's messages in enqueue order, which the ledger checks from the order of its
// effects.
func TestPoisonOrdered(t *testing.T) {
	t.Run("DeadReleasesKey", func(t *testing.T) { poisonOrdered(t, false) })
	t.Run("DeadHoldsKey", func(t *testing.T) { poisonOrdered(t, true) })
}

func poisonOrdered(t *testing.T, holds bool) {
	const maxAttempts, poisonKey = 5, "k00"
	events, over := size(2000, 20000), size(6*time.Second, 30*time.Second)
	ctx, cancel := context.WithTimeout(context.Background(), deadline())
	defer cancel()
	name := "poisonrelease"
	if holds {
		name = "poisonhold"
	}
	w := newWorld(t, name, worldOptions{ordered: true})
	nostream := w.topic + ".nostream"
	before := []postbox.Message{
		{ID: postbox.NewID(), Topic: w.topic, Type: "chaos.event", Key: poisonKey},
		{ID: postbox.NewID(), Topic: w.topic, Type: "chaos.event", Key: poisonKey},
	}
	poison := postbox.Message{ID: postbox.NewID(), Topic: nostream, Type: "chaos.event", Key: poisonKey}
	if err := w.commit(ctx, append(before, poison)...); err != nil {
		t.Fatal(err)
	}
	rc := w.relayConfig()
	rc.MaxAttempts, rc.DeadHoldsKey = maxAttempts, holds
	// One message of each key per batch at most: a batch walks the backlog until it has BatchSize heads of keys,
	// so it stays within the busy keys (postbox.Config.Ordered).
	rc.BatchSize = eventKeys / 2
	// Slow retries keep the poison pending for about (maxAttempts-1)·Backoff, long enough to see k00 wait.
	rc.Backoff = size(time.Second, 3*time.Second)
	w.goConsumer(w.consumerConfig())
	w.goRelay(rc)
	w.produce(ctx, events, over)

	// While the poison is pending, note the database's clock: any effect of k00 after the poison from before that
	// moment was published before the poison was parked.
	pendingUntil := w.watchPending(ctx, poison.ID)
	var behind, others int64
	err := w.pool.QueryRow(ctx, "SELECT count(*) FILTER (WHERE key = $1 AND id > $2), count(*) FILTER (WHERE key <> $1)"+
		" FROM "+w.ledger.effects+" WHERE at < $3", poisonKey, poison.ID, pendingUntil).Scan(&behind, &others)
	if err != nil {
		t.Fatal(err)
	}
	if behind != 0 {
		t.Errorf("%d messages of %s behind the poison took effect while it was pending", behind, poisonKey)
	}
	if others == 0 {
		t.Errorf("no message of another key took effect while the poison was pending: the other keys did not flow")
	}
	fmt.Printf("%s: while the poison was pending, %d effects of other keys, %d of %s behind it\n", t.Name(), others, behind, poisonKey)

	dead := []string{poison.ID}
	if holds {
		held := w.awaitHeld(ctx, poisonKey, poison.ID)
		if held == 0 {
			t.Fatalf("no message of %s was committed behind the poison; nothing shows that the key was held", poisonKey)
		}
		fmt.Printf("%s: every other message settled; %d of %s held behind the dead poison\n", t.Name(), held, poisonKey)
		// The operator's fix: a stream takes the poison's subject now. Then the retry.
		if _, err := natsbroker.EnsureStream(ctx, w.js, jetstream.StreamConfig{Name: w.role.Stream,
			Subjects: []string{w.topic, nostream}, Storage: jetstream.FileStorage}); err != nil {
			t.Fatal(err)
		}
		if n, err := w.client.RetryDead(ctx, postbox.DeadFilter{IDs: []string{poison.ID}}); err != nil || n != 1 {
			t.Fatalf("RetryDead = %d, %v; want 1", n, err)
		}
		dead = nil
	}
	w.settle(ctx)
	outOfOrder, err := w.ledger.OutOfOrder(ctx, w.pool)
	if err != nil {
		t.Fatal(err)
	}
	fmt.Printf("%s: per-key order at the consumer: %d effects out of order\n", t.Name(), outOfOrder)
	if outOfOrder != 0 {
		t.Errorf("%d effects came after an effect of a later message of their key", outOfOrder)
	}
	fault := fmt.Sprintf("ordered mode; a message of %s no stream takes, dead after %d attempts, releasing its key", poisonKey, maxAttempts)
	if holds {
		fault = fmt.Sprintf("ordered mode, DeadHoldsKey; a message of %s no stream takes, dead after %d attempts, then fixed and retried", poisonKey, maxAttempts)
	}
	w.verdict(ctx, expect{events: events + len(before) + 1, dupBound: 0, bound: "no fault", dead: dead, fault: fault,
		felt: func(s *roleStats) string {
			if s.relay.Dead != 1 {
				return fmt.Sprintf("relays parked %d messages, want 1", s.relay.Dead)
			}
			return ""
		}})
}

// watchPending waits until message id is no longer pending in the outbox and returns the database's clock at the
// last moment it was seen pending.
func (w *world) watchPending(ctx context.Context, id string) time.Time {
	w.t.Helper()
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	var last time.Time
	for {
		var status string
		var now time.Time
		err := w.pool.QueryRow(ctx, "SELECT status, clock_timestamp() FROM "+w.ledger.outbox+" WHERE id = $1", id).Scan(&status, &now)
		if err != nil {
			w.t.Fatalf("watch message %s: %v", id, err)
		}
		if status != "pending" {
			if last.IsZero() {
				w.t.Fatalf("message %s was %s before it was first seen pending", id, status)
			}
			return last
		}
		last = now
		select {
		case <-ctx.Done():
			w.t.Fatalf("message %s still pending: %v", id, ctx.Err())
		case <-tick.C:
		}
	}
}

// awaitHeld waits until the producers are done and everything but the messages of key after message after has
// settled, checks that those have stayed pending without an effect, and returns how many they are. It watches
// them for a while longer (many poll intervals of the relay) to show that they stay held.
func (w *world) awaitHeld(ctx context.Context, key, after string) int64 {
	w.t.Helper()
	held := func() (remaining, pending, heldPending, heldEffects int64) {
		var err error
		if remaining, err = w.ledger.Remaining(ctx, w.pool); err != nil {
			w.t.Fatal(err)
		}
		err = w.pool.QueryRow(ctx, "SELECT (SELECT count(*) FROM "+w.ledger.outbox+" WHERE status = 'pending'),"+
			" (SELECT count(*) FROM "+w.ledger.outbox+" WHERE status = 'pending' AND key = $1 AND id > $2),"+
			" (SELECT count(*) FROM "+w.ledger.effects+" WHERE key = $1 AND id > $2)", key, after).
			Scan(&pending, &heldPending, &heldEffects)
		if err != nil {
			w.t.Fatal(err)
		}
		return remaining, pending, heldPending, heldEffects
	}
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	for {
		remaining, pending, heldPending, heldEffects := held()
		if heldEffects != 0 {
			w.t.Fatalf("%d messages of %s behind the dead message took effect; DeadHoldsKey holds them", heldEffects, key)
		}
		if !w.producersRunning() && remaining == heldPending && pending == heldPending {
			break
		}
		select {
		case <-ctx.Done():
			w.t.Fatalf("the messages not held did not settle: %d without effect, %d pending, %d of them held", remaining, pending, heldPending)
		case <-tick.C:
		}
	}
	_, _, n, _ := held()
	wait(ctx, time.Second)
	if _, _, still, effects := held(); still != n || effects != 0 {
		w.t.Fatalf("of %d messages held behind the dead message, %d are still pending and %d took effect a second later", n, still, effects)
	}
	return n
}

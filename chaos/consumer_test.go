package chaos

import (
	"context"
	"fmt"
	"math/rand/v2"
	"sync/atomic"
	"testing"
	"time"

	"github.com/postbox-go/postbox"
)

// TestConsumerKilled: consumers are real processes that kill themselves with SIGKILL at a random message, two at a
// time: half of them in the handler, its writes done, before the inbox transaction commits (the database rolls
// the writes and the claim back), half after the commit and before the broker ack (the broker delivers the
// message again and the inbox recognises it). Each message's effect still happens exactly once, and each message a
// consumer died holding after its commit came back and was skipped by the inbox as a duplicate.
func TestConsumerKilled(t *testing.T) {
	events, minKills := size(2000, 20000), size(8, 20)
	ctx, cancel := context.WithTimeout(context.Background(), deadline())
	defer cancel()
	w := newWorld(t, "consumerkill", worldOptions{ackWait: 2 * time.Second})
	w.goRelay(w.relayConfig())
	w.produce(ctx, events, size(6*time.Second, 30*time.Second))

	var kills, spawned atomic.Int64
	var atCount [2]atomic.Int64
	w.killers(ctx, &kills, minKills, func() bool {
		n := spawned.Add(1)
		cfg := w.consumerConfig()
		cfg.KillAfter = 5 + rand.IntN(60)
		cfg.KillAt = []string{killBeforeCommit, killAfterCommit}[n%2]
		c, err := w.spawn(cfg, nil)
		if err != nil {
			t.Error(err)
			return false
		}
		switch w.awaitKill(ctx, c) {
		case settled:
			c.stop() // nothing is left for consumers: not a kill
			return false
		case idle:
			c.stop() // no more messages came its way: not a kill
			return true
		}
		if !c.killed {
			t.Errorf("a consumer process exited on its own before its kill point")
			return false
		}
		kills.Add(1)
		atCount[n%2].Add(1)
		return true
	})
	w.goConsumer(w.consumerConfig()) // the survivor
	w.settle(ctx)
	w.verdict(ctx, expect{events: events, dupBound: 0, bound: "relays are not harmed",
		fault: fmt.Sprintf("%d consumer processes killed with SIGKILL, %d between handler and commit, %d between commit and ack",
			kills.Load(), atCount[0].Load(), atCount[1].Load()),
		felt: func(*roleStats) string {
			// Each kill between commit and ack leaves a committed message unacknowledged, which the broker must
			// deliver again and the inbox must skip. A consumer stopped cleanly may reach its kill point while it
			// finishes, so there can be more such messages than counted kills, never fewer.
			absorbed, unacked, missing := w.redel.absorbedUnacked()
			fmt.Printf("%s: %d redeliveries absorbed by the inbox; consumers died holding %d committed messages unacked\n",
				t.Name(), absorbed, unacked)
			switch after := atCount[1].Load(); {
			case after == 0:
				return "no consumer was killed between commit and ack"
			case int64(unacked) < after:
				return fmt.Sprintf("%d consumers killed between commit and ack reported the message they held, want %d", unacked, after)
			case len(missing) > 0:
				return fmt.Sprintf("%d of the %d messages consumers died holding after their commit never came back as a duplicate the inbox skipped: %v",
					len(missing), unacked, missing)
			}
			return ""
		}})
	if kills.Load() < int64(minKills) {
		t.Errorf("%d kills, want at least %d", kills.Load(), minKills)
	}
}

// TestPoison: two poison messages among ordinary ones. The first goes to a subject no stream covers, so every
// publish fails (retryably): the relay parks it as dead after MaxAttempts with its last error. The second is
// refused by every handler: the consumer records it as failed after MaxFailures and acks it. Both are committed
// first, so the claim order puts them ahead of the rest, which flow past them.
func TestPoison(t *testing.T) {
	const maxAttempts, maxFailures = 5, 3
	events := size(2000, 10000)
	ctx, cancel := context.WithTimeout(context.Background(), deadline())
	defer cancel()
	w := newWorld(t, "poison", worldOptions{})
	relayPoison := postbox.Message{ID: postbox.NewID(), Topic: w.topic + ".nostream", Type: "chaos.event", Key: "k00"}
	handlerPoison := postbox.Message{ID: postbox.NewID(), Topic: w.topic, Type: poisonType, Key: "k00"}
	if err := w.commit(ctx, relayPoison, handlerPoison); err != nil {
		t.Fatal(err)
	}
	rc := w.relayConfig()
	rc.MaxAttempts = maxAttempts
	cc := w.consumerConfig()
	cc.MaxFailures = maxFailures
	w.goRelay(rc)
	w.goConsumer(cc)
	w.produce(ctx, events, size(3*time.Second, 10*time.Second))
	w.settle(ctx)
	dead, err := w.client.ListDead(ctx, postbox.DeadFilter{All: true})
	if err != nil {
		t.Fatal(err)
	}
	if len(dead) != 1 || dead[0].Attempts != maxAttempts || dead[0].LastError == "" {
		t.Fatalf("dead messages %+v; want the relay's poison with %d attempts and its last error", dead, maxAttempts)
	}
	var failures int
	if err := w.pool.QueryRow(ctx, "SELECT failures FROM "+w.ledger.inbox+" WHERE message_id = $1", handlerPoison.ID).Scan(&failures); err != nil {
		t.Fatal(err)
	}
	if failures != maxFailures {
		t.Fatalf("the handler's poison failed %d times, want %d", failures, maxFailures)
	}
	fmt.Printf("%s: dead after %d attempts: %q\n", t.Name(), dead[0].Attempts, dead[0].LastError)
	w.verdict(ctx, expect{events: events + 2, dupBound: 0, bound: "no fault", dead: []string{relayPoison.ID}, failed: []string{handlerPoison.ID},
		fault: fmt.Sprintf("a message no broker subject takes (MaxAttempts %d) and one no handler takes (MaxFailures %d)", maxAttempts, maxFailures),
		felt: func(s *roleStats) string {
			if s.relay.Dead != 1 || s.outcomes[postbox.Failed].Load() != 1 {
				return fmt.Sprintf("relays parked %d messages and consumers gave up on %d, want 1 each", s.relay.Dead, s.outcomes[postbox.Failed].Load())
			}
			return ""
		}})
}

// The ways awaitKill ends.
const (
	exited  = iota // the consumer exited
	settled        // the system settled while the consumer ran: nothing is left for it
	idle           // the consumer ran for 15s without reaching its kill point
)

// awaitKill waits until consumer c exits, or until it cannot reach its kill point because the system has settled
// or 15s have gone by.
func (w *world) awaitKill(ctx context.Context, c *child) int {
	giveUp := time.NewTimer(15 * time.Second)
	defer giveUp.Stop()
	tick := time.NewTicker(250 * time.Millisecond)
	defer tick.Stop()
	for {
		select {
		case <-c.done:
			return exited
		case <-giveUp.C:
			return idle
		case <-ctx.Done():
			return idle
		case <-tick.C:
			if _, done := w.progress(ctx); done {
				return settled
			}
		}
	}
}

package chaos

import (
	"context"
	"fmt"
	"math/rand/v2"
	"sync/atomic"
	"testing"
	"time"
)

// randDuration returns a duration drawn uniformly from [lo, hi).
func randDuration(lo, hi time.Duration) time.Duration {
	return lo + time.Duration(rand.Int64N(int64(hi-lo)))
}

// TestRelayKilled: relays are real processes (this test binary run again as a relay) killed with SIGKILL, two at a
// time, while producers commit events and a consumer processes them through the inbox. Half of the kills come at
// a random moment of the relay's life; the other half come as soon as the relay reports a batch acknowledged by
// the broker, the worst moment, between the broker's ack and the settle. Nothing committed is lost, no effect
// happens twice, and each kill duplicates at most the killed relay's in-flight batch.
func TestRelayKilled(t *testing.T) {
	events, minKills := size(5000, 50000), size(10, 20)
	over := size(6*time.Second, 40*time.Second)
	ctx, cancel := context.WithTimeout(context.Background(), deadline())
	defer cancel()
	w := newWorld(t, "relaykill", worldOptions{})
	w.goConsumer(w.consumerConfig())
	w.produce(ctx, events, over)

	var kills, spawned atomic.Int64
	w.killers(ctx, &kills, minKills, func() bool {
		acked := make(chan struct{}, 1)
		c, err := w.spawn(w.relayConfig(), func(string) {
			select {
			case acked <- struct{}{}:
			default:
			}
		})
		if err != nil {
			t.Error(err)
			return false
		}
		life := time.NewTimer(randDuration(100*time.Millisecond, time.Second))
		if spawned.Add(1)%2 == 0 {
			select { // at a random moment
			case <-life.C:
			case <-ctx.Done():
			}
		} else {
			select { // right after an ack, or at a random moment if none comes
			case <-acked:
			case <-life.C:
			case <-ctx.Done():
			}
		}
		life.Stop()
		if c.exited() {
			t.Errorf("a relay process exited on its own before it was killed")
			return false
		}
		c.kill()
		if c.killed {
			kills.Add(1)
		}
		return true
	})
	w.mustSpawn(w.relayConfig()) // the survivor
	w.settle(ctx)
	k := kills.Load()
	w.verdict(ctx, expect{events: events, dupBound: k * int64(w.role.BatchSize),
		bound: fmt.Sprintf("one batch of %d per kill", w.role.BatchSize),
		fault: fmt.Sprintf("%d relay processes killed with SIGKILL", k)})
	if k < int64(minKills) {
		t.Errorf("%d kills, want at least %d", k, minKills)
	}
}

// TestFourRelays: four relay processes share one outbox with no fault while producers commit as fast as they can.
// Row locks with SKIP LOCKED give each batch to one relay, so no message is published twice.
func TestFourRelays(t *testing.T) {
	events := size(10000, 50000)
	ctx, cancel := context.WithTimeout(context.Background(), deadline())
	defer cancel()
	w := newWorld(t, "fourrelays", worldOptions{})
	w.goConsumer(w.consumerConfig())
	counts := make([]atomic.Int64, 4)
	for i := range counts {
		if _, err := w.spawn(w.relayConfig(), func(string) { counts[i].Add(1) }); err != nil {
			t.Fatal(err)
		}
	}
	w.produce(ctx, events, 0)
	w.settle(ctx)
	w.verdict(ctx, expect{events: events, dupBound: 0, bound: "no fault: every batch belongs to one relay",
		fault: fmt.Sprintf("four relay processes, no fault (published %d, %d, %d, %d)",
			counts[0].Load(), counts[1].Load(), counts[2].Load(), counts[3].Load())})
}

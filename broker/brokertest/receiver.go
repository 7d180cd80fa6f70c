package brokertest

import (
	"context"
	"fmt"
	"sort"
	"sync"
	"testing"
	"time"

	"github.com/postbox-go/postbox"
	"github.com/postbox-go/postbox/broker"
)

// received is one call of the handler.
type received struct {
	msg     postbox.Message
	time    time.Time
	attempt int
}

// receiver runs Receive in the background and records every delivery.
type receiver struct {
	t       *testing.T
	timeout time.Duration
	cancel  context.CancelFunc
	done    chan error
	stopped bool

	mu      sync.Mutex
	got     []received
	changed chan struct{}
}

// receive starts sub.Receive with a handler that records each delivery and then calls handle (nil: ack). The
// receiver is stopped at the end of the test if the test did not stop it.
func (s *suite) receive(t *testing.T, sub broker.Subscriber, handle broker.DeliveryHandler) *receiver {
	t.Helper()
	if handle == nil {
		handle = func(ctx context.Context, d *broker.Delivery) {
			if err := d.Ack(ctx); err != nil && ctx.Err() == nil {
				t.Errorf("Ack: %v", err)
			}
		}
	}
	ctx, cancel := context.WithCancel(context.Background())
	r := &receiver{t: t, timeout: s.f.Timeout, cancel: cancel, done: make(chan error, 1), changed: make(chan struct{})}
	go func() {
		r.done <- sub.Receive(ctx, func(ctx context.Context, d *broker.Delivery) {
			r.mu.Lock()
			r.got = append(r.got, received{msg: d.Message, time: d.Time, attempt: d.Attempt})
			close(r.changed)
			r.changed = make(chan struct{})
			r.mu.Unlock()
			handle(ctx, d)
		})
	}()
	t.Cleanup(func() { r.stop() })
	return r
}

// stop cancels Receive and waits for it to return, failing the test if it returns an error or hangs.
func (r *receiver) stop() {
	r.t.Helper()
	if r.stopped {
		return
	}
	r.stopped = true
	r.cancel()
	select {
	case err := <-r.done:
		if err != nil {
			r.t.Errorf("Receive returned %v after its context was cancelled; want nil", err)
		}
	case <-time.After(r.timeout):
		r.t.Errorf("Receive did not return within %v of its context being cancelled", r.timeout)
	}
}

// snapshot returns the deliveries so far.
func (r *receiver) snapshot() []received {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]received(nil), r.got...)
}

// waitFor waits until done reports true for the deliveries so far, failing the test after the timeout with
// what describe says is missing.
func (r *receiver) waitFor(done func([]received) bool, describe func([]received) string) []received {
	r.t.Helper()
	deadline := time.NewTimer(r.timeout)
	defer deadline.Stop()
	for {
		r.mu.Lock()
		got, ch := append([]received(nil), r.got...), r.changed
		r.mu.Unlock()
		if done(got) {
			return got
		}
		select {
		case <-ch:
		case err := <-r.done:
			r.done <- err
			r.t.Fatalf("Receive returned %v before the test stopped it; %s", err, describe(got))
		case <-deadline.C:
			r.t.Fatalf("after %v: %s", r.timeout, describe(got))
		}
	}
}

// waitIDs waits until every record's ID was delivered at least once.
func (r *receiver) waitIDs(recs []postbox.Record) []received {
	r.t.Helper()
	missing := func(got []received) []string {
		seen := make(map[string]bool, len(got))
		for _, g := range got {
			seen[g.msg.ID] = true
		}
		var out []string
		for _, rec := range recs {
			if !seen[rec.ID] {
				out = append(out, rec.ID)
			}
		}
		return out
	}
	return r.waitFor(func(got []received) bool { return len(missing(got)) == 0 },
		func(got []received) string {
			m := missing(got)
			sort.Strings(m)
			if len(m) > 5 {
				m = append(m[:5], "…")
			}
			return fmt.Sprintf("%d of %d messages delivered; missing %v", len(recs)-len(missing(got)), len(recs), m)
		})
}

// waitCount waits until the message with id was delivered n times.
func (r *receiver) waitCount(id string, n int) []received {
	r.t.Helper()
	count := func(got []received) int {
		c := 0
		for _, g := range got {
			if g.msg.ID == id {
				c++
			}
		}
		return c
	}
	return r.waitFor(func(got []received) bool { return count(got) >= n },
		func(got []received) string {
			return fmt.Sprintf("message %s delivered %d times, want %d", id, count(got), n)
		})
}

package postbox

import (
	"context"
	"sync"
	"sync/atomic"
	"time"

	"github.com/postbox-go/postbox/driver"
	"github.com/postbox-go/postbox/internal/backoff"
)

// claim claims the next batch, in per-key order when the client is ordered.
func (r *Relay) claim(ctx context.Context, p driver.ClaimParams) (driver.Claim, error) {
	if r.client.ordered != nil {
		return r.client.ordered.ClaimOrdered(ctx, p, r.cfg.DeadHoldsKey)
	}
	return r.client.store.Claim(ctx, p)
}

// idle waits until a wake-up, or until a look finds something to claim, or ctx is done, and reports whether a
// wake-up ended it. An idle relay looks every PollInterval. Right after activity (warm) it looks sooner, then ever
// less often, up to PollInterval: a transaction that enqueued without a wake-up of its own (within a client's
// NotifyInterval of another) and committed after the last claim is found within milliseconds, not at the next
// poll. Where the store can peek, a look is one statement instead of a claim's transaction. In a RelayGroup the
// looks stretch further, up to idleCeiling.
func (r *Relay) idle(ctx context.Context, warm bool) bool {
	peeker := r.client.peeker
	delay := r.cfg.PollInterval
	if warm && peeker != nil {
		delay = min(4*r.cfg.RecheckDelay, r.cfg.PollInterval)
	}
	for {
		if r.wait(ctx, delay) {
			return true
		}
		if ctx.Err() != nil {
			return false
		}
		if delay >= r.cfg.PollInterval && !r.polls.take(delay) {
			continue // another idle worker polled a moment ago
		}
		delay = min(4*delay, r.idleCeiling())
		if peeker == nil {
			return false
		}
		found, err := peeker.Claimable(ctx, r.client.cfg.Clock.Now())
		if err != nil || found {
			return false // claim now; a database error shows up there and is counted and logged once
		}
	}
}

// listen keeps a listening connection open while ctx lasts and turns each notification into a wake-up. When the
// connection fails the relay goes on polling, and listens again at the pace of ErrorBackoffBase and
// ErrorBackoffMax; once listening again it wakes a worker, which claims at once, since notifications sent
// meanwhile are lost. A failure is logged once, and listening again once.
func (r *Relay) listen(ctx context.Context, l driver.Listener) {
	channel := r.client.cfg.names().Channel()
	retry := backoff.Backoff{Base: r.cfg.ErrorBackoffBase, Max: r.cfg.ErrorBackoffMax}
	failing := false
	ready := func() {
		retry.Reset()
		if failing {
			r.log.InfoContext(ctx, "listening for wake-ups again")
			failing = false
		}
		r.stats.listening.Store(true)
		r.Wake() // notifications sent while not listening are lost: look now
	}
	wake := func() {
		r.stats.wakeups.Add(1)
		r.Wake()
	}
	for {
		err := l.Listen(ctx, channel, ready, wake)
		r.stats.listening.Store(false)
		if ctx.Err() != nil {
			return
		}
		if !failing {
			r.stats.errors.Add(1)
			r.log.WarnContext(ctx, "listening for wake-ups failed; polling until it is back", "err", oneLine(err))
			failing = true
		}
		t := time.NewTimer(retryDelay(&retry, err))
		select {
		case <-ctx.Done():
			t.Stop()
			return
		case <-t.C:
		}
	}
}

// pollGate lets one idle worker of a relay poll per PollInterval, so that an idle relay's cost does not grow with
// its workers.
type pollGate struct {
	once  sync.Once
	epoch time.Time
	last  atomic.Int64 // nanoseconds since epoch of the last poll
}

// take reports whether the caller may poll now, and if so records the poll. Polls closer than nine tenths of the
// interval are refused, which leaves room for the workers' timers to drift.
func (g *pollGate) take(interval time.Duration) bool {
	g.once.Do(func() {
		g.epoch = time.Now()
		g.last.Store(-int64(interval))
	})
	now := int64(time.Since(g.epoch))
	last := g.last.Load()
	if now-last < int64(interval)*9/10 {
		return false
	}
	return g.last.CompareAndSwap(last, now)
}

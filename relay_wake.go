package postbox

import (
	"context"
	"slices"
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
// wake-up ended it. Where the store can peek, a look is one statement instead of a claim's transaction, and an
// idle worker looks again after the time since the relay's last activity divided by QuietDivisor (see
// lookDelay): soon after messages flowed, or after a client of this process enqueued (hint), ever less often
// during a quiet spell, and once per PollInterval when idle (in a RelayGroup, once per idleCeiling). A message
// committed without a wake-up is so found within a fraction of the quiet time before it. Where the store cannot
// peek, a look is a claim, once per PollInterval.
func (r *Relay) idle(ctx context.Context) bool {
	peeker := r.client.peeker
	for {
		delay := r.lookDelay()
		deadline := time.Now().Add(delay)
	wait:
		for {
			t := time.NewTimer(time.Until(deadline))
			select {
			case <-ctx.Done():
				t.Stop()
				return false
			case <-r.wake:
				t.Stop()
				return true
			case <-r.hint:
				// A client of this process enqueued: its transaction commits within moments, so look soon. A
				// stream of hints only brings the look forward, never puts it off.
				t.Stop()
				if d := r.lookDelay(); time.Now().Add(d).Before(deadline) {
					delay, deadline = d, time.Now().Add(d)
				}
			case <-t.C:
				break wait
			}
		}
		if !r.polls.take(delay) {
			continue // another idle worker looked a moment ago
		}
		if peeker == nil {
			return false
		}
		found, err := peeker.Claimable(ctx, r.client.cfg.Clock.Now())
		if err != nil || found {
			return false // claim now; a database error shows up there and is counted and logged once
		}
	}
}

// lookDelay is how long an idle worker waits before it looks for messages: the time since the relay's last
// activity (see active) divided by QuietDivisor, at least 4·RecheckDelay and at most PollInterval. It is
// PollInterval while another worker is busy, since that one claims again within RecheckDelay, and where the store
// cannot peek, since every look is then a claim.
func (r *Relay) lookDelay() time.Duration {
	ceiling := r.idleCeiling()
	if r.client.peeker == nil || r.busy.Load() > 0 {
		return ceiling
	}
	quiet := time.Duration(int64(time.Since(r.epoch)) - r.lastActive.Load())
	return min(max(quiet/time.Duration(r.cfg.QuietDivisor), 4*r.cfg.RecheckDelay), ceiling)
}

// active records that messages flowed, or that a wake-up or hint came: idle workers look often for a while.
func (r *Relay) active() { r.lastActive.Store(int64(time.Since(r.epoch))) }

// expect tells an idle relay that a client of this process enqueued in a transaction not yet committed: it looks
// again soon (see idle). It never blocks.
func (r *Relay) expect() {
	r.active()
	select {
	case r.hint <- struct{}{}:
	default:
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

// recheck is a worker's next look while messages flow: RecheckDelay after its claim returned messages but not a
// full batch. Publishing and settling that batch may take longer than RecheckDelay (a commit waiting for the disk),
// so the look is handed to the relay as a wake-up when it is due: an idle worker takes it, and the worker that
// armed it looks itself only if it is done in time. Messages committed meanwhile so wait for RecheckDelay and a
// claim, not for the batch before them to settle.
type recheck struct {
	at    time.Time
	timer *time.Timer
}

// arm schedules r's wake-up RecheckDelay from now.
func (l *recheck) arm(r *Relay) {
	l.stop()
	l.at = time.Now().Add(r.cfg.RecheckDelay)
	l.timer = time.AfterFunc(r.cfg.RecheckDelay, r.Wake)
}

// take returns how long the worker should wait before looking itself, and false when the look's wake-up has
// gone to the relay already, so that the worker should wait idle instead. With no look armed, it is delay.
func (l *recheck) take(delay time.Duration) (time.Duration, bool) {
	if l.timer == nil {
		return delay, true
	}
	pending := l.timer.Stop()
	l.timer = nil
	if !pending {
		return 0, false
	}
	return max(time.Until(l.at), 0), true
}

// stop cancels the wake-up, if any.
func (l *recheck) stop() {
	if l.timer != nil {
		l.timer.Stop()
		l.timer = nil
	}
}

// pollGate lets one idle worker of a relay look per interval, so that an idle relay's cost does not grow with its
// workers.
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

// localRelays are the running relays made from one client. The client's enqueues reach them without a round trip
// through the database: each enqueue makes them look soon (expect), and InTx wakes them once its transaction
// committed. This is the wake-up of databases without notifications (MySQL, SQLite), and comes before the
// notification on PostgreSQL.
type localRelays struct {
	running  atomic.Int32 // len(relays), read without the lock on every enqueue
	enqueues atomic.Int64 // enqueue calls so far, which InTx compares before and after its transaction
	mu       sync.Mutex
	relays   []*Relay
}

func (l *localRelays) add(r *Relay) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.relays = append(l.relays, r)
	l.running.Store(int32(len(l.relays)))
}

func (l *localRelays) remove(r *Relay) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if i := slices.Index(l.relays, r); i >= 0 {
		l.relays = slices.Delete(l.relays, i, i+1)
	}
	l.running.Store(int32(len(l.relays)))
}

// each calls fn for every running relay.
func (l *localRelays) each(fn func(*Relay)) {
	if l.running.Load() == 0 {
		return
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, r := range l.relays {
		fn(r)
	}
}

// enqueued tells the running relays that a transaction enqueued and will commit soon.
func (l *localRelays) enqueued() {
	l.enqueues.Add(1)
	l.each((*Relay).expect)
}

// committed wakes the running relays when an enqueue happened since before, the count of enqueues when a
// transaction began: the transaction that just committed may hold messages. Another transaction's enqueue
// meanwhile makes the wake-up needless, never harmful.
func (l *localRelays) committed(before int64) {
	if l.enqueues.Load() != before {
		l.each((*Relay).Wake)
	}
}

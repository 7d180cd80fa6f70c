package postbox

import (
	"context"
	"sync/atomic"
	"time"

	"github.com/postbox-go/postbox/driver"
)

// notifier inserts records, adding a wake-up for listening relays to at most one enqueuing transaction per
// interval.
//
// PostgreSQL serialises the commits of transactions that notify (they take one lock for the whole commit, fsync
// included), so a NOTIFY in every transaction costs concurrent producers most of their commit rate. One per
// interval per client costs almost nothing, and the relay claims again shortly after each wake-up to pick up the
// transactions that enqueued within the interval without one.
type notifier[TTx any] struct {
	store    driver.Store[TTx]
	n        driver.Notifier[TTx] // nil: the store cannot notify, or notifications are off
	interval time.Duration
	epoch    time.Time    // monotonic reference for last
	last     atomic.Int64 // nanoseconds since epoch of the last wake-up sent, or -interval
}

func newNotifier[TTx any](store driver.Store[TTx], cfg Config) *notifier[TTx] {
	nt := &notifier[TTx]{store: store, interval: cfg.NotifyInterval, epoch: time.Now()}
	if n, ok := store.(driver.Notifier[TTx]); ok && !cfg.DisableNotify {
		nt.n = n
	}
	nt.last.Store(-int64(cfg.NotifyInterval))
	return nt
}

// insert writes recs inside tx, with a wake-up unless another transaction of this client sent one within the
// interval.
func (nt *notifier[TTx]) insert(ctx context.Context, tx TTx, recs []driver.Record) error {
	if nt.n == nil || !nt.take(time.Since(nt.epoch)) {
		return nt.store.Insert(ctx, tx, recs)
	}
	return nt.n.InsertNotify(ctx, tx, recs)
}

// take reports whether a wake-up may be sent at now (time since epoch), and if so records it as sent.
func (nt *notifier[TTx]) take(now time.Duration) bool {
	last := nt.last.Load()
	if int64(now)-last < int64(nt.interval) {
		return false
	}
	return nt.last.CompareAndSwap(last, int64(now))
}

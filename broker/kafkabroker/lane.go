package kafkabroker

import (
	"context"
	"sync"
	"time"

	"github.com/postbox-go/postbox/broker"
	"github.com/twmb/franz-go/pkg/kgo"
)

// lane handles the records of one partition, one at a time, in offset order.
type lane struct {
	p      tp
	ctx    context.Context // done when Receive stops or the partition is revoked or lost
	cancel context.CancelFunc
	wake   chan struct{}
	done   chan struct{}

	// Guarded by run.mu.
	queue  []*kgo.Record
	paused bool
}

func newLane(ctx context.Context, p tp) *lane {
	ctx, cancel := context.WithCancel(ctx)
	return &lane{p: p, ctx: ctx, cancel: cancel, wake: make(chan struct{}, 1), done: make(chan struct{})}
}

// signal wakes the lane's goroutine if it waits for records.
func (l *lane) signal() {
	select {
	case l.wake <- struct{}{}:
	default:
	}
}

// runLane handles the lane's records until the lane is stopped.
func (r *run) runLane(l *lane) {
	defer r.wg.Done()
	defer close(l.done)
	defer l.cancel()
	for {
		rec := r.next(l)
		if rec == nil || !r.deliver(l, rec) {
			return
		}
	}
}

// next returns the lane's next record, waiting for one, or nil once the lane is stopped. It resumes fetching
// from the partition once the lane has drained to half of Prefetch.
func (r *run) next(l *lane) *kgo.Record {
	for {
		r.mu.Lock()
		if l.ctx.Err() != nil {
			r.mu.Unlock()
			return nil
		}
		if len(l.queue) > 0 {
			rec := l.queue[0]
			l.queue[0] = nil
			l.queue = l.queue[1:]
			resume := l.paused && len(l.queue) <= r.s.cfg.Prefetch/2
			if resume {
				l.paused = false
			}
			r.mu.Unlock()
			if resume {
				r.cl.ResumeFetchPartitions(map[string][]int32{l.p.topic: {l.p.partition}})
			}
			return rec
		}
		r.mu.Unlock()
		select {
		case <-l.wake:
		case <-l.ctx.Done():
			return nil
		}
	}
}

// deliver hands rec to the handler until it is acked or rejected, and then marks its offset settled. A nacked
// record is handed over again after the nack delay, with Attempt one higher, and holds back the rest of its
// partition meanwhile. deliver returns false, leaving rec unsettled, when the lane stops first.
func (r *run) deliver(l *lane, rec *kgo.Record) bool {
	settled := func() { r.mark(l.p, kgo.EpochOffset{Epoch: rec.LeaderEpoch, Offset: rec.Offset + 1}) }
	for attempt := 1; ; attempt++ {
		e, err := r.s.decode(rec)
		if err != nil {
			r.s.log.ErrorContext(l.ctx, "kafkabroker: skipping a record that is not a Postbox CloudEvent",
				"topic", rec.Topic, "partition", rec.Partition, "offset", rec.Offset, "err", err)
			settled()
			return true
		}
		select {
		case r.sem <- struct{}{}:
		case <-l.ctx.Done():
			return false
		}
		a := &acker{settled: make(chan struct{})}
		broker.Dispatch(l.ctx, broker.NewDelivery(e, attempt, a), r.handle)
		<-r.sem
		<-a.settled // Dispatch returns only once the delivery is claimed; the claimer is recording how
		if !a.nacked {
			settled()
			return true
		}
		if l.ctx.Err() != nil {
			return false
		}
		if a.delay > 0 {
			t := time.NewTimer(a.delay)
			select {
			case <-t.C:
			case <-l.ctx.Done():
				t.Stop()
				return false
			}
		}
	}
}

// acker records how the handler settled a delivery; the lane acts on it once the handler returned. An ack
// therefore only marks the offset, which is committed within CommitInterval.
type acker struct {
	once    sync.Once
	settled chan struct{}
	nacked  bool
	delay   time.Duration
}

func (a *acker) settle(nacked bool, delay time.Duration) {
	a.once.Do(func() {
		a.nacked, a.delay = nacked, delay
		close(a.settled)
	})
}

// Ack marks the message done: its offset is committed with the next commit.
func (a *acker) Ack(context.Context) error {
	a.settle(false, 0)
	return nil
}

// Nack has the subscriber hand the message to the handler again after delay. The partition waits for it.
func (a *acker) Nack(_ context.Context, delay time.Duration) error {
	a.settle(true, delay)
	return nil
}

// Reject skips the message: its offset is committed like an ack's, so the group never receives it again.
func (a *acker) Reject(context.Context) error {
	a.settle(false, 0)
	return nil
}

var _ broker.Rejecter = (*acker)(nil)

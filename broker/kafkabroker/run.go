package kafkabroker

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/postbox-go/postbox/broker"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// tp names one partition of one topic.
type tp struct {
	topic     string
	partition int32
}

// run is the state of one Receive call: the client, a lane per partition with records, and the offsets
// settled but not yet committed.
//
// Records reach lanes only between a poll and AllowRebalance (kgo.BlockRebalanceOnPoll), so the partition
// callbacks never run while records are being handed out, and a lane only ever holds records of a partition
// this member owns.
type run struct {
	s      *Subscriber
	ctx    context.Context
	handle broker.DeliveryHandler
	cl     *kgo.Client
	sem    chan struct{} // bounds concurrent handler calls
	wg     sync.WaitGroup

	commitMu sync.Mutex // orders commits, so a late one never rewinds an offset

	mu    sync.Mutex
	owned map[tp]bool
	lanes map[tp]*lane
	marks map[tp]kgo.EpochOffset // offsets settled and not yet committed
}

func newRun(ctx context.Context, s *Subscriber, handle broker.DeliveryHandler) *run {
	return &run{s: s, ctx: ctx, handle: handle, sem: make(chan struct{}, s.cfg.Concurrency),
		owned: map[tp]bool{}, lanes: map[tp]*lane{}, marks: map[tp]kgo.EpochOffset{}}
}

// run polls until ctx is cancelled or the consumer cannot go on, then stops every lane and commits what they
// settled.
func (r *run) run() error {
	stopCommitter := make(chan struct{})
	committerDone := make(chan struct{})
	go r.committer(stopCommitter, committerDone)

	var err error
	for r.ctx.Err() == nil && err == nil {
		fetches := r.cl.PollRecords(r.ctx, r.s.cfg.Prefetch)
		err = r.dispatch(fetches)
		r.cl.AllowRebalance()
	}

	r.mu.Lock()
	lanes := make([]*lane, 0, len(r.lanes))
	for _, l := range r.lanes {
		lanes = append(lanes, l)
	}
	r.mu.Unlock()
	for _, l := range lanes {
		l.cancel()
	}
	r.wg.Wait()
	close(stopCommitter)
	<-committerDone
	r.commitNow(nil)
	return err
}

// dispatch hands polled records to their partitions' lanes and returns an error the consumer cannot go on
// after.
func (r *run) dispatch(fetches kgo.Fetches) error {
	var stop error
	fetches.EachError(func(topic string, partition int32, err error) {
		switch {
		case r.ctx.Err() != nil && (errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded)):
		case fatal(err):
			if stop == nil {
				stop = fmt.Errorf("kafkabroker: consume %v of group %s: %w", r.s.cfg.Topics, r.s.cfg.Group, err)
			}
		default:
			r.s.log.WarnContext(r.ctx, "kafkabroker: fetch failed; the client retries", "topic", topic,
				"partition", partition, "err", err)
		}
	})
	fetches.EachPartition(func(p kgo.FetchTopicPartition) {
		if len(p.Records) > 0 {
			r.enqueue(tp{p.Topic, p.Partition}, p.Records)
		}
	})
	return stop
}

// enqueue appends records to their partition's lane, starting the lane if needed, and pauses fetching from
// the partition while its lane holds Prefetch records or more.
func (r *run) enqueue(p tp, recs []*kgo.Record) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if !r.owned[p] {
		return // cannot happen with BlockRebalanceOnPoll; the next owner fetches them from the committed offset
	}
	l := r.lanes[p]
	if l == nil {
		l = newLane(r.ctx, p)
		r.lanes[p] = l
		r.wg.Add(1)
		go r.runLane(l)
	}
	l.queue = append(l.queue, recs...)
	if !l.paused && len(l.queue) >= r.s.cfg.Prefetch {
		l.paused = true
		r.cl.PauseFetchPartitions(map[string][]int32{p.topic: {p.partition}})
	}
	l.signal()
}

// mark records that every record of the partition before next is settled.
func (r *run) mark(p tp, next kgo.EpochOffset) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.marks[p] = next
}

// committer commits settled offsets every CommitInterval until stop is closed.
func (r *run) committer(stop <-chan struct{}, done chan<- struct{}) {
	defer close(done)
	t := time.NewTicker(r.s.cfg.CommitInterval)
	defer t.Stop()
	for {
		select {
		case <-t.C:
			r.commitNow(nil)
		case <-stop:
			return
		}
	}
}

// commitNow commits the settled offsets of the partitions in only, or of all partitions when only is nil,
// logging a failure: the offsets stay marked and the next commit tries again.
func (r *run) commitNow(only map[tp]bool) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(r.ctx), broker.DefaultSettleTimeout)
	defer cancel()
	if err := r.commit(ctx, only); err != nil {
		r.s.log.WarnContext(r.ctx, "kafkabroker: offset commit failed; the messages after the last committed offset will be delivered again",
			"group", r.s.cfg.Group, "err", err)
	}
}

func (r *run) commit(ctx context.Context, only map[tp]bool) error {
	r.commitMu.Lock()
	defer r.commitMu.Unlock()
	r.mu.Lock()
	snap := make(map[tp]kgo.EpochOffset, len(r.marks))
	offsets := make(map[string]map[int32]kgo.EpochOffset)
	for p, eo := range r.marks {
		if only != nil && !only[p] {
			continue
		}
		snap[p] = eo
		if offsets[p.topic] == nil {
			offsets[p.topic] = map[int32]kgo.EpochOffset{}
		}
		offsets[p.topic][p.partition] = eo
	}
	r.mu.Unlock()
	if len(snap) == 0 {
		return nil
	}
	var failed error
	r.cl.CommitOffsetsSync(ctx, offsets, func(_ *kgo.Client, _ *kmsg.OffsetCommitRequest, resp *kmsg.OffsetCommitResponse, err error) {
		if err != nil {
			failed = err
			return
		}
		for _, t := range resp.Topics {
			for _, p := range t.Partitions {
				if err := kerr.ErrorForCode(p.ErrorCode); err != nil {
					failed = fmt.Errorf("partition %d of %s: %w", p.Partition, t.Topic, err)
					return
				}
			}
		}
	})
	if failed != nil {
		return failed
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	for p, eo := range snap {
		if r.marks[p] == eo {
			delete(r.marks, p)
		}
	}
	return nil
}

// assigned is the kgo.OnPartitionsAssigned callback.
func (r *run) assigned(_ context.Context, _ *kgo.Client, added map[string][]int32) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for t, ps := range added {
		for _, p := range ps {
			r.owned[tp{t, p}] = true
		}
	}
}

// revoked is the kgo.OnPartitionsRevoked callback: the partitions go to other members, so their handlers
// are stopped and what they settled is committed before the rebalance goes on.
func (r *run) revoked(_ context.Context, _ *kgo.Client, revoked map[string][]int32) {
	gone := r.release(revoked)
	r.commitNow(gone)
	r.forget(gone)
}

// lost is the kgo.OnPartitionsLost callback: the partitions may already belong to other members, so nothing
// is committed for them; their next owners start from the last committed offsets.
func (r *run) lost(_ context.Context, _ *kgo.Client, lost map[string][]int32) {
	r.forget(r.release(lost))
}

// release stops the lanes of the partitions, cancelling their running handlers and dropping the records they
// had not started, and waits for them.
func (r *run) release(parts map[string][]int32) map[tp]bool {
	gone := map[tp]bool{}
	var lanes []*lane
	var resume map[string][]int32
	r.mu.Lock()
	for t, ps := range parts {
		for _, p := range ps {
			k := tp{t, p}
			gone[k] = true
			delete(r.owned, k)
			if l := r.lanes[k]; l != nil {
				lanes = append(lanes, l)
				delete(r.lanes, k)
				if l.paused {
					if resume == nil {
						resume = map[string][]int32{}
					}
					resume[t] = append(resume[t], p) // paused partitions would stay paused if assigned back
				}
			}
		}
	}
	r.mu.Unlock()
	for _, l := range lanes {
		l.cancel()
	}
	for _, l := range lanes {
		<-l.done
	}
	if resume != nil {
		r.cl.ResumeFetchPartitions(resume)
	}
	return gone
}

// forget drops the settled offsets of partitions this member no longer owns.
func (r *run) forget(parts map[tp]bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for p := range parts {
		delete(r.marks, p)
	}
}

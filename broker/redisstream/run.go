package redisstream

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/postbox-go/postbox/broker"
	"github.com/postbox-go/postbox/broker/internal/adapterkit"
	"github.com/postbox-go/postbox/internal/backoff"
	"github.com/redis/go-redis/v9"
)

// Backoff after a transient Redis error in the read and claim loops.
const (
	minRetryWait = 100 * time.Millisecond
	maxRetryWait = 5 * time.Second
)

// run is one call of Receive: the read loop, the claim loop and the handler lanes.
type run struct {
	s      *Subscriber
	handle broker.DeliveryHandler
	lanes  *broker.Lanes[*broker.Delivery]
	wake   chan struct{} // a Nack asks the claim loop to look now

	mu     sync.Mutex
	err    error // the first fatal error
	cancel context.CancelFunc
}

func newRun(s *Subscriber, handle broker.DeliveryHandler) *run {
	return &run{s: s, handle: handle, wake: make(chan struct{}, 1)}
}

// run starts the lanes and both loops, and returns once all of them stopped.
func (r *run) run(ctx context.Context) error {
	ctx, r.cancel = context.WithCancel(ctx)
	defer r.cancel()
	r.lanes = broker.NewLanes(r.s.cfg.Concurrency, 0, func(d *broker.Delivery) { broker.Dispatch(ctx, d, r.handle) })
	var loops sync.WaitGroup
	loops.Go(func() { r.readLoop(ctx) })
	loops.Go(func() { r.claimLoop(ctx) })
	loops.Wait()
	r.lanes.Close()
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.err
}

// fail stops the run with err, keeping the first error.
func (r *run) fail(err error) {
	r.mu.Lock()
	if r.err == nil {
		r.err = err
	}
	r.mu.Unlock()
	r.cancel()
}

// poke asks the claim loop to look for claimable entries now.
func (r *run) poke() {
	select {
	case r.wake <- struct{}{}:
	default:
	}
}

// readLoop reads new entries with XREADGROUP until ctx is done.
func (r *run) readLoop(ctx context.Context) {
	s := r.s
	args := &redis.XReadGroupArgs{Group: s.cfg.Group, Consumer: s.cfg.Consumer, Count: s.cfg.Count, Block: s.cfg.Block,
		Streams: make([]string, 0, 2*len(s.streams))}
	args.Streams = append(args.Streams, s.streams...)
	for range s.streams {
		args.Streams = append(args.Streams, ">")
	}
	wait := backoff.Backoff{Base: minRetryWait, Max: maxRetryWait}
	for ctx.Err() == nil {
		res, err := s.rdb.XReadGroup(ctx, args).Result()
		switch {
		case errors.Is(err, redis.Nil): // Block passed with nothing new
			continue
		case err != nil:
			if !r.retry(ctx, "XREADGROUP", err, &wait) {
				return
			}
			continue
		}
		wait.Reset()
		for _, xs := range res {
			r.deliver(ctx, xs.Stream, xs.Messages, nil)
		}
	}
}

// claimLoop claims entries idle for ClaimIdle with XAUTOCLAIM, at start, every ClaimInterval, at once after a
// Nack without delay, and again at once while a scan has more to go.
func (r *run) claimLoop(ctx context.Context) {
	s := r.s
	cursors := make(map[string]string, len(s.streams))
	t := time.NewTimer(0)
	defer t.Stop()
	wait := backoff.Backoff{Base: minRetryWait, Max: maxRetryWait}
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		case <-r.wake:
		}
		more := false
		for _, stream := range s.streams {
			m, err := r.claim(ctx, stream, cursors)
			if err != nil {
				if !r.retry(ctx, "XAUTOCLAIM", err, &wait) {
					return
				}
				continue
			}
			wait.Reset()
			more = more || m
		}
		if more {
			t.Reset(0)
		} else {
			t.Reset(s.cfg.ClaimInterval)
		}
	}
}

// claim runs one XAUTOCLAIM on stream from its cursor and delivers what it claimed. It reports whether the scan
// of the pending list has more to go.
func (r *run) claim(ctx context.Context, stream string, cursors map[string]string) (bool, error) {
	s := r.s
	start := cursors[stream]
	if start == "" {
		start = "0-0"
	}
	msgs, next, deleted, err := s.rdb.XAutoClaimWithDeleted(ctx, &redis.XAutoClaimArgs{Stream: stream, Group: s.cfg.Group,
		Consumer: s.cfg.Consumer, MinIdle: s.cfg.ClaimIdle, Start: start, Count: s.cfg.Count}).Result()
	if err != nil {
		return false, err
	}
	cursors[stream] = next
	if len(deleted) > 0 {
		s.log.WarnContext(ctx, "redisstream: pending entries were deleted from the stream before they were acknowledged; "+
			"they are lost to this group (is MaxLen or MaxAge too small for the consumers' backlog?)",
			"stream", stream, "group", s.cfg.Group, "ids", deleted)
	}
	if len(msgs) > 0 {
		r.deliver(ctx, stream, msgs, r.attempts(ctx, stream, msgs))
	}
	return next != "0-0", nil
}

// attempts returns the delivery counts of claimed entries, from one XPENDING over their range. It returns nil
// when Redis does not answer, and the deliveries then report attempt 0 (unknown).
func (r *run) attempts(ctx context.Context, stream string, msgs []redis.XMessage) map[string]int {
	s := r.s
	pend, err := s.rdb.XPendingExt(ctx, &redis.XPendingExtArgs{Stream: stream, Group: s.cfg.Group, Consumer: s.cfg.Consumer,
		Start: msgs[0].ID, End: msgs[len(msgs)-1].ID, Count: int64(len(msgs))}).Result()
	if err != nil {
		return nil
	}
	out := make(map[string]int, len(pend))
	for _, p := range pend {
		out[p.ID] = int(p.RetryCount)
	}
	return out
}

// retry handles a loop's Redis error: it stops the run on a fatal one, and otherwise logs it and waits before
// the next try. It reports whether the loop should go on.
func (r *run) retry(ctx context.Context, op string, err error, wait *backoff.Backoff) bool {
	if ctx.Err() != nil {
		return false
	}
	s := r.s
	if fatal(err) {
		hint := ""
		if redis.HasErrorPrefix(err, "NOGROUP") {
			hint = fmt.Sprintf(" (create group %s on every stream with EnsureGroup)", s.cfg.Group)
		}
		r.fail(fmt.Errorf("redisstream: %s on %s as consumer %s of group %s%s: %w", op, strings.Join(s.streams, ", "),
			s.cfg.Consumer, s.cfg.Group, hint, err))
		return false
	}
	d := wait.Next()
	s.log.WarnContext(ctx, "redisstream: Redis error; retrying", "op", op, "group", s.cfg.Group, "retry_in", d, "err", err)
	return adapterkit.Sleep(ctx, d)
}

// deliver hands msgs to the lanes in order. Entries that are not Postbox messages are acknowledged and dropped.
// When ctx ends first, the entries not handed out are released for other consumers. attempts gives delivery
// counts by entry ID; nil means first deliveries.
func (r *run) deliver(ctx context.Context, stream string, msgs []redis.XMessage, attempts map[string]int) {
	s := r.s
	topic := strings.TrimPrefix(stream, s.cfg.StreamPrefix)
	for i, m := range msgs {
		e, err := decode(s.ce, m.Values)
		if err != nil {
			r.drop(ctx, stream, m.ID, err)
			continue
		}
		e.Message.Topic = topic
		attempt := 1
		if attempts != nil {
			attempt = attempts[m.ID]
		}
		d := broker.NewDelivery(e, attempt, &acker{r: r, stream: stream, id: m.ID})
		select {
		case r.lanes.For(e.Message.Key) <- d:
		case <-ctx.Done():
			ids := make([]string, 0, len(msgs)-i)
			for _, m := range msgs[i:] {
				ids = append(ids, m.ID)
			}
			sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), broker.DefaultSettleTimeout)
			_ = r.release(sctx, stream, ids, 0) // on failure they are claimed after ClaimIdle
			cancel()
			return
		}
	}
}

// drop acknowledges an entry that cannot be delivered: not a Postbox message, or deleted while pending.
func (r *run) drop(ctx context.Context, stream, id string, why error) {
	s := r.s
	if errors.Is(why, errTrimmed) {
		s.log.WarnContext(ctx, "redisstream: a pending entry was deleted from the stream before it was acknowledged; it is lost to this group",
			"stream", stream, "group", s.cfg.Group, "id", id)
	} else {
		s.log.ErrorContext(ctx, "redisstream: acknowledging and dropping an entry that is not a Postbox CloudEvent",
			"stream", stream, "group", s.cfg.Group, "id", id, "err", why)
	}
	sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), broker.DefaultSettleTimeout)
	defer cancel()
	_ = s.rdb.XAck(sctx, stream, s.cfg.Group, id).Err() // on failure it comes back and is dropped again
}

// release sets the idle time of pending entries so that XAUTOCLAIM claims them after delay: XCLAIM … IDLE
// JUSTID, which keeps them with this consumer and does not count a delivery.
func (r *run) release(ctx context.Context, stream string, ids []string, delay time.Duration) error {
	s := r.s
	idle := max(s.cfg.ClaimIdle-delay, 0)
	args := make([]any, 0, 9+len(ids))
	args = append(args, "XCLAIM", stream, s.cfg.Group, s.cfg.Consumer, 0)
	for _, id := range ids {
		args = append(args, id)
	}
	args = append(args, "IDLE", strconv.FormatInt(idle.Milliseconds(), 10), "JUSTID")
	return s.rdb.Do(ctx, args...).Err()
}

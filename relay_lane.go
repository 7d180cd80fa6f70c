package postbox

import (
	"context"
	"errors"
	"strings"
	"sync"
	"time"
)

// A relay's ordinary claims skip the topics of destinations that are down or slow (Deliverer.Avoid), so that
// those destinations hold back only their own messages. The lane is the one claimer that takes them: for a down
// destination, one claim when its probe is due, whose messages the delivery step holds but for the probe; for a
// slow one, claim after claim, so that it holds one connection and one batch at a time instead of every worker.
// The lane also watches for a stall: ready messages and nothing published for StallAfter.

// laneTick is the lane's pause after a claim that found none of the slow or down destinations' messages due, and
// stallTick how often it looks for a stall while no destination is down or slow.
const (
	laneTick  = 100 * time.Millisecond
	stallTick = time.Second
)

// probeClaim is the size of the lane's claim that probes down destinations.
const probeClaim = 16

func (r *Relay) lane(ctx context.Context) {
	clock := r.client.cfg.Clock
	retry := r.cfg.Retry().errorBackoff() // after a failed claim or settle, which the workers report
	r.lastPublished.CompareAndSwap(0, clock.Now().UnixNano())
	for ctx.Err() == nil {
		now := clock.Now()
		r.watchStall(ctx, now)
		due, slow, next := r.deliver.Due(now)
		if !due {
			// Nothing to claim until a probe is due or a destination changes state; the stall watch looks once a
			// second meanwhile.
			d := stallTick
			if !next.IsZero() {
				d = min(d, max(next.Sub(now), 0))
			}
			t := time.NewTimer(d)
			select {
			case <-ctx.Done():
			case <-r.deliver.Changed():
			case <-t.C:
			}
			t.Stop()
			continue
		}
		// A probe needs one message of each down destination, which are the oldest pending since they wait:
		// a small claim, so that each probe does not hold and settle again a whole batch of waiting messages.
		limit := min(r.cfg.BatchSize, probeClaim)
		if slow {
			limit = r.cfg.BatchSize
		}
		published := r.stats.published.Load()
		n, err := r.runOnce(ctx, limit, nil, nil, true)
		switch {
		case ctx.Err() != nil:
			return
		case isBrokerDown(err):
			var down *brokerDownError
			if errors.As(err, &down) {
				r.down(ctx, "broker", down.err) // logged once for the outage, if a worker did not already
			}
		case err != nil:
			r.log.DebugContext(ctx, "lane claim failed", "err", oneLine(err))
			r.sleep(ctx, retry.Next())
		case n == 0:
			retry.Reset()
			r.sleep(ctx, laneTick) // nothing of the slow or down destinations is due yet
		default:
			retry.Reset()
			if r.stats.published.Load() > published {
				// A probe went through: the relay works again if every destination was down, and the backlog
				// the workers skipped is theirs to take now.
				r.resumed(ctx, n, true)
				r.Wake()
			}
		}
	}
}

// sleep waits d or until ctx is done.
func (r *Relay) sleep(ctx context.Context, d time.Duration) {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
	case <-t.C:
	}
}

// stallWatch is a relay's record of whether it is stalled.
type stallWatch struct {
	mu      sync.Mutex
	since   time.Time // when the relay last published, while stalled; zero otherwise
	next    time.Time // the next check
	waiting []string  // the destinations and topics that waited when the stall was seen
}

// watchStall checks, at most once per second, whether the relay has ready messages and has published none for
// StallAfter, and logs one line when it becomes stalled and one when it publishes again.
func (r *Relay) watchStall(ctx context.Context, now time.Time) {
	s := &r.stall
	s.mu.Lock()
	defer s.mu.Unlock()
	if now.Before(s.next) {
		return
	}
	s.next = now.Add(time.Second)
	last := time.Unix(0, r.lastPublished.Load())
	if !s.since.IsZero() {
		if last.After(s.since) {
			r.log.InfoContext(ctx, "relay publishing again after a stall", "stalled_for", last.Sub(s.since).Round(time.Millisecond))
			s.since, s.waiting = time.Time{}, nil
		}
		return
	}
	if now.Sub(last) < r.cfg.StallAfter || r.client.peeker == nil {
		return
	}
	pctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	ready, err := r.client.peeker.Claimable(pctx, now)
	cancel()
	if err != nil || !ready {
		return
	}
	s.since = last
	for _, d := range r.deliver.Health() {
		if d.State != DestinationOK {
			s.waiting = append(s.waiting, r.deliver.label(d.Name)+" ("+d.State+"): "+strings.Join(d.Topics, ","))
		}
	}
	r.log.ErrorContext(ctx, "relay stalled: messages are ready and none was published", "for", now.Sub(last).Round(time.Second),
		"waiting", strings.Join(s.waiting, "; "), "stall_after", r.cfg.StallAfter)
}

// stalled returns when the relay last published, if it is stalled now, and what waits.
func (r *Relay) stalled() (time.Time, []string) {
	r.stall.mu.Lock()
	defer r.stall.mu.Unlock()
	return r.stall.since, r.stall.waiting
}

package postbox

import (
	"maps"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/postbox-go/postbox/internal/backoff"
)

// Destination states, as DestinationHealth.State gives them.
const (
	DestinationOK   = "ok"
	DestinationDown = "down" // refused every message of its last share as unavailable; probed with one message
	DestinationSlow = "slow" // its last share took longer than SlowPublish; one claim at a time serves it
)

// DestinationHealth is the state of one destination of a relay.
type DestinationHealth struct {
	// Name is the destination's name (Destinations.Destination), "" for a relay's one broker.
	Name string
	// State is DestinationOK, DestinationDown or DestinationSlow.
	State string
	// Since is when it entered its state, on the relay's clock.
	Since time.Time
	// Unavailable is the time it has been down, the outage going on now included.
	Unavailable time.Duration
	// Topics are the topics seen waiting for it while it is down or slow, sorted.
	Topics []string
	// Waiting counts the distinct messages held for it during the outage going on now.
	Waiting int
	// LastError is the error that made it down, while it is.
	LastError string
}

// maxWaitingIDs bounds the IDs a down destination remembers to count the messages that waited for it.
const maxWaitingIDs = 100_000

type destHealth struct {
	state   string
	since   time.Time
	probe   backoff.Backoff
	next    time.Time // the next probe, while down
	topics  map[string]struct{}
	waiting map[string]struct{}
	downSum time.Duration
	err     string
	// inflight counts the shares being published to it now, and oldest is when the oldest of them began
	// (monotonic time).
	inflight int
	oldest   time.Time
}

// health is the Deliverer's record of its destinations.
type health struct {
	mu      sync.Mutex
	retry   RetryPolicy
	m       map[string]*destHealth
	avoided []string // cached avoid(); nil when stale
	stale   bool
	changes atomic.Uint64 // state changes so far, for the heartbeat
	changed chan struct{} // signalled at each change, for the lane
}

// change records a change of a destination's state.
func (h *health) change() {
	h.changes.Add(1)
	select {
	case h.changed <- struct{}{}:
	default:
	}
}

func (h *health) init(p RetryPolicy) {
	h.retry, h.m, h.changed = p, map[string]*destHealth{}, make(chan struct{}, 1)
}

func (h *health) get(name string) *destHealth {
	d := h.m[name]
	if d == nil {
		d = &destHealth{state: DestinationOK, probe: h.retry.errorBackoff(), topics: map[string]struct{}{}}
		h.m[name] = d
	}
	return d
}

func (h *health) isDown(name string) bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	d := h.m[name]
	return d != nil && d.state == DestinationDown
}

// begin records a share to name beginning at now (monotonic time), unless another share has been in flight
// for longer than busy: then it reports false, and the caller holds its share instead of tying up its claim.
func (h *health) begin(name string, now time.Time, busy time.Duration) bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	d := h.get(name)
	if d.inflight > 0 && now.Sub(d.oldest) > busy {
		return false
	}
	if d.inflight == 0 {
		d.oldest = now
	}
	d.inflight++
	return true
}

// end records that a share to name ended.
func (h *health) end(name string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	d := h.get(name)
	if d.inflight--; d.inflight == 0 {
		d.oldest = time.Time{}
	}
}

// probeDue reports whether a down destination's probe is due, and if so takes it: the next is scheduled.
func (h *health) probeDue(name string, now time.Time) bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	d := h.get(name)
	if now.Before(d.next) {
		return false
	}
	d.next = now.Add(d.probe.Next())
	return true
}

// markDown records that name refused recs whole as unavailable, and reports its waiting topics and whether this
// began its outage.
func (h *health) markDown(name string, now time.Time, err error, recs []Record) ([]string, bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	d := h.get(name)
	first := d.state != DestinationDown
	if first {
		h.change()
		d.state, d.since, d.err = DestinationDown, now, truncate(err.Error(), MaxLastErrorLen)
		d.probe.Reset()
		d.waiting = map[string]struct{}{}
		d.next = now.Add(d.probe.Next())
	}
	d.note(recs)
	h.stale = true
	return slices.Sorted(maps.Keys(d.topics)), first
}

// hold records that recs wait for name, which is down.
func (h *health) hold(name string, recs []Record) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if d := h.m[name]; d != nil && d.state == DestinationDown {
		n := len(d.topics)
		d.note(recs)
		h.stale = h.stale || len(d.topics) != n
	}
}

func (d *destHealth) note(recs []Record) {
	for _, r := range recs {
		d.topics[r.Topic] = struct{}{}
		if d.waiting != nil && len(d.waiting) < maxWaitingIDs {
			d.waiting[r.ID] = struct{}{}
		}
	}
}

// markUp records that name took a share, and reports whether that ended an outage, how long it lasted and how
// many messages waited for it.
func (h *health) markUp(name string, now time.Time) (back bool, downFor time.Duration, waited int) {
	h.mu.Lock()
	defer h.mu.Unlock()
	d := h.get(name)
	if d.state != DestinationDown {
		return false, 0, 0
	}
	h.change()
	downFor, waited = now.Sub(d.since), len(d.waiting)
	d.downSum += downFor
	d.state, d.since, d.err, d.waiting = DestinationOK, now, "", nil
	d.probe.Reset()
	clear(d.topics)
	h.stale = true
	return true, downFor, waited
}

// slowness records whether name's last share was slow, and reports its state and whether it changed.
func (h *health) slowness(name string, slow bool, now time.Time, recs []Record) (bool, bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	d := h.get(name)
	switch {
	case slow && d.state == DestinationOK:
		h.change()
		d.state, d.since = DestinationSlow, now
		d.note(recs)
		h.stale = true
		return true, true
	case slow && d.state == DestinationSlow:
		n := len(d.topics)
		d.note(recs)
		h.stale = h.stale || len(d.topics) != n
	case !slow && d.state == DestinationSlow:
		h.change()
		d.state, d.since = DestinationOK, now
		clear(d.topics)
		h.stale = true
		return false, true
	}
	return d.state == DestinationSlow, false
}

// avoid returns the topics of the destinations that are down or slow.
func (h *health) avoid() []string {
	h.mu.Lock()
	defer h.mu.Unlock()
	if !h.stale {
		return h.avoided
	}
	var out []string
	for _, d := range h.m {
		if d.state != DestinationOK {
			for t := range d.topics {
				out = append(out, t)
			}
		}
	}
	slices.Sort(out)
	h.avoided, h.stale = slices.Compact(out), false
	return h.avoided
}

// due reports whether a claim for the avoided topics is due at now, whether a destination is slow, and when the
// next claim is due otherwise.
func (h *health) due(now time.Time) (bool, bool, time.Time) {
	h.mu.Lock()
	defer h.mu.Unlock()
	var next time.Time
	for _, d := range h.m {
		if d.state == DestinationSlow {
			return true, true, now
		}
	}
	for _, d := range h.m {
		switch d.state {
		case DestinationDown:
			if !now.Before(d.next) {
				return true, false, now
			}
			if next.IsZero() || d.next.Before(next) {
				next = d.next
			}
		}
	}
	return false, false, next
}

func (h *health) allDown(names []string) bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	for _, name := range names {
		if d := h.m[name]; d == nil || d.state != DestinationDown {
			return false
		}
	}
	return len(names) > 0
}

func (h *health) snapshot(now time.Time) []DestinationHealth {
	h.mu.Lock()
	defer h.mu.Unlock()
	out := make([]DestinationHealth, 0, len(h.m))
	for _, name := range slices.Sorted(maps.Keys(h.m)) {
		d := h.m[name]
		s := DestinationHealth{Name: name, State: d.state, Since: d.since, Unavailable: d.downSum,
			Topics: slices.Sorted(maps.Keys(d.topics)), Waiting: len(d.waiting), LastError: d.err}
		if d.state == DestinationDown {
			s.Unavailable += now.Sub(d.since)
		}
		out = append(out, s)
	}
	return out
}

package postbox

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"strings"
	"sync"
	"time"

	"github.com/postbox-go/postbox/internal/backoff"
)

// The delivery step is the one place that publishes a claimed batch and rules on each of its messages:
// published, retried at a time, parked as dead, or held because its destination is down. The table relay and the
// WAL relay (driver/pgxv5/wal) both call it, so a failure means the same thing whichever relay met it.

// VerdictKind is the delivery step's ruling on one message.
type VerdictKind int

const (
	// VerdictPublished: the destination acknowledged the message.
	VerdictPublished VerdictKind = iota
	// VerdictRetry: publishing failed; the message counts one more attempt and is due again at Verdict.RetryAt.
	VerdictRetry
	// VerdictDead: publishing failed for good (a permanent error, or MaxAttempts reached); park the message as dead.
	VerdictDead
	// VerdictHeld: the message's destination is down. It was not tried, or it was and the destination refused it as
	// unavailable; it counts no attempt and is due again at Verdict.RetryAt, within ErrorBackoffBase.
	VerdictHeld
)

func (o VerdictKind) String() string {
	switch o {
	case VerdictPublished:
		return "published"
	case VerdictRetry:
		return "retry"
	case VerdictDead:
		return "dead"
	case VerdictHeld:
		return "held"
	}
	return fmt.Sprintf("VerdictKind(%d)", int(o))
}

// Verdict is the delivery step's ruling on one message of a batch.
type Verdict struct {
	Kind VerdictKind
	// Destination names where the message was to go: Destinations.Destination of its topic, or "" for a
	// publisher with one destination.
	Destination string
	// Attempts is the message's failed attempts after this delivery.
	Attempts int
	// RetryAt is when a Retry or Held message is due again, and when a Dead one failed.
	RetryAt time.Time
	// Err is why the message was not published; nil when it was.
	Err error
	// LastError is Err's text made fit for a text column (valid UTF-8, no NUL, at most MaxLastErrorLen bytes).
	LastError string
}

// ErrDestinationDown is the error of a message held because its destination is down and was not tried.
var ErrDestinationDown = errors.New("postbox: destination down; held until a probe finds it back")

// Destinations is implemented by a Publisher that sends each message to one of several destinations, such as
// Router or the daemon's --route set. The relay keeps health per destination: while one is down, only its
// messages wait (probed with one of them at the error-backoff pace), and while one is slow, it holds at most one
// claim at a time; every other destination's messages are claimed and published at full speed.
type Destinations interface {
	Publisher
	// Destination names the destination of messages of topic, for logs, metrics and health. It must be cheap
	// and always give the same name for the same topic.
	Destination(topic string) string
	// DestinationNames names every destination, so that the relay can tell when all of them are down.
	DestinationNames() []string
}

// DelivererConfig configures a Deliverer.
type DelivererConfig struct {
	// Retry is the retry policy; zero fields take their defaults.
	Retry RetryPolicy
	// Registry, when set, refuses permanently the messages it does not accept, so that they are parked as dead
	// instead of published.
	Registry *Registry
	// Clock tells the time of verdicts and health. Default: the system clock.
	Clock Clock
	// SlowPublish is how long one destination's share of a batch may take before the destination counts as
	// slow. Default: DefaultSlowPublish.
	SlowPublish time.Duration
	// Logger receives one line when a destination goes down, turns slow, and comes back. Default: slog.Default().
	Logger *slog.Logger
}

// DefaultSlowPublish is the default of RelayConfig.SlowPublish and DelivererConfig.SlowPublish.
const DefaultSlowPublish = time.Second

// Deliverer is the delivery step: it publishes batches through a Publisher and rules on every message, keeping
// health per destination. Relays make one each; the WAL relay's is made with NewDeliverer. It is safe for
// concurrent use.
type Deliverer struct {
	pub    Publisher
	dests  Destinations // pub, when it has several destinations
	cfg    DelivererConfig
	log    *slog.Logger
	health health
}

// NewDeliverer returns the delivery step publishing through pub.
func NewDeliverer(pub Publisher, cfg DelivererConfig) *Deliverer {
	cfg.Retry = cfg.Retry.WithDefaults()
	if cfg.Clock == nil {
		cfg.Clock = systemClock{}
	}
	setDefault(&cfg.SlowPublish, DefaultSlowPublish)
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	d := &Deliverer{pub: pub, cfg: cfg, log: cfg.Logger}
	d.dests, _ = pub.(Destinations)
	d.health.init(cfg.Retry)
	return d
}

// Deliver publishes the messages of recs, each destination's share at once beside the others, and returns one
// verdict per message, in order. A message refused by the registry is Dead without being published; a message
// whose destination is down is Held, and one of them per destination is sent as the probe when one is due. The
// context bounds the publish calls.
func (d *Deliverer) Deliver(ctx context.Context, recs []Record) []Verdict {
	out := make([]Verdict, len(recs))
	groups := map[string][]int{}
	var names []string
	for i, rec := range recs {
		name := d.destination(rec.Topic)
		out[i].Destination = name
		if reg := d.cfg.Registry; reg != nil {
			if err := reg.Check(rec.Message); err != nil {
				out[i].Err = Permanent(fmt.Errorf("refused by the event registry, not published: %w", err))
				continue
			}
		}
		if _, ok := groups[name]; !ok {
			names = append(names, name)
		}
		groups[name] = append(groups[name], i)
	}
	errs := make([]error, len(recs))
	if len(names) == 1 {
		d.deliverTo(ctx, names[0], recs, groups[names[0]], errs) // one destination, the usual case: no goroutine
	} else {
		var wg sync.WaitGroup
		for _, name := range names {
			idx := groups[name]
			wg.Go(func() { d.deliverTo(ctx, name, recs, idx, errs) })
		}
		wg.Wait()
	}
	now := d.cfg.Clock.Now()
	for i, rec := range recs {
		v := &out[i]
		if v.Err == nil {
			v.Err = errs[i]
		}
		v.Attempts = rec.Attempts
		switch {
		case v.Err == nil:
			v.Kind = VerdictPublished
			continue
		case errors.Is(v.Err, ErrDestinationDown) || (IsUnavailable(v.Err) && d.health.isDown(v.Destination)):
			// Due again soon, so that the claim that probes the destination finds its messages; the
			// relay's ordinary claims skip them meanwhile (Avoid).
			v.Kind, v.RetryAt = VerdictHeld, now.Add(backoff.Jitter(d.cfg.Retry.ErrorBackoffBase))
		default:
			v.Attempts++
			v.Kind, v.RetryAt = VerdictRetry, now.Add(d.cfg.Retry.Delay(v.Attempts))
			if IsPermanent(v.Err) || v.Attempts >= d.cfg.Retry.MaxAttempts {
				v.Kind, v.RetryAt = VerdictDead, now
			}
		}
		v.LastError = truncate(v.Err.Error(), MaxLastErrorLen)
	}
	return out
}

// deliverTo publishes the messages idx of recs, which all go to the destination name, and writes their errors
// into errs. A down destination gets its first message only, when its probe is due, and the rest when it takes it.
func (d *Deliverer) deliverTo(ctx context.Context, name string, recs []Record, idx []int, errs []error) {
	h := &d.health
	if h.isDown(name) {
		held := idx
		if h.probeDue(name, d.cfg.Clock.Now()) {
			d.publishTo(ctx, name, recs, idx[:1], errs)
			held = idx[1:]
		}
		if !h.isDown(name) {
			held = nil // the probe went through
		}
		if len(held) > 0 {
			part := make([]Record, len(held))
			for j, i := range held {
				errs[i], part[j] = ErrDestinationDown, recs[i]
			}
			h.hold(name, part)
			return
		}
		if idx = idx[1:]; len(idx) == 0 { // the probe went through: the destination is back, and takes the rest
			return
		}
	}
	if !h.begin(name, time.Now(), d.busyAfter()) {
		// Another claim's share to this destination has been in flight for a while: it may be turning slow. Do
		// not tie this claim up behind it as well, or every worker could end up waiting for one destination.
		for _, i := range idx {
			errs[i] = errDestinationBusy
		}
		return
	}
	defer h.end(name)
	d.publishTo(ctx, name, recs, idx, errs)
}

// busyAfter is how long a share to one destination may be in flight before another claim's share to it is held
// instead of queued behind it: SlowPublish/10 with several destinations, so that a destination turning slow
// cannot catch every worker while the others' messages wait; never with one destination, whose workers have no
// other work to protect and would only churn claims.
func (d *Deliverer) busyAfter() time.Duration {
	if d.dests == nil || len(d.dests.DestinationNames()) < 2 {
		return time.Duration(math.MaxInt64)
	}
	return d.cfg.SlowPublish / 10
}

// errDestinationBusy is the error of a message held because its destination was still busy with another claim's
// messages (see deliverTo).
var errDestinationBusy error = busyError{}

type busyError struct{}

func (busyError) Error() string        { return "postbox: destination busy with another batch; held briefly" }
func (busyError) Is(target error) bool { return target == ErrDestinationDown }

// publishTo publishes the messages idx of recs to the destination name, writes their errors into errs and
// records what the destination's answer says of its health.
func (d *Deliverer) publishTo(ctx context.Context, name string, recs []Record, idx []int, errs []error) {
	part := recs // the whole batch, the usual case: no copy
	if len(idx) != len(recs) {
		part = make([]Record, len(idx))
		for j, i := range idx {
			part[j] = recs[i]
		}
	}
	started := time.Now() // monotonic, for slowness: the injected clock may stand still
	// A share still in flight after SlowPublish makes its destination slow at once, not when it ends: other
	// claims then leave its topics to the lane, and the log says so within SlowPublish of a destination that
	// stopped answering, where the publish itself may wait for PublishTimeout before it fails.
	inflight := time.AfterFunc(d.cfg.SlowPublish, func() {
		if _, changed := d.health.slowness(name, true, d.cfg.Clock.Now(), part); changed {
			d.log.WarnContext(ctx, "destination slow; a publish to it has not answered within slow_publish, so it now holds at most one claim at a time",
				"destination", d.label(name), "slow_publish", d.cfg.SlowPublish)
		}
	})
	perr := d.publish(ctx, part)
	inflight.Stop()
	took := time.Since(started)
	down := len(perr) > 0
	for j, i := range idx {
		errs[i] = perr[j]
		if perr[j] == nil || !IsUnavailable(perr[j]) {
			down = false
		}
	}
	now := d.cfg.Clock.Now()
	if down {
		if h, first := d.health.markDown(name, now, perr[0], part); first {
			d.log.ErrorContext(ctx, "destination down; its messages wait, probed with one of them, while other destinations go on",
				"destination", d.label(name), "err", oneLine(perr[0]), "topics", h, "retry_max", d.cfg.Retry.ErrorBackoffMax)
		}
		return
	}
	if back, downFor, waited := d.health.markUp(name, now); back {
		d.log.InfoContext(ctx, "destination available again", "destination", d.label(name),
			"unavailable_for", downFor.Round(time.Millisecond), "waited", waited)
	}
	if slow, changed := d.health.slowness(name, took > d.cfg.SlowPublish, now, part); changed {
		if slow { // the in-flight timer did not fire in time to say it
			d.log.WarnContext(ctx, "destination slow; it now holds at most one claim at a time", "destination", d.label(name),
				"took", took.Round(time.Millisecond), "slow_publish", d.cfg.SlowPublish)
		} else {
			d.log.InfoContext(ctx, "destination fast again", "destination", d.label(name), "took", took.Round(time.Millisecond))
		}
	}
}

// publish calls the publisher and returns one error per record, a panic included.
func (d *Deliverer) publish(ctx context.Context, recs []Record) (errs []error) {
	errs = make([]error, len(recs))
	defer func() {
		if p := recover(); p != nil {
			err := fmt.Errorf("postbox: publisher panicked: %v", p)
			for i := range errs {
				errs[i] = err
			}
		}
	}()
	err := d.pub.Publish(ctx, recs)
	if err == nil {
		return errs
	}
	var be *BatchError
	if errors.As(err, &be) && len(be.Errs) == len(recs) {
		copy(errs, be.Errs)
		return errs
	}
	for i := range errs {
		errs[i] = err
	}
	return errs
}

func (d *Deliverer) destination(topic string) string {
	if d.dests == nil {
		return ""
	}
	return d.dests.Destination(topic)
}

// label names a destination in logs: "" is the relay's one broker.
func (d *Deliverer) label(name string) string {
	if name == "" {
		return "broker"
	}
	return name
}

// Avoid returns the topics whose destination is down or slow, which a relay's ordinary claims skip: their
// messages are claimed by one claimer at a time (see Due).
func (d *Deliverer) Avoid() []string { return d.health.avoid() }

// Due reports whether a claim of the avoided topics is due at now (a slow destination, or a down one whose
// probe is due), whether a destination is slow (then the claim should be a whole batch; a probe needs a few
// messages only), and when the next claim will be due otherwise; next is zero when no destination is down or slow.
func (d *Deliverer) Due(now time.Time) (due, slow bool, next time.Time) { return d.health.due(now) }

// AllDown reports whether every destination is down: the publisher's one, or each of its DestinationNames.
func (d *Deliverer) AllDown() bool {
	if d.dests == nil {
		return d.health.allDown([]string{""})
	}
	return d.health.allDown(d.dests.DestinationNames())
}

// Changes counts the destinations' changes of state so far: a relay records its heartbeat at once when it grows.
func (d *Deliverer) Changes() uint64 { return d.health.changes.Load() }

// Changed is signalled when a destination changes state (one signal may stand for several changes).
func (d *Deliverer) Changed() <-chan struct{} { return d.health.changed }

// Health returns the state of each destination tried so far, in name order.
func (d *Deliverer) Health() []DestinationHealth { return d.health.snapshot(d.cfg.Clock.Now()) }

// truncate makes s fit a text column: valid UTF-8 without NUL (PostgreSQL rejects both, and a settle that fails on
// an error's text would republish its batch for ever), at most n bytes.
func truncate(s string, n int) string {
	s = strings.ToValidUTF8(strings.ReplaceAll(s, "\x00", ""), "\uFFFD")
	if len(s) <= n {
		return s
	}
	return strings.ToValidUTF8(s[:n], "") // never cut a character in half
}

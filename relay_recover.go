package postbox

import (
	"context"
	"errors"
	"net"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/postbox-go/postbox/internal/backoff"
)

// A relay that cannot work (its database or its broker is down) waits ErrorBackoffBase doubling up to
// ErrorBackoffMax between attempts, probing the dependency that failed, and logs one line when it stops and one
// when it resumes.

// Unavailable marks err as the broker being unavailable rather than the message being at fault: a connection that
// is down or refused, a server that is restarting. When every message of a destination's share of a batch fails
// with such an error, the destination is down: its messages count no attempt (so an outage never parks them as
// dead) and are held, the relay's ordinary claims skip its topics, and it is probed with one message at a time, at
// the pace of RelayConfig.ErrorBackoffBase up to ErrorBackoffMax, until it takes one; then full batches flow again.
// Other destinations (see Destinations) go on meanwhile. Timeouts (context.DeadlineExceeded), refused and reset
// connections count as unavailable without the mark.
func Unavailable(err error) error {
	if err == nil {
		return nil
	}
	return &unavailableError{err}
}

// IsUnavailable reports whether err says the broker is unavailable: marked with Unavailable, a timeout, or a
// refused or reset connection.
func IsUnavailable(err error) bool {
	var u *unavailableError
	var ne net.Error
	return errors.As(err, &u) || errors.Is(err, context.DeadlineExceeded) || errors.Is(err, syscall.ECONNREFUSED) ||
		errors.Is(err, syscall.ECONNRESET) || (errors.As(err, &ne) && ne.Timeout())
}

type unavailableError struct{ err error }

func (e *unavailableError) Error() string { return e.err.Error() }
func (e *unavailableError) Unwrap() error { return e.err }

// brokerDownError is runOnce's report of a batch the broker refused whole as unavailable.
type brokerDownError struct{ err error }

func (e *brokerDownError) Error() string { return "publish: broker unavailable: " + e.err.Error() }
func (e *brokerDownError) Unwrap() error { return e.err }

func isBrokerDown(err error) bool {
	var d *brokerDownError
	return errors.As(err, &d)
}

// notYet reports whether a database error says "not yet" rather than "worse": a refused connection, or
// PostgreSQL's SQLSTATE 57P03 ("the database system is starting up", "not yet accepting connections"). Such a
// failure does not make the relay wait longer before its next attempt.
func notYet(err error) bool {
	var s interface{ SQLState() string }
	return errors.Is(err, syscall.ECONNREFUSED) || (errors.As(err, &s) && s.SQLState() == "57P03")
}

// retryDelay returns the wait after err: one level more of retry, or the same level when err says "not yet".
func retryDelay(retry *backoff.Backoff, err error) time.Duration {
	if notYet(err) && retry.Attempts() > 0 {
		return retry.Again()
	}
	return retry.Next()
}

// oneLine flattens err's text to one line: some drivers join errors with newlines, which split a log record.
func oneLine(err error) string {
	lines := strings.FieldsFunc(err.Error(), func(r rune) bool { return r == '\n' || r == '\r' })
	for i := range lines {
		lines[i] = strings.TrimSpace(lines[i])
	}
	return strings.Join(lines, "; ")
}

// pause handles a failed runOnce: it records the outage, then waits until it is worth trying again, and
// reports whether a wake-up ended the wait. After a database error it pings the database at the pace of retry
// until it answers, or a wake-up comes (the listening connection is back, or a client enqueued); after a broker
// outage it waits one delay, wake-ups aside, since they say nothing about the broker.
func (r *Relay) pause(ctx context.Context, err error, retry *backoff.Backoff) bool {
	var down *brokerDownError
	if errors.As(err, &down) {
		r.down(ctx, "broker", down.err)
		t := time.NewTimer(retry.Next())
		defer t.Stop()
		select {
		case <-ctx.Done():
		case <-t.C:
		}
		return false
	}
	r.stats.errors.Add(1)
	r.down(ctx, "database", err)
	pinger := r.client.pinger
	for {
		if r.wait(ctx, retryDelay(retry, err)) {
			return true
		}
		if ctx.Err() != nil || pinger == nil {
			return false // without a ping, the next claim is the probe
		}
		pctx, cancel := context.WithTimeout(ctx, max(r.cfg.ErrorBackoffMax, 2*time.Second))
		err = pinger.Ping(pctx)
		cancel()
		if err == nil || ctx.Err() != nil {
			return false
		}
		r.log.DebugContext(ctx, "database still unavailable", "err", oneLine(err))
	}
}

// down records that the relay cannot work because of err, and logs it when the relay was working.
func (r *Relay) down(ctx context.Context, cause string, err error) {
	now := r.client.cfg.Clock.Now()
	if !r.outage.begin(now, cause) {
		return
	}
	r.log.ErrorContext(ctx, "relay cannot work: "+cause+" unavailable; retrying until it answers", "err", oneLine(err),
		"retry_max", r.cfg.ErrorBackoffMax)
	if o, ok := r.cfg.Observer.(OutageObserver); ok {
		o.ObserveOutage(ctx, Outage{Since: now, Cause: cause, Err: err})
	}
}

// resumed is called after each successful runOnce that claimed n records, published telling whether the relay
// published anything meanwhile. It ends the outage, if any, when the dependency that failed worked: any claim for
// the database; for the brokers, any destination taking a message. It logs
// how long the relay could not work and how many messages waited: those pending now and the batch that resumed.
// It reports whether the relay is working.
func (r *Relay) resumed(ctx context.Context, n int, published bool) bool {
	now := r.client.cfg.Clock.Now()
	since, cause, ended := r.outage.end(now, published)
	if !ended {
		return since.IsZero()
	}
	attrs := []any{"cause", cause, "unavailable_for", now.Sub(since).Round(time.Millisecond)}
	sctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	if stats, err := r.client.stats(sctx, now); err == nil {
		waited := int64(n) // the batch that resumed, settled by now
		for _, t := range stats {
			waited += t.Pending
		}
		attrs = append(attrs, "waited", waited)
	}
	cancel()
	r.log.InfoContext(ctx, "relay resumed", attrs...)
	if o, ok := r.cfg.Observer.(OutageObserver); ok {
		o.ObserveOutage(ctx, Outage{Since: since, End: now, Cause: cause})
	}
	if r.cfg.Workers > 1 {
		r.Wake() // the other workers may be waiting out a delay
	}
	return true
}

// outage is a relay's record of the time it cannot work.
type outage struct {
	mu    sync.Mutex
	since time.Time // zero while the relay works
	cause string    // "database" or "broker"
	sum   time.Duration
}

// begin records an outage with its cause and reports whether it is a new one.
func (o *outage) begin(now time.Time, cause string) bool {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.cause = cause
	if !o.since.IsZero() {
		return false
	}
	o.since = now
	return true
}

// end ends the outage, unless it is the broker's and nothing was published, and returns when it began, its cause
// and whether this call ended it. since is zero when there was no outage.
func (o *outage) end(now time.Time, published bool) (since time.Time, cause string, ended bool) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.since.IsZero() || (o.cause == "broker" && !published) {
		return o.since, o.cause, false
	}
	since, cause = o.since, o.cause
	o.sum += now.Sub(since)
	o.since = time.Time{}
	return since, cause, true
}

// total returns the time spent unable to work, the current outage included.
func (o *outage) total(now time.Time) time.Duration {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.since.IsZero() {
		return o.sum
	}
	return o.sum + now.Sub(o.since)
}

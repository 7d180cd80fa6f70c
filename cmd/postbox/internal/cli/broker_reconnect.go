package cli

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/postbox-go/postbox"
	"github.com/postbox-go/postbox/internal/backoff"
)

// The daemon's broker connections reconnect at the relay's own error-backoff pace (--error-backoff-max), so
// that "the relay resumes within about --error-backoff-max of the broker answering" holds for every adapter,
// not only for the database: a client library's own default (nats.go waits 2 s between attempts, the RabbitMQ
// and MQTT adapters up to 30 s) would otherwise decide how long a relay stays idle after its broker came back.

// reconnectParam is the broker URL parameter that overrides the pace's cap for that broker.
const reconnectParam = "reconnect_max"

// reconnectPace is how often an adapter (or the start-up wait for the database) tries to connect again: from
// base, doubling up to max, with the project's jitter, and at base whenever the last attempt was refused. A refused connection says "not yet"
// (the server's host answers and nothing listens yet: it is restarting) rather than "worse", as the relay treats
// a refused database connection, so a broker that restarts is found within base of listening again; a refused
// dial costs the server nothing.
type reconnectPace struct {
	base, max time.Duration
}

// newReconnectPace returns the pace for --error-backoff-max maxDelay (0: the relay's default), whose first
// delay is the relay's error-backoff base (or maxDelay when that is lower).
func newReconnectPace(maxDelay time.Duration) reconnectPace {
	cfg := (&postbox.RelayConfig{ErrorBackoffMax: maxDelay}).WithDefaults()
	return reconnectPace{base: cfg.ErrorBackoffBase, max: cfg.ErrorBackoffMax}
}

// delay returns the wait before connection attempt n (1 for the first after losing the connection), given the
// error the attempt before it failed with (nil when there was none).
func (p reconnectPace) delay(attempt int, last error) time.Duration {
	if p.base <= 0 {
		p = newReconnectPace(0) // the zero pace: the relay's default
	}
	if last == nil || notYet(last) {
		return backoff.Jitter(p.base)
	}
	return backoff.Delay(p.base, p.max, attempt)
}

// fromURL returns the pace with the cap that the URL's reconnect_max parameter sets, if it has one, and removes
// the parameter from q.
func (p reconnectPace) fromURL(q url.Values) (reconnectPace, error) {
	v := q.Get(reconnectParam)
	q.Del(reconnectParam)
	if v == "" {
		return p, nil
	}
	d, err := time.ParseDuration(v)
	if err != nil || d <= 0 {
		return p, fmt.Errorf("%s=%q: write a positive duration, such as %s=1s (the longest wait between reconnection attempts; default --error-backoff-max)",
			reconnectParam, v, reconnectParam)
	}
	return reconnectPace{base: min(p.base, d), max: d}, nil
}

// errNotRefused stands for a failure of unknown cause, for a client that does not say why its attempt failed: the
// pace then grows as after any failure other than a refusal.
var errNotRefused = errors.New("an attempt failed")

// notYet reports whether err says "not yet" rather than "worse": a refused connection, or PostgreSQL's "not yet
// accepting connections" (SQLSTATE 57P03, during start-up and crash recovery), as the relay reads them.
func notYet(err error) bool {
	var s interface{ SQLState() string }
	return errors.Is(err, syscall.ECONNREFUSED) || (errors.As(err, &s) && s.SQLState() == "57P03")
}

// awaitingPublisher holds the relay's probe of a broker that is down until the broker answers, for the adapters
// whose Publish fails at once while their connection is down (RabbitMQ, MQTT, Redis). A relay whose broker is
// down publishes one message at a time, one per error-backoff delay (up to --error-backoff-max apart): a probe
// that failed at once would leave the relay idle for up to that long after the broker came back. The NATS and
// Kafka clients hold a publish until they reconnect; this gives the other adapters the same behaviour. Only a
// one-message batch, after a publish that failed whole as unavailable, waits: the first failure of an outage
// returns at once (so the relay says at once that it cannot work), and a larger batch, which may carry other
// brokers' messages through the router, is never held back.
type awaitingPublisher struct {
	next postbox.Publisher
	ping func(ctx context.Context) error
	pace reconnectPace
	down atomic.Bool // the last publish failed whole as unavailable
}

// awaitBroker returns c with its publisher wrapped in an awaitingPublisher paced by pace.
func awaitBroker(c *brokerConn, pace reconnectPace) *brokerConn {
	out := *c
	out.pub = &awaitingPublisher{next: c.pub, ping: c.ping, pace: pace}
	return &out
}

func (a *awaitingPublisher) Publish(ctx context.Context, batch []postbox.Record) error {
	if len(batch) == 1 && a.down.Load() {
		if err := a.await(ctx); err != nil {
			return postbox.Unavailable(err)
		}
	}
	err := a.next.Publish(ctx, batch)
	a.down.Store(failedWhole(err, len(batch)))
	return err
}

// await pings the broker at the reconnection pace until it answers or ctx ends.
func (a *awaitingPublisher) await(ctx context.Context) error {
	var t *time.Timer
	for attempt := 1; ; attempt++ {
		err := a.ping(ctx)
		if err == nil {
			return nil
		}
		if ctx.Err() != nil {
			return fmt.Errorf("the broker did not answer while the publish waited for it: %w", err)
		}
		d := a.pace.delay(attempt, err)
		if t == nil {
			t = time.NewTimer(d)
			defer t.Stop()
		} else {
			t.Reset(d)
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("the broker did not answer while the publish waited for it: %w", err)
		case <-t.C:
		}
	}
}

// failedWhole reports whether err says every one of n records failed because the broker is unavailable.
func failedWhole(err error, n int) bool {
	if err == nil {
		return false
	}
	var be *postbox.BatchError
	if !errors.As(err, &be) {
		return postbox.IsUnavailable(err)
	}
	if len(be.Errs) != n {
		return false
	}
	for _, e := range be.Errs {
		if e == nil || !postbox.IsUnavailable(e) {
			return false
		}
	}
	return true
}

package cli

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/url"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/postbox-go/postbox"
)

// TestReconnectPace: the broker reconnection pace is the relay's error backoff: --error-backoff-max caps it, a
// refused connection keeps it at the base (a restarting server is found within 100ms of listening), and a URL's
// reconnect_max overrides the cap for that broker.
func TestReconnectPace(t *testing.T) {
	p := newReconnectPace(0)
	if p.base != postbox.DefaultErrorBackoffBase || p.max != postbox.DefaultErrorBackoffMax {
		t.Fatalf("default pace %+v; want the relay's error backoff, %v to %v", p, postbox.DefaultErrorBackoffBase, postbox.DefaultErrorBackoffMax)
	}
	refusedErr := fmt.Errorf("dial: %w", syscall.ECONNREFUSED)
	for attempt := 1; attempt <= 50; attempt++ {
		if d := p.delay(attempt, refusedErr); d < p.base/2 || d > p.base {
			t.Fatalf("attempt %d after a refused connection waits %v; want %v to %v whatever the attempt", attempt, d, p.base/2, p.base)
		}
	}
	if d := p.delay(50, errors.New("i/o timeout")); d < p.max/2 || d > p.max {
		t.Errorf("attempt 50 after a timeout waits %v; want the cap, %v to %v", d, p.max/2, p.max)
	}
	if d := newReconnectPace(5*time.Second).delay(50, errNotRefused); d > 5*time.Second || d < 2500*time.Millisecond {
		t.Errorf("with --error-backoff-max 5s, attempt 50 waits %v; want 2.5s to 5s", d)
	}
	if d := (reconnectPace{}).delay(1, nil); d <= 0 || d > postbox.DefaultErrorBackoffBase {
		t.Errorf("the zero pace waits %v; want the relay's default, never a busy loop", d)
	}

	q := url.Values{"reconnect_max": {"300ms"}, "stream": {"S"}}
	got, err := p.fromURL(q)
	if err != nil || got.max != 300*time.Millisecond || got.base != p.base {
		t.Errorf("reconnect_max=300ms: %+v, %v; want the cap 300ms", got, err)
	}
	if q.Has("reconnect_max") || !q.Has("stream") {
		t.Errorf("fromURL left %v; want reconnect_max removed and the rest kept", q)
	}
	if got, _ := p.fromURL(url.Values{"reconnect_max": {"50ms"}}); got.base != 50*time.Millisecond {
		t.Errorf("reconnect_max below the base: base %v; want 50ms", got.base)
	}
	for _, bad := range []string{"0", "-1s", "soon"} {
		if _, err := p.fromURL(url.Values{"reconnect_max": {bad}}); err == nil || !strings.Contains(err.Error(), "positive duration") {
			t.Errorf("reconnect_max=%s: %v; want an error asking for a positive duration", bad, err)
		}
	}
}

// TestBrokerURLReconnectMax: every broker URL that has a connection takes reconnect_max, and refuses a bad one
// at start, naming the parameter.
func TestBrokerURLReconnectMax(t *testing.T) {
	rt := &runtime{log: slog.New(slog.DiscardHandler), env: func(string) string { return "" }}
	for _, raw := range []string{
		"nats://127.0.0.1:1?reconnect_max=soon",
		"amqp://guest:guest@127.0.0.1:1/?reconnect_max=soon",
		"mqtt://127.0.0.1:1?reconnect_max=soon",
		"redis://127.0.0.1:1/?reconnect_max=soon",
		"kafka://127.0.0.1:1?reconnect_max=soon",
		"pubsub://project?reconnect_max=soon",
	} {
		c, err := openBroker(context.Background(), raw, rt, brokerOptions{reconnect: newReconnectPace(0)})
		if err == nil {
			_ = c.close(context.Background())
			t.Errorf("%s: opened; want an error about reconnect_max", raw)
			continue
		}
		if !strings.Contains(err.Error(), "reconnect_max") {
			t.Errorf("%s: %v; want the error to name reconnect_max", raw, err)
		}
	}
}

// flakyBroker is a publisher whose broker is down until up is set: publishes and pings fail with a refused
// connection.
type flakyBroker struct {
	up        atomic.Bool
	published atomic.Int64
	pings     atomic.Int64
}

func (f *flakyBroker) Publish(_ context.Context, batch []postbox.Record) error {
	if !f.up.Load() {
		return fmt.Errorf("dial: %w", syscall.ECONNREFUSED)
	}
	f.published.Add(int64(len(batch)))
	return nil
}

func (f *flakyBroker) ping(context.Context) error {
	f.pings.Add(1)
	if !f.up.Load() {
		return fmt.Errorf("dial: %w", syscall.ECONNREFUSED)
	}
	return nil
}

// TestAwaitingPublisher: the first publish of an outage fails at once; the relay's one-message probe after it
// waits for the broker and publishes as soon as the broker answers, pinging it every 50-100ms; a batch of
// several never waits; a probe the broker never answers fails as unavailable when its context ends.
func TestAwaitingPublisher(t *testing.T) {
	f := &flakyBroker{}
	c := awaitBroker(&brokerConn{name: "flaky", pub: f, ping: f.ping}, newReconnectPace(0))
	one, two := make([]postbox.Record, 1), make([]postbox.Record, 2)

	start := time.Now()
	if err := c.pub.Publish(context.Background(), one); !postbox.IsUnavailable(err) || time.Since(start) > 50*time.Millisecond {
		t.Fatalf("first publish of the outage: %v after %v; want a refused connection at once", err, time.Since(start))
	}
	if err := c.pub.Publish(context.Background(), two); err == nil || f.pings.Load() != 0 {
		t.Fatalf("a batch of two while down: %v, %d pings; want it to fail at once, without waiting", err, f.pings.Load())
	}

	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	err := c.pub.Publish(ctx, one)
	cancel()
	if !postbox.IsUnavailable(err) || !strings.Contains(err.Error(), "did not answer") {
		t.Fatalf("a probe the broker never answers: %v; want an unavailable error saying the broker did not answer", err)
	}
	if n := f.pings.Load(); n < 2 || n > 10 {
		t.Errorf("%d pings in 300ms; want one every 50-100ms: more than one, and no busy loop", n)
	}

	ctx, cancel = context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- c.pub.Publish(ctx, one) }()
	select {
	case err := <-done:
		t.Fatalf("the probe returned %v while the broker was down; want it to wait", err)
	case <-time.After(150 * time.Millisecond):
	}
	up := time.Now()
	f.up.Store(true)
	select {
	case err := <-done:
		if err != nil || f.published.Load() != 1 {
			t.Fatalf("probe after the broker came back: %v, %d published; want it published", err, f.published.Load())
		}
		if d := time.Since(up); d > time.Second {
			t.Errorf("the probe published %v after the broker answered; want within a ping delay (100ms), far below its 10s deadline", d)
		}
	case <-ctx.Done():
		t.Fatal("the probe did not publish within 10s of the broker answering")
	}
	if err := c.pub.Publish(context.Background(), two); err != nil || f.published.Load() != 3 {
		t.Errorf("a batch after recovery: %v, %d published; want both published", err, f.published.Load())
	}
}

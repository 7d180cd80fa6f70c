package pgxv5_test

import (
	"context"
	"errors"
	"log/slog"
	"net/url"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/postbox-go/postbox"
	"github.com/postbox-go/postbox/driver/drivertest"
	"github.com/postbox-go/postbox/driver/pgxv5"
	"github.com/postbox-go/postbox/internal/testenv"
	"github.com/postbox-go/postbox/internal/testenv/tcpproxy"
	"github.com/postbox-go/postbox/postboxtest"
)

// TestRelayLogsOutageOnce: a relay whose database becomes unreachable (every connection cut, new ones closed at
// once) logs one line when it stops being able to work and one when it resumes, however many attempts it made
// meanwhile, counts the time in RelayStats.Unavailable, and publishes what was enqueued during the outage once
// the database answers, with no wake-up from the producer.
func TestRelayLogsOutageOnce(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	u, err := url.Parse(dbURL)
	if err != nil {
		t.Fatal(err)
	}
	proxy, err := tcpproxy.NewProxy(u.Host)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = proxy.Close() })
	via := *u
	via.Host = proxy.Addr()
	relayPool, err := pgxpool.New(ctx, via.String())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(relayPool.Close)
	directPool, err := pgxpool.New(ctx, dbURL)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(directPool.Close)

	cfg := drivertest.Tables(nil)
	cfg.DisableNotify = true // the relay must find the messages by itself once the database is back
	producer, err := postbox.NewClient(pgxv5.New(directPool), cfg)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := producer.Migrate(ctx); err != nil {
		t.Fatal(err)
	}
	logs := &testenv.Buffer{}
	relayCfg := *cfg
	relayCfg.Logger = slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelInfo}))
	relayClient, err := postbox.NewClient(pgxv5.New(relayPool), &relayCfg)
	if err != nil {
		t.Fatal(err)
	}
	rec := &postboxtest.Recorder{}
	relay, err := postbox.NewRelay(relayClient, rec, &postbox.RelayConfig{PollInterval: 20 * time.Millisecond,
		ErrorBackoffBase: 10 * time.Millisecond, ErrorBackoffMax: 50 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	defer run(ctx, t, relay)()
	enqueue := func(n int) {
		t.Helper()
		err := producer.InTx(ctx, func(ctx context.Context, tx pgx.Tx) error {
			for range n {
				if _, err := producer.Enqueue(ctx, tx, postbox.Message{Topic: "orders", Type: "order.created", Payload: []byte(`{}`)}); err != nil {
					return err
				}
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	enqueue(1)
	if !rec.WaitDistinct(ctx, 1, 10*time.Second) {
		t.Fatal("nothing published before the outage")
	}

	proxy.Refuse(true)
	proxy.Cut()
	enqueue(5)
	for !strings.Contains(logs.String(), "relay cannot work") {
		if ctx.Err() != nil {
			t.Fatalf("no outage logged; logs:\n%s", logs)
		}
		time.Sleep(10 * time.Millisecond)
	}
	// Many attempts at the 50ms cap, while the database stays unreachable.
	for relay.Stats().Unavailable < 500*time.Millisecond {
		if ctx.Err() != nil {
			t.Fatalf("the relay counted %v unavailable within the test's minute, want 500ms while the database is unreachable; logs:\n%s",
				relay.Stats().Unavailable, logs)
		}
		time.Sleep(10 * time.Millisecond)
	}
	proxy.Refuse(false)
	if !rec.WaitDistinct(ctx, 6, 10*time.Second) {
		t.Fatalf("published %d of 6 after the database came back; logs:\n%s", rec.Distinct(), logs)
	}
	for !strings.Contains(logs.String(), "relay resumed") {
		if ctx.Err() != nil {
			t.Fatalf("no resume logged; logs:\n%s", logs)
		}
		time.Sleep(10 * time.Millisecond)
	}
	out := logs.String()
	if n := strings.Count(out, "relay cannot work"); n != 1 {
		t.Errorf("%d lines say the relay cannot work, want 1 for one outage:\n%s", n, out)
	}
	if n := strings.Count(out, "relay resumed"); n != 1 {
		t.Errorf("%d lines say the relay resumed, want 1 for one outage:\n%s", n, out)
	}
	if n := strings.Count(out, "listening for wake-ups failed"); n > 1 {
		t.Errorf("%d lines say listening failed, want at most 1 for one outage:\n%s", n, out)
	}
	for _, line := range strings.Split(out, "\n") {
		if strings.Contains(line, "relay resumed") && (!strings.Contains(line, "unavailable_for=") || !strings.Contains(line, "waited=")) {
			t.Errorf("the resume line does not say for how long the relay could not work and how many messages waited: %s", line)
		}
	}
	if st := relay.Stats(); st.Unavailable < 500*time.Millisecond || st.Errors == 0 {
		t.Errorf("stats %+v, want at least 500ms unavailable and the failed claims counted", st)
	}
}

// TestRelayProbesADownBroker: while the broker refuses every message as unavailable, a relay publishes one message
// per attempt rather than whole batches, uses up no attempt (MaxAttempts 2 here), logs the outage once, and sends
// full batches again as soon as the broker takes a message.
func TestRelayProbesADownBroker(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	logs := &testenv.Buffer{}
	cfg := drivertest.Tables(nil)
	cfg.Logger = slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelInfo}))
	client, err := postbox.NewClient(newDriver(t), cfg)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := client.Migrate(ctx); err != nil {
		t.Fatal(err)
	}
	err = client.InTx(ctx, func(ctx context.Context, tx pgx.Tx) error {
		for range 50 {
			if _, err := client.Enqueue(ctx, tx, postbox.Message{Topic: "orders", Type: "order.created", Payload: []byte(`{}`)}); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var sizes []int // of every batch the broker was offered
	down, published := true, map[string]bool{}
	pub := postbox.PublisherFunc(func(_ context.Context, batch []postbox.Record) error {
		mu.Lock()
		defer mu.Unlock()
		sizes = append(sizes, len(batch))
		if down {
			return postbox.Unavailable(errors.New("no connection to the broker"))
		}
		for _, r := range batch {
			published[r.ID] = true
		}
		return nil
	})
	relay, err := postbox.NewRelay(client, pub, &postbox.RelayConfig{BatchSize: 10, Workers: 1, MaxAttempts: 2,
		ErrorBackoffBase: time.Millisecond, ErrorBackoffMax: 5 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	defer run(ctx, t, relay)()
	offers := func() []int {
		mu.Lock()
		defer mu.Unlock()
		return slices.Clone(sizes)
	}
	for len(offers()) < 20 {
		if ctx.Err() != nil {
			t.Fatalf("the relay stopped offering messages to a down broker: %v", offers())
		}
		time.Sleep(5 * time.Millisecond)
	}
	mu.Lock()
	down = false
	mu.Unlock()
	for {
		mu.Lock()
		n := len(published)
		mu.Unlock()
		if n == 50 {
			break
		}
		if ctx.Err() != nil {
			t.Fatalf("%d of 50 published after the broker came back; logs:\n%s", n, logs)
		}
		time.Sleep(5 * time.Millisecond)
	}
	got := offers()
	if got[0] != 10 {
		t.Errorf("first batch offered %d messages, want a full batch of 10", got[0])
	}
	for i, n := range got[1:20] {
		if n != 1 {
			t.Fatalf("offer %d to the down broker carried %d messages, want 1: a down broker is probed with one (offers %v)", i+2, n, got)
		}
	}
	if slices.Max(got[20:]) != 10 {
		t.Errorf("no full batch once the broker was back: offers %v", got)
	}
	if st := relay.Stats(); st.Dead != 0 {
		t.Errorf("%d messages parked as dead by an outage: it must use up no attempt", st.Dead)
	}
	out := logs.String()
	if strings.Count(out, "relay cannot work: broker unavailable") != 1 || strings.Count(out, "relay resumed") != 1 ||
		strings.Contains(out, "publish failed") {
		t.Errorf("want one line for the outage and one for the resume, and no per-batch failure line:\n%s", out)
	}
}

// run runs relay until the returned function is called, which returns once Run has, and fails the test if Run
// returned an error or does not return within 30s.
func run(ctx context.Context, t *testing.T, relay *postbox.Relay) (stop func()) {
	rctx, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- relay.Run(rctx) }()
	return func() {
		t.Helper()
		cancel()
		select {
		case err := <-done:
			if err != nil {
				t.Error(err)
			}
		case <-time.After(30 * time.Second):
			t.Error("the relay's Run did not return within 30s of its context's end")
		}
	}
}

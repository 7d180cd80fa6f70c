package pgxv5_test

import (
	"bytes"
	"context"
	"log/slog"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/postbox-go/postbox"
	"github.com/postbox-go/postbox/driver/drivertest"
	"github.com/postbox-go/postbox/driver/pgxv5"
	"github.com/postbox-go/postbox/internal/testenv/tcpproxy"
	"github.com/postbox-go/postbox/postboxtest"
)

// syncBuffer is a bytes.Buffer safe for the relay's goroutines.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

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
	logs := &syncBuffer{}
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
	rctx, stop := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- relay.Run(rctx) }()
	defer func() {
		stop()
		<-done
	}()
	enqueue := func(n int) {
		t.Helper()
		err := producer.InTx(ctx, func(ctx context.Context, tx pgx.Tx) error {
			for range n {
				if err := producer.Enqueue(ctx, tx, postbox.Message{Topic: "orders", Type: "order.created", Payload: []byte(`{}`)}); err != nil {
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

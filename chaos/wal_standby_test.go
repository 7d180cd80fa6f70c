package chaos

import (
	"context"
	"fmt"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/postbox-go/postbox"
	"github.com/postbox-go/postbox/driver/pgxv5/wal"
)

// TestWALStandby: a second WAL relay on a slot another relay reads is a standby: it says so once, at info level,
// counts no error and logs no failure however often it tries, and takes over when the first relay stops.
func TestWALStandby(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), deadline())
	defer cancel()
	cluster := ownCluster(ctx, t, walSettings...)
	w := newWorld(t, "walstandby", worldOptions{db: cluster.URL("chaos"), wal: true})
	// As docs/WAL.md asks, so that the relays' only warning would be the standby's, if it warned.
	if _, err := w.pool.Exec(ctx, "REVOKE EXECUTE ON FUNCTION pg_logical_emit_message(boolean,text,bytea) FROM PUBLIC;"+
		" REVOKE EXECUTE ON FUNCTION pg_logical_emit_message(boolean,text,text) FROM PUBLIC"); err != nil {
		t.Fatal(err)
	}
	nothing := postbox.PublisherFunc(func(context.Context, []postbox.Record) error { return nil })
	newRelay := func(log *slog.Logger) *wal.Relay {
		r, err := wal.NewRelay(w.pool, w.client, nothing, &wal.RelayConfig{Logger: log, ErrorBackoffMax: 200 * time.Millisecond, Secret: walSecret})
		if err != nil {
			t.Fatal(err)
		}
		return r
	}
	await := func(what string, cond func() bool) {
		t.Helper()
		for !cond() {
			if ctx.Err() != nil {
				t.Fatalf("%s did not happen", what)
			}
			wait(ctx, 20*time.Millisecond)
		}
	}

	active := newRelay(w.log)
	activeCtx, stopActive := context.WithCancel(ctx)
	activeDone := make(chan struct{})
	go func() {
		defer close(activeDone)
		_ = active.Run(activeCtx)
	}()
	defer func() { stopActive(); <-activeDone }()
	await("the first relay streaming", func() bool { return active.Stats().Streaming })

	logs := NewTail(100)
	standby := newRelay(slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelInfo})))
	standbyCtx, stopStandby := context.WithCancel(ctx)
	standbyDone := make(chan struct{})
	go func() {
		defer close(standbyDone)
		_ = standby.Run(standbyCtx)
	}()
	defer func() { stopStandby(); <-standbyDone }()
	await("the standby's line", func() bool { return strings.Contains(logs.String(), "WAL relay on standby") })
	// Several attempts at the 200ms pace: still one line, and no error counted.
	wait(ctx, 2*time.Second)
	text := logs.String()
	if n := strings.Count(text, "WAL relay on standby"); n != 1 || strings.Contains(text, "cannot stream") || strings.Contains(text, "level=WARN") {
		t.Errorf("a standby trying for 2s logged %d standby lines; want one, at info, and no failure:\n%s", n, text)
	}
	if s := standby.Stats(); s.Errors != 0 || s.Streaming {
		t.Errorf("standby stats %+v; want no error counted and not streaming", s)
	}

	stopActive()
	<-activeDone
	await("the standby taking over", func() bool { return standby.Stats().Streaming })
	if !strings.Contains(logs.String(), "WAL relay took over the slot") {
		t.Errorf("the standby took over without saying so:\n%s", logs)
	}
	fmt.Printf("%s: standby log:\n%s", t.Name(), logs)
}

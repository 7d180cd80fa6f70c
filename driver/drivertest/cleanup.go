package drivertest

import (
	"context"
	"errors"
	"log/slog"
	"testing"
	"time"

	"github.com/postbox-go/postbox"
	"github.com/postbox-go/postbox/driver"
	"github.com/postbox-go/postbox/driver/internal/sqlstore"
	"github.com/postbox-go/postbox/postboxtest"
)

func testCleanup[TTx any](t *testing.T, newDriver NewDriver[TTx]) {
	ctx := context.Background()
	drv := newDriver(t)

	t.Run("RetentionBatchesAndDead", func(t *testing.T) {
		clock := postboxtest.NewClock(time.Now().UTC().Truncate(time.Second))
		c := Client(t, drv, Tables(clock))
		enqueue(t, c, messages(25, "orders")...)
		enqueue(t, c, messages(3, "poison")...)
		rec := poisonRecorder()
		if n := drain(t, relay(t, c, rec, &postbox.RelayConfig{KeepPublished: true})); n != 28 {
			t.Fatalf("claimed %d, want 28", n)
		}
		// Pending messages as old as the rest: no retention ever removes them.
		old := messages(4, "later")
		for i := range old {
			old[i].AvailableAt = clock.Now().Add(365 * 24 * time.Hour)
		}
		enqueue(t, c, old...)

		cl, err := postbox.NewCleaner(c, &postbox.CleanupConfig{Retention: time.Hour, BatchSize: 10})
		if err != nil {
			t.Fatal(err)
		}
		if res, err := cl.RunOnce(ctx); err != nil || res != (postbox.CleanupResult{}) {
			t.Fatalf("cleanup within retention = %+v, %v; want nothing deleted", res, err)
		}
		clock.Advance(10 * 24 * time.Hour)
		res, err := cl.RunOnce(ctx)
		if err != nil || res.Published != 25 || res.Dead != 0 {
			t.Fatalf("cleanup past retention = %+v, %v; want the 25 published and no dead (DeadRetention unset)", res, err)
		}
		if res.Batches != 3 {
			t.Fatalf("25 rows deleted in %d batches; want 3 of at most 10", res.Batches)
		}
		if s := stats(t, c); s.Pending != 4 || s.Dead != 3 {
			t.Fatalf("after cleanup %+v; want the 4 pending and 3 dead kept", s)
		}

		withDead, err := postbox.NewCleaner(c, &postbox.CleanupConfig{Retention: time.Hour, DeadRetention: 24 * time.Hour, BatchSize: 2})
		if err != nil {
			t.Fatal(err)
		}
		res, err = withDead.RunOnce(ctx)
		if err != nil || res.Dead != 3 || res.Published != 0 || res.Batches != 2 {
			t.Fatalf("cleanup with DeadRetention = %+v, %v; want the 3 dead in 2 batches", res, err)
		}
		if s := stats(t, c); s.Pending != 4 || s.Dead != 0 {
			t.Fatalf("after dead cleanup %+v; want only the 4 pending", s)
		}
		// A message published just now is kept until its own retention passes.
		rec.Fail = nil
		enqueue(t, c, messages(2, "orders")...)
		if n := drain(t, relay(t, c, rec, &postbox.RelayConfig{KeepPublished: true})); n != 2 {
			t.Fatalf("claimed %d, want 2", n)
		}
		if res, err := withDead.RunOnce(ctx); err != nil || res.Published != 0 {
			t.Fatalf("cleanup of fresh messages = %+v, %v; want nothing deleted", res, err)
		}
		clock.Advance(2 * time.Hour)
		if res, err := withDead.RunOnce(ctx); err != nil || res.Published != 2 {
			t.Fatalf("cleanup two hours later = %+v, %v; want the 2", res, err)
		}
		if s := stats(t, c); s.Pending != 4 {
			t.Fatalf("%d pending after every cleanup, want 4", s.Pending)
		}
	})

	t.Run("OneInstanceAtATime", func(t *testing.T) {
		if !drv.Capabilities().SkipLocked {
			// SQLite has one writer: cleaners simply take turns, so there is no lock to hold.
			return
		}
		clock := postboxtest.NewClock(time.Now())
		c := Client(t, drv, Tables(clock))
		enqueue(t, c, messages(5, "orders")...)
		drain(t, relay(t, c, &postboxtest.Recorder{}, &postbox.RelayConfig{KeepPublished: true}))
		clock.Advance(postbox.DefaultRetention + time.Hour)

		// Another instance holds the table's cleanup lock.
		d, sess := session(t, drv)
		defer sess.Close()
		names := namesOf(c)
		if got, err := d.TryLock(ctx, sess, names, sqlstore.LockCleanup); err != nil || !got {
			t.Fatalf("TryLock = %v, %v", got, err)
		}
		cl, err := postbox.NewCleaner(c, nil)
		if err != nil {
			t.Fatal(err)
		}
		if res, err := cl.RunOnce(ctx); !errors.Is(err, postbox.ErrLocked) || res.Published != 0 {
			t.Fatalf("cleanup while another instance cleans = %+v, %v; want ErrLocked and nothing deleted", res, err)
		}
		if err := d.Unlock(ctx, sess, names, sqlstore.LockCleanup); err != nil {
			t.Fatal(err)
		}
		if res, err := cl.RunOnce(ctx); err != nil || res.Published != 5 {
			t.Fatalf("cleanup once the lock is free = %+v, %v; want the 5", res, err)
		}
	})

	t.Run("RunOnSchedule", func(t *testing.T) {
		clock := postboxtest.NewClock(time.Now())
		c := Client(t, drv, Tables(clock))
		enqueue(t, c, messages(7, "orders")...)
		drain(t, relay(t, c, &postboxtest.Recorder{}, &postbox.RelayConfig{KeepPublished: true}))
		clock.Advance(postbox.DefaultRetention + time.Hour)
		logs := make(chan slog.Record, 16)
		cl, err := postbox.NewCleaner(c, &postbox.CleanupConfig{Interval: 10 * time.Millisecond, Logger: slog.New(chanHandler(logs))})
		if err != nil {
			t.Fatal(err)
		}
		runCtx, cancel := context.WithCancel(ctx)
		done := make(chan error, 1)
		go func() { done <- cl.Run(runCtx) }()
		select {
		case r := <-logs:
			if r.Message != "cleaned up" || attr(r, "published") != "7" {
				t.Errorf("first log of a scheduled cleaner: %q published=%s; want the 7 cleaned up", r.Message, attr(r, "published"))
			}
		case <-time.After(30 * time.Second):
			t.Error("the scheduled cleaner did not clean within 30s")
		}
		cancel()
		if err := <-done; err != nil {
			t.Fatalf("Run returned %v after cancel, want nil", err)
		}
	})
}

// cleaner returns a Cleaner of c with cfg, failing the test when cfg is refused.
func cleaner[TTx any](t *testing.T, c *postbox.Client[TTx], cfg *postbox.CleanupConfig) *postbox.Cleaner {
	t.Helper()
	cl, err := postbox.NewCleaner(c, cfg)
	if err != nil {
		t.Fatal(err)
	}
	return cl
}

// storeOf returns drv's store of c's tables.
func storeOf[TTx any](t *testing.T, drv driver.Driver[TTx], c *postbox.Client[TTx]) driver.Store[TTx] {
	t.Helper()
	s, err := drv.Store(namesOf(c))
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// namesOf returns the identifiers of c's tables.
func namesOf[TTx any](c *postbox.Client[TTx]) driver.Names {
	cfg := c.Config()
	return driver.Names{Schema: cfg.Schema, Outbox: cfg.Table, Inbox: cfg.InboxTable, Partitioned: cfg.Partitioned, Ordered: cfg.Ordered}
}

// chanHandler is a slog.Handler sending every record at Info or above to ch; it drops records ch has no room for.
type chanHandler chan slog.Record

func (h chanHandler) Enabled(_ context.Context, l slog.Level) bool { return l >= slog.LevelInfo }
func (h chanHandler) WithAttrs([]slog.Attr) slog.Handler           { return h }
func (h chanHandler) WithGroup(string) slog.Handler                { return h }
func (h chanHandler) Handle(_ context.Context, r slog.Record) error {
	select {
	case h <- r.Clone():
	default:
	}
	return nil
}

// attr returns the value of a record's attribute as text, or "" when it has none of that name.
func attr(r slog.Record, key string) string {
	out := ""
	r.Attrs(func(a slog.Attr) bool {
		if a.Key == key {
			out = a.Value.String()
			return false
		}
		return true
	})
	return out
}

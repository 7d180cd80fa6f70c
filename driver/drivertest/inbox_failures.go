package drivertest

import (
	"context"
	"errors"
	"maps"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/postbox-go/postbox"
	"github.com/postbox-go/postbox/driver"
	"github.com/postbox-go/postbox/postboxtest"
)

// failing returns a handler that writes its business row, counts its calls, and fails with fail.
func (e *inboxEnv[TTx]) failing(consumer string, fail error, calls *int) postbox.Handler[TTx] {
	var mu sync.Mutex
	return func(ctx context.Context, tx TTx, m postbox.Message) ([]postbox.Message, error) {
		mu.Lock()
		*calls++
		mu.Unlock()
		if err := e.write(ctx, tx, consumer, m); err != nil {
			return nil, err
		}
		return []postbox.Message{{Topic: "invoices", Type: "invoice.created"}}, fail
	}
}

func (e *inboxEnv[TTx]) failureCounts() int64 {
	return e.count("SELECT count(*) FROM " + driver.Derived(e.cfg.InboxTable, "_failures"))
}

// testInboxFailurePolicy: after MaxFailures failed deliveries the message is recorded as failed, acked,
// dead-lettered once, and never reaches the handler again.
func testInboxFailurePolicy[TTx any](t *testing.T, newDriver NewDriver[TTx], opts Options[TTx]) {
	ctx := context.Background()
	e := newInboxEnv(t, newDriver(t), opts, nil)
	declined := errors.New("card declined\nby the bank")

	t.Run("GivesUpAfterMaxFailures", func(t *testing.T) {
		cons := e.consumer("billing", &postbox.ConsumerConfig{MaxFailures: 3, DeadLetterTopic: "billing.dead"})
		calls := 0
		h := e.failing("billing", declined, &calls)
		m := delivery()
		m.Headers = map[string]string{"x-tenant": "acme"}
		for i := 1; i <= 2; i++ {
			res, err := cons.Process(ctx, m, h)
			if !errors.Is(err, declined) || res.Outcome != postbox.Retry || res.Failures != i {
				t.Fatalf("failed delivery %d = %+v, %v; want the handler's error, Retry and %d failures counted", i, res, err, i)
			}
		}
		res, err := cons.Process(ctx, m, h)
		if err != nil || res.Outcome != postbox.Failed || !res.Outcome.Ack() || !errors.Is(res.Err, declined) || res.Failures != 3 {
			t.Fatalf("third failed delivery = %+v, %v; want Failed (ack) with no error, the handler's error in Result.Err and 3 failures", res, err)
		}
		if len(res.Enqueued) != 1 || res.Enqueued[0].Topic != "billing.dead" {
			t.Fatalf("Result.Enqueued = %+v; want the dead letter", res.Enqueued)
		}
		res, err = cons.Process(ctx, m, h)
		expectOutcome(t, "delivery after the message was recorded as failed", res, err, postbox.Duplicate)
		if calls != 3 || e.effects(m) != 0 {
			t.Fatalf("handler called %d times, %d business rows; want 3 calls, all rolled back", calls, e.effects(m))
		}
		rec := &postboxtest.Recorder{}
		if n := drain(t, relay(t, e.c, rec, nil)); n != 1 {
			t.Fatalf("published %d messages; want only the dead letter (the failed deliveries' events rolled back)", n)
		}
		dl := rec.Records()[0]
		wantHeaders := map[string]string{"x-tenant": "acme", "postbox-consumer": "billing", "postbox-message-id": m.ID,
			"postbox-failures": "3", "postbox-error": "card declined by the bank"}
		if dl.ID == m.ID || dl.Key != m.Key || dl.Type != m.Type || string(dl.Payload) != string(m.Payload) || !maps.Equal(dl.Headers, wantHeaders) {
			t.Fatalf("dead letter %+v; want a new ID, the original's key, type and payload, and headers %v", dl.Message, wantHeaders)
		}
		if n := e.failureCounts(); n != 0 {
			t.Fatalf("%d failure counts left; the count moves onto the failed claim", n)
		}
		// The failure is this consumer's: another one processes the message.
		res, err = postbox.Process(ctx, e.c, "audit", m, e.handler("audit"))
		expectOutcome(t, "another consumer", res, err, postbox.Processed)
	})

	t.Run("DeadLetterOfAForeignMessage", func(t *testing.T) {
		// A message from another producer may carry what Enqueue refuses; recording its failure must not fail.
		cons := e.consumer("intake", &postbox.ConsumerConfig{MaxFailures: 1, DeadLetterTopic: "intake.dead"})
		calls := 0
		m := postbox.Message{ID: "external-42", Topic: "orders", Key: "k\x00", Payload: []byte("raw"),
			Headers: map[string]string{"ce-id": "external-42", "bad name": "v", "x-ok": "kept"}}
		res, err := cons.Process(ctx, m, e.failing("intake", declined, &calls))
		if err != nil || res.Outcome != postbox.Failed || len(res.Enqueued) != 1 {
			t.Fatalf("failed delivery = %+v, %v; want Failed with a dead letter", res, err)
		}
		dl := res.Enqueued[0]
		if dl.Type != "postbox.inbox.failed" || dl.Key != "" || dl.Headers["x-ok"] != "kept" || len(dl.Headers) != 5 ||
			dl.Headers["postbox-message-id"] != "external-42" {
			t.Fatalf("dead letter %+v; want the fallback type, no key, the valid header and postbox's four", dl)
		}
		drain(t, relay(t, e.c, &postboxtest.Recorder{}, nil))
	})

	t.Run("SuccessAfterFailures", func(t *testing.T) {
		cons := e.consumer("billing", &postbox.ConsumerConfig{MaxFailures: 3})
		calls := 0
		m := delivery()
		for i := 1; i <= 2; i++ {
			if _, err := cons.Process(ctx, m, e.failing("billing", declined, &calls)); !errors.Is(err, declined) {
				t.Fatalf("failed delivery %d: %v", i, err)
			}
		}
		res, err := cons.Process(ctx, m, e.handler("billing"))
		expectOutcome(t, "third delivery, succeeding", res, err, postbox.Processed)
		res, err = cons.Process(ctx, m, e.failing("billing", declined, &calls))
		expectOutcome(t, "redelivery", res, err, postbox.Duplicate)
		if n := e.effects(m); n != 1 {
			t.Fatalf("%d business rows; want 1", n)
		}
	})

	t.Run("PermanentFailsAtOnce", func(t *testing.T) {
		cons := e.consumer("billing", &postbox.ConsumerConfig{MaxFailures: 10})
		calls := 0
		m := delivery()
		res, err := cons.Process(ctx, m, e.failing("billing", postbox.Permanent(declined), &calls))
		if err != nil || res.Outcome != postbox.Failed || res.Failures != 1 {
			t.Fatalf("delivery failing permanently = %+v, %v; want Failed at the first failure", res, err)
		}
		res, err = cons.Process(ctx, m, e.handler("billing"))
		expectOutcome(t, "redelivery", res, err, postbox.Duplicate)
	})

	t.Run("ShutdownIsNotAFailure", func(t *testing.T) {
		cons := e.consumer("billing", &postbox.ConsumerConfig{MaxFailures: 1})
		m := delivery()
		cctx, cancel := context.WithCancel(ctx)
		res, err := cons.Process(cctx, m, func(ctx context.Context, tx TTx, m postbox.Message) ([]postbox.Message, error) {
			cancel()
			return nil, ctx.Err()
		})
		if !errors.Is(err, context.Canceled) || res.Outcome != postbox.Retry {
			t.Fatalf("delivery cut short by shutdown = %+v, %v; want context.Canceled and Retry, not counted", res, err)
		}
		res, err = cons.Process(ctx, m, e.handler("billing"))
		expectOutcome(t, "redelivery after the restart", res, err, postbox.Processed)
	})

	t.Run("ConcurrentFailuresDeadLetterOnce", func(t *testing.T) {
		cons := e.consumer("ledger", &postbox.ConsumerConfig{MaxFailures: 3, DeadLetterTopic: "ledger.dead"})
		calls := 0
		h := e.failing("ledger", declined, &calls)
		m := delivery()
		var mu sync.Mutex
		outcomes := map[postbox.Outcome]int{}
		var wg sync.WaitGroup
		for range 8 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for range 3 {
					res, err := cons.Process(ctx, m, h)
					if err != nil && !errors.Is(err, declined) {
						t.Errorf("delivery: %v", err)
					}
					mu.Lock()
					outcomes[res.Outcome]++
					mu.Unlock()
				}
			}()
		}
		wg.Wait()
		if outcomes[postbox.Failed] != 1 || outcomes[postbox.Processed] != 0 {
			t.Fatalf("outcomes %v; want exactly one Failed", outcomes)
		}
		rec := &postboxtest.Recorder{}
		drain(t, relay(t, e.c, rec, nil))
		dead := 0
		for _, r := range rec.Records() {
			if r.Topic == "ledger.dead" {
				dead++
				if r.Headers["postbox-failures"] == "" {
					t.Fatalf("dead letter without its failure count: %v", r.Headers)
				}
				if n, _ := strconv.Atoi(r.Headers["postbox-failures"]); n < 3 {
					t.Fatalf("dead letter after %d failures; want at least 3", n)
				}
			}
		}
		if dead != 1 {
			t.Fatalf("%d dead letters; want 1", dead)
		}
	})
}

// testInboxDefaultPolicy: without a failure policy every failure is rolled back, returned and not counted.
func testInboxDefaultPolicy[TTx any](t *testing.T, newDriver NewDriver[TTx], opts Options[TTx]) {
	ctx := context.Background()
	e := newInboxEnv(t, newDriver(t), opts, nil)
	declined := errors.New("declined")
	calls := 0
	m := delivery()
	for i := range 5 {
		res, err := postbox.Process(ctx, e.c, "billing", m, e.failing("billing", declined, &calls))
		if !errors.Is(err, declined) || res.Outcome != postbox.Retry || res.Failures != 0 {
			t.Fatalf("failed delivery %d = %+v, %v; want the error, Retry and nothing counted", i, res, err)
		}
	}
	if n := e.failureCounts(); n != 0 {
		t.Fatalf("%d failure counts written without a failure policy; want none", n)
	}
	e.processOnce(t, "sixth delivery, succeeding", m)
}

// testInboxCleanup: a Cleaner deletes the claims and failure counts past the retention, and only those.
func testInboxCleanup[TTx any](t *testing.T, newDriver NewDriver[TTx], opts Options[TTx]) {
	ctx := context.Background()
	clock := postboxtest.NewClock(time.Now())
	e := newInboxEnv(t, newDriver(t), opts, clock)
	cons := e.consumer("billing", &postbox.ConsumerConfig{MaxFailures: 3})
	declined := errors.New("declined")
	calls := 0
	process := func(m postbox.Message, h postbox.Handler[TTx]) postbox.Result {
		t.Helper()
		res, err := cons.Process(ctx, m, h)
		if err != nil && !errors.Is(err, declined) {
			t.Fatal(err)
		}
		return res
	}
	old := make([]postbox.Message, 25)
	for i := range old {
		old[i] = delivery()
		process(old[i], e.handler("billing"))
	}
	oldFailing, oldFailed := delivery(), delivery()
	process(oldFailing, e.failing("billing", declined, &calls))
	process(oldFailed, e.failing("billing", postbox.Permanent(declined), &calls))

	const retention = 7 * 24 * time.Hour
	clock.Advance(retention + time.Hour)
	fresh, freshFailing := delivery(), delivery()
	process(fresh, e.handler("billing"))
	process(freshFailing, e.failing("billing", declined, &calls))

	kept, err := cleaner(t, e.c, &postbox.CleanupConfig{InboxRetention: retention, KeepInbox: true}).RunOnce(ctx)
	if err != nil || kept.Inbox != 0 || e.count("SELECT count(*) FROM "+e.cfg.InboxTable) != 27 {
		t.Fatalf("cleanup with KeepInbox = %+v, %v; want the inbox's 27 claims left alone", kept, err)
	}
	cl := cleaner(t, e.c, &postbox.CleanupConfig{InboxRetention: retention, BatchSize: 10})
	res, err := cl.RunOnce(ctx)
	if err != nil || res.Inbox != 27 {
		t.Fatalf("cleanup = %+v, %v; want the 26 old claims and the old failure count deleted (27 rows)", res, err)
	}
	if claims, counts := e.count("SELECT count(*) FROM "+e.cfg.InboxTable), e.failureCounts(); claims != 1 || counts != 1 {
		t.Fatalf("%d claims and %d failure counts left; want the fresh ones only", claims, counts)
	}
	if res := process(fresh, e.handler("billing")); res.Outcome != postbox.Duplicate {
		t.Fatalf("a claim inside the retention: redelivery %v; want Duplicate", res.Outcome)
	}
	// Past the retention a redelivery looks new: why the retention must exceed the broker's redelivery horizon.
	if res := process(old[0], e.handler("billing")); res.Outcome != postbox.Processed {
		t.Fatalf("a message whose claim was cleaned up: redelivery %v; want Processed", res.Outcome)
	}
	if res := process(freshFailing, e.failing("billing", declined, &calls)); res.Failures != 2 {
		t.Fatalf("a failure count inside the retention restarted: %d failures; want 2", res.Failures)
	}
	if res := process(oldFailing, e.failing("billing", declined, &calls)); res.Failures != 1 {
		t.Fatalf("a failure count past the retention was kept: %d failures; want the count to restart at 1", res.Failures)
	}
	if res, err := cl.RunOnce(ctx); err != nil || res.Inbox != 0 {
		t.Fatalf("second cleanup = %+v, %v; want nothing left to delete", res, err)
	}
	for _, cfg := range []postbox.CleanupConfig{{InboxRetention: -time.Hour}, {BatchSize: -1}} {
		if _, err := postbox.NewCleaner(e.c, &cfg); !errors.Is(err, postbox.ErrInvalidConfig) {
			t.Errorf("NewCleaner(%+v): %v; want ErrInvalidConfig", cfg, err)
		}
	}
}

// testInboxCleanupRunner: a Cleaner running on its schedule deletes expired claims and stops with its context.
func testInboxCleanupRunner[TTx any](t *testing.T, newDriver NewDriver[TTx], opts Options[TTx]) {
	ctx := context.Background()
	clock := postboxtest.NewClock(time.Now())
	e := newInboxEnv(t, newDriver(t), opts, clock)
	for range 3 {
		if _, err := postbox.Process(ctx, e.c, "billing", delivery(), e.handler("billing")); err != nil {
			t.Fatal(err)
		}
	}
	clock.Advance(postbox.DefaultInboxRetention + time.Minute)
	fresh := delivery()
	if _, err := postbox.Process(ctx, e.c, "billing", fresh, e.handler("billing")); err != nil {
		t.Fatal(err)
	}
	cl := cleaner(t, e.c, &postbox.CleanupConfig{Interval: 10 * time.Millisecond})
	rctx, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- cl.Run(rctx) }()
	deadline := time.Now().Add(time.Minute) // a guard against hanging, not a measurement
	for e.count("SELECT count(*) FROM "+e.cfg.InboxTable) != 1 {
		if time.Now().After(deadline) {
			cancel()
			<-done
			t.Fatal("the cleaner did not delete the expired claims")
		}
		time.Sleep(10 * time.Millisecond)
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatalf("Run returned %v after its context was cancelled; want nil", err)
	}
	res, err := postbox.Process(ctx, e.c, "billing", fresh, e.handler("billing"))
	expectOutcome(t, "the claim inside the retention", res, err, postbox.Duplicate)
}

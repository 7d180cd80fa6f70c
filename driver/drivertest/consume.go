package drivertest

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/postbox-go/postbox"
	"github.com/postbox-go/postbox/broker"
	"github.com/postbox-go/postbox/postboxtest"
)

// testInboxConsume: broker.Consume processes each delivery through the inbox and settles it by its outcome: a
// processed message and its duplicate are acked, a failed delivery nacked and then processed, a message that can
// never be processed rejected.
func testInboxConsume[TTx any](t *testing.T, newDriver NewDriver[TTx], opts Options[TTx]) {
	e := newInboxEnv(t, newDriver(t), opts, nil)
	cons := e.consumer("router", nil)
	m, flaky, bad := delivery(), delivery(), delivery()
	bad.ID = strings.Repeat("x", postbox.MaxMessageIDLen+1)
	tries := 0
	h := func(ctx context.Context, tx TTx, d postbox.Message) ([]postbox.Message, error) {
		if d.ID == flaky.ID {
			if tries++; tries == 1 {
				return nil, errors.New("the ledger is busy")
			}
		}
		return e.handler("router")(ctx, tx, d)
	}
	sub := &postboxtest.Subscriber{}
	for _, d := range []postbox.Message{m, m, flaky, bad} {
		sub.Send(broker.Event{Message: d, Source: "/orders"})
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan error, 1)
	go func() {
		done <- broker.Consume(ctx, sub, cons, h, &broker.ConsumeConfig{Logger: slog.New(slog.DiscardHandler),
			NackDelay: func(attempt int) time.Duration { return time.Duration(attempt) * time.Millisecond }})
	}()
	if !sub.WaitSettled(ctx, 5, time.Minute) {
		t.Fatalf("settled %v; want 5 settlements", sub.Settlements())
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatalf("Consume returned %v after ctx was cancelled; want nil", err)
	}
	want := fmt.Sprint([]string{"ack " + m.ID, "ack " + m.ID, "nack " + flaky.ID + " after 1ms", "reject " + bad.ID, "ack " + flaky.ID})
	if got := fmt.Sprint(sub.Settlements()); got != want {
		t.Fatalf("settlements %s; want %s", got, want)
	}
	if e.effects(m) != 1 || e.effects(flaky) != 1 {
		t.Fatalf("business rows %d and %d; want one per message", e.effects(m), e.effects(flaky))
	}
	if s := stats(t, e.c); s.Pending != 2 {
		t.Fatalf("%d events pending; want the 2 the handler returned", s.Pending)
	}
}

// testInboxRefused: a delivery that no redelivery could ever process (an invalid message ID, a message over the
// consumer's caps, a permanent error with no failure policy) is Rejected with a Permanent error, before anything
// is written, so that it is not redelivered forever.
func testInboxRefused[TTx any](t *testing.T, newDriver NewDriver[TTx], opts Options[TTx]) {
	ctx := context.Background()
	e := newInboxEnv(t, newDriver(t), opts, nil)
	capped := e.consumer("capped", &postbox.ConsumerConfig{MaxKeyBytes: 8, MaxPayloadBytes: 16, MaxHeaders: 2})
	defaults := e.consumer("defaults", &postbox.ConsumerConfig{MaxFailures: 3})
	with := func(change func(*postbox.Message)) postbox.Message {
		m := delivery()
		change(&m)
		return m
	}
	calls := 0
	h := func(ctx context.Context, tx TTx, m postbox.Message) ([]postbox.Message, error) {
		calls++
		return nil, nil
	}
	for name, tc := range map[string]struct {
		c    *postbox.Consumer[TTx]
		m    postbox.Message
		want string
	}{
		"ID over 255 bytes":    {defaults, with(func(m *postbox.Message) { m.ID = strings.Repeat("x", postbox.MaxMessageIDLen+1) }), "message ID is 256 bytes"},
		"ID with a control":    {defaults, with(func(m *postbox.Message) { m.ID = "order-1\x1b[2J" }), "control character"},
		"ID not UTF-8":         {defaults, with(func(m *postbox.Message) { m.ID = "order-\xff" }), "not valid UTF-8"},
		"key over the default": {defaults, with(func(m *postbox.Message) { m.Key = strings.Repeat("k", postbox.DefaultConsumerMaxKeyBytes+1) }), "MaxKeyBytes"},
		"key over the cap":     {capped, with(func(m *postbox.Message) { m.Key = "order-123" }), "key of 9 bytes"},
		"payload over the cap": {capped, with(func(m *postbox.Message) { m.Payload = []byte(`{"order":"12345"}`) }), "payload of 17 bytes"},
		"too many headers":     {capped, with(func(m *postbox.Message) { m.Headers = map[string]string{"a": "1", "b": "2", "c": "3"} }), "3 headers"},
	} {
		res, err := tc.c.Process(ctx, tc.m, h)
		if res.Outcome != postbox.Rejected || !postbox.IsPermanent(err) || !errors.Is(err, postbox.ErrInvalidMessage) ||
			!strings.Contains(err.Error(), tc.want) || res.Err == nil {
			t.Errorf("%s: %v, %v; want Rejected with a permanent ErrInvalidMessage saying %q", name, res.Outcome, err, tc.want)
		}
	}
	if calls != 0 {
		t.Fatalf("the handler ran %d times for refused deliveries", calls)
	}
	if n := e.count("SELECT count(*) FROM " + e.cfg.InboxTable); n != 0 {
		t.Fatalf("%d inbox claims for refused deliveries; want none", n)
	}
	if n := e.failureCounts(); n != 0 {
		t.Fatalf("%d failure counts for refused deliveries; want none", n)
	}
	// At the caps exactly, a message passes.
	res, err := capped.Process(ctx, with(func(m *postbox.Message) {
		m.Key, m.Payload, m.Headers = "order-12", []byte(`{"order":"1234"}`), map[string]string{"a": "1", "b": "2"}
	}), h)
	expectOutcome(t, "a message at the caps", res, err, postbox.Processed)

	// Without a failure policy a permanent handler error rejects the message rather than having it redelivered.
	m := delivery()
	declined := errors.New("declined")
	res, err = postbox.Process(ctx, e.c, "billing", m, e.failing("billing", postbox.Permanent(declined), &calls))
	if res.Outcome != postbox.Rejected || !errors.Is(err, declined) || !postbox.IsPermanent(err) || !errors.Is(res.Err, declined) {
		t.Fatalf("permanent handler error without a failure policy: %+v, %v; want Rejected with the error", res, err)
	}
	if e.effects(m) != 0 {
		t.Fatalf("the rejected delivery's writes committed")
	}
}

// testInboxScopeBySource: by default a producer reusing another's message ID has the second message skipped as a
// duplicate; with ScopeBySource each source's message is processed once.
func testInboxScopeBySource[TTx any](t *testing.T, newDriver NewDriver[TTx], opts Options[TTx]) {
	ctx := context.Background()
	e := newInboxEnv(t, newDriver(t), opts, nil)
	plain := e.consumer("plain", nil)
	scoped := e.consumer("scoped", &postbox.ConsumerConfig{ScopeBySource: true})
	rows := func(consumer string) int64 {
		return e.count("SELECT count(*) FROM " + e.biz + " WHERE consumer = '" + consumer + "'")
	}
	m := delivery()
	res, err := plain.ProcessFrom(ctx, "/intruder", m, e.handler("plain"))
	expectOutcome(t, "unscoped, the intruder's message", res, err, postbox.Processed)
	res, err = plain.ProcessFrom(ctx, "/billing", m, e.handler("plain"))
	expectOutcome(t, "unscoped, the genuine message with the same ID", res, err, postbox.Duplicate)

	for i, tc := range []struct {
		source string
		want   postbox.Outcome
	}{{"/intruder", postbox.Processed}, {"/billing", postbox.Processed}, {"/billing", postbox.Duplicate}, {"https://shop.example/orders", postbox.Processed}} {
		res, err := scoped.ProcessFrom(ctx, tc.source, m, e.handler("scoped"))
		expectOutcome(t, fmt.Sprintf("scoped delivery %d from %s", i, tc.source), res, err, tc.want)
	}
	if rows("plain") != 1 || rows("scoped") != 3 {
		t.Fatalf("business rows: %d unscoped, %d scoped; want 1 and one per source (3)", rows("plain"), rows("scoped"))
	}
	for source, want := range map[string]string{"": "has no source", "/a b": "contains a space", "/" + strings.Repeat("s", postbox.MaxMessageIDLen): "bytes"} {
		res, err := scoped.ProcessFrom(ctx, source, delivery(), e.handler("scoped"))
		if res.Outcome != postbox.Rejected || !postbox.IsPermanent(err) || !strings.Contains(err.Error(), want) {
			t.Errorf("scoped delivery from %.20q: %v, %v; want Rejected saying %q", source, res.Outcome, err, want)
		}
	}
	e.inTx(func(ctx context.Context, tx TTx) error {
		if _, err := scoped.Claim(ctx, tx, postbox.NewID()); !errors.Is(err, postbox.ErrInvalidMessage) || !strings.Contains(err.Error(), "ProcessFrom") {
			t.Errorf("Claim on a consumer scoped by source: %v; want an error pointing to ProcessFrom", err)
		}
		return nil
	})
}

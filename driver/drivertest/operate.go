package drivertest

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/postbox-go/postbox"
	"github.com/postbox-go/postbox/postboxtest"
)

// testOperator covers what an operator's tools call beyond Stats, ListDead, RetryDead and PurgeDead on their
// topic: richer dead-letter filters and their counts, look-ups, replay, resending, pausing, the overview and the
// inbox view.
func testOperator[TTx any](t *testing.T, newDriver NewDriver[TTx], opts Options[TTx]) {
	t.Run("DeadFilters", func(t *testing.T) { testDeadFilters(t, newDriver) })
	t.Run("Find", func(t *testing.T) { testFind(t, newDriver) })
	t.Run("Replay", func(t *testing.T) { testReplay(t, newDriver) })
	t.Run("ResendEdited", func(t *testing.T) { testResendEdited(t, newDriver) })
	t.Run("PauseTopic", func(t *testing.T) { testPauseTopic(t, newDriver) })
	t.Run("Overview", func(t *testing.T) { testOverview(t, newDriver, opts) })
	t.Run("OverviewReadyScheduledRecent", func(t *testing.T) { testOverviewSplit(t, newDriver) })
	t.Run("InboxView", func(t *testing.T) { testInboxView(t, newDriver) })
}

// deadSet makes dead messages of several topics, types, keys and errors, a minute apart in failure time, and
// returns them in ID order.
func deadSet[TTx any](t *testing.T, c *postbox.Client[TTx], clock *postboxtest.Clock) []postbox.Record {
	t.Helper()
	specs := []struct{ topic, typ, key, err string }{
		{"orders", "order.created", "k1", "broker said: 50% off_sale refused"},
		{"orders", "order.paid", "k2", "timeout after 5s"},
		{"orders", "order.created", "k1", "Timeout after 5s"},
		{"invoices", "invoice.due", "k1", "schema mismatch"},
		{"invoices", "invoice.due", "k3", "50 percent refused"},
	}
	errs := map[string]string{}
	for _, s := range specs {
		m := postbox.Message{Topic: s.topic, Type: s.typ, Key: s.key, Payload: []byte(`{}`)}
		enqueue(t, c, m)
		clock.Advance(time.Minute)
	}
	dead, err := c.ListDead(context.Background(), postbox.DeadFilter{All: true})
	if err != nil || len(dead) != 0 {
		t.Fatalf("ListDead before failing = %v, %v", dead, err)
	}
	i := 0
	rec := &postboxtest.Recorder{Fail: func(r postbox.Record) error {
		if _, ok := errs[r.ID]; !ok {
			errs[r.ID] = specs[i].err
			i++
		}
		return postbox.Permanent(errors.New(errs[r.ID]))
	}}
	r := relay(t, c, rec, &postbox.RelayConfig{BatchSize: 1})
	for range specs {
		if _, err := r.RunOnce(context.Background()); err != nil {
			t.Fatal(err)
		}
		clock.Advance(time.Minute) // each failure a minute after the one before
	}
	dead, err = c.ListDead(context.Background(), postbox.DeadFilter{All: true})
	if err != nil || len(dead) != len(specs) {
		t.Fatalf("ListDead(all) = %d records, %v; want %d", len(dead), err, len(specs))
	}
	return dead
}

func deadIDs(recs []postbox.Record) []string {
	out := make([]string, len(recs))
	for i, r := range recs {
		out[i] = r.ID
	}
	return out
}

func testDeadFilters[TTx any](t *testing.T, newDriver NewDriver[TTx]) {
	ctx := context.Background()
	clock := postboxtest.NewClock(time.Now().UTC().Truncate(time.Second))
	c := Client(t, newDriver(t), Tables(clock))
	dead := deadSet(t, c, clock)
	all := deadIDs(dead)

	list := func(f postbox.DeadFilter) []string {
		t.Helper()
		recs, err := c.ListDead(ctx, f)
		if err != nil {
			t.Fatalf("ListDead(%s) = %v", f, err)
		}
		return deadIDs(recs)
	}
	count := func(f postbox.DeadFilter, limit int64) postbox.Count {
		t.Helper()
		n, err := c.CountDead(ctx, f, limit)
		if err != nil {
			t.Fatalf("CountDead(%s) = %v", f, err)
		}
		return n
	}
	for _, tc := range []struct {
		name string
		f    postbox.DeadFilter
		want []string
	}{
		{"Type", postbox.DeadFilter{Type: "order.created"}, []string{all[0], all[2]}},
		{"Key", postbox.DeadFilter{Key: "k1"}, []string{all[0], all[2], all[3]}},
		{"TopicAndKey", postbox.DeadFilter{Topic: "invoices", Key: "k1"}, []string{all[3]}},
		{"ErrorIsCaseSensitive", postbox.DeadFilter{ErrorContains: "timeout"}, []string{all[1]}},
		{"ErrorWildcardsAreLiteral", postbox.DeadFilter{ErrorContains: "50% off_"}, []string{all[0]}},
		{"ErrorPercentAlone", postbox.DeadFilter{ErrorContains: "%"}, []string{all[0]}},
		{"FailedRange", postbox.DeadFilter{FailedFrom: dead[1].AvailableAt, FailedBefore: dead[3].AvailableAt}, []string{all[1], all[2]}},
		{"FailedFrom", postbox.DeadFilter{FailedFrom: dead[4].AvailableAt}, []string{all[4]}},
		{"IDsAndType", postbox.DeadFilter{IDs: []string{all[0], all[1]}, Type: "order.paid"}, []string{all[1]}},
		{"NoMatch", postbox.DeadFilter{Type: "nothing.such"}, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := list(tc.f); !slices.Equal(got, tc.want) {
				t.Fatalf("ListDead(%s) = %v, want %v", tc.f, got, tc.want)
			}
			if n := count(tc.f, 0); n.N != int64(len(tc.want)) || n.More {
				t.Fatalf("CountDead(%s) = %v, want %d", tc.f, n, len(tc.want))
			}
		})
	}

	t.Run("Pages", func(t *testing.T) {
		var got []string
		f := postbox.DeadFilter{All: true, Limit: 2}
		for page := 0; page < 5; page++ {
			ids := list(f)
			got = append(got, ids...)
			if len(ids) < f.Limit {
				break
			}
			f.After = ids[len(ids)-1]
		}
		if !slices.Equal(got, all) {
			t.Fatalf("oldest-first pages = %v, want %v", got, all)
		}
		got = nil
		f = postbox.DeadFilter{Topic: "orders", Newest: true, Limit: 2}
		for page := 0; page < 5; page++ {
			ids := list(f)
			got = append(got, ids...)
			if len(ids) < f.Limit {
				break
			}
			f.After = ids[len(ids)-1]
		}
		if want := []string{all[2], all[1], all[0]}; !slices.Equal(got, want) {
			t.Fatalf("newest-first pages of orders = %v, want %v", got, want)
		}
	})

	t.Run("CountStopsAtLimit", func(t *testing.T) {
		if n := count(postbox.DeadFilter{All: true}, 3); n.N != 3 || !n.More || n.String() != "more than 3" {
			t.Fatalf("CountDead(all, limit 3) = %+v (%s), want more than 3", n, n)
		}
		if n := count(postbox.DeadFilter{All: true}, 5); n.N != 5 || n.More {
			t.Fatalf("CountDead(all, limit 5) = %+v, want exactly 5", n)
		}
	})

	t.Run("Refused", func(t *testing.T) {
		for _, f := range []postbox.DeadFilter{
			{After: all[0], Newest: true, Limit: 3},
			{All: true, After: "not-a-uuid"},
			{ErrorContains: "bad\x1b[31m"},
			{Type: string(make([]byte, postbox.MaxTypeLen+1))},
			{All: true, Actor: "me\n"},
			{All: true, FailedFrom: dead[2].AvailableAt, FailedBefore: dead[1].AvailableAt},
		} {
			if _, err := c.RetryDead(ctx, f); !errors.Is(err, postbox.ErrInvalidConfig) {
				t.Errorf("RetryDead(%+v) = %v, want ErrInvalidConfig", f, err)
			}
			if _, err := c.CountDead(ctx, f, 0); !errors.Is(err, postbox.ErrInvalidConfig) {
				t.Errorf("CountDead(%+v) = %v, want ErrInvalidConfig", f, err)
			}
		}
	})

	t.Run("RetryAndPurgeByFilter", func(t *testing.T) {
		n, err := c.RetryDead(ctx, postbox.DeadFilter{Key: "k1", Type: "order.created", Actor: "ops@example.com"})
		if err != nil || n != 2 {
			t.Fatalf("RetryDead(key k1, type order.created) = %d, %v; want 2", n, err)
		}
		for _, id := range []string{all[0], all[2]} {
			r, err := c.FindMessage(ctx, id)
			if err != nil || r.Status != postbox.StatusPending || r.Attempts != 0 {
				t.Fatalf("retried message %s = %+v, %v; want pending with attempts reset", id, r, err)
			}
		}
		n, err = c.PurgeDead(ctx, postbox.DeadFilter{ErrorContains: "refused", Actor: "ops@example.com"})
		if err != nil || n != 1 {
			t.Fatalf("PurgeDead(error refused) = %d, %v; want the one dead message left with that error", n, err)
		}
		if got := list(postbox.DeadFilter{All: true}); !slices.Equal(got, []string{all[1], all[3]}) {
			t.Fatalf("dead after retry and purge = %v, want %v", got, []string{all[1], all[3]})
		}
	})
}

func testFind[TTx any](t *testing.T, newDriver NewDriver[TTx]) {
	ctx := context.Background()
	c := Client(t, newDriver(t), nil)
	msgs := []postbox.Message{
		{Topic: "orders", Type: "order.created", Key: "order-7"},
		{Topic: "poison", Type: "order.created", Key: "order-7"},
		{Topic: "orders", Type: "order.paid", Key: "order-7"},
	}
	enqueue(t, c, msgs[:2]...)
	if n := drain(t, relay(t, c, poisonRecorder(), &postbox.RelayConfig{KeepPublished: true})); n != 2 {
		t.Fatalf("relayed %d, want 2", n)
	}
	enqueue(t, c, msgs[2:]...)
	for i, want := range []postbox.Status{postbox.StatusPublished, postbox.StatusDead, postbox.StatusPending} {
		r, err := c.FindMessage(ctx, msgs[i].ID)
		if err != nil || r.ID != msgs[i].ID || r.Status != want || r.Topic != msgs[i].Topic || r.Type != msgs[i].Type {
			t.Fatalf("FindMessage(%d) = %+v, %v; want %s", i, r, err, want)
		}
	}
	if _, err := c.FindMessage(ctx, postbox.NewID()); !errors.Is(err, postbox.ErrNotFound) {
		t.Fatalf("FindMessage(unknown) = %v, want ErrNotFound", err)
	}
	if _, err := c.FindMessage(ctx, "order-7"); !errors.Is(err, postbox.ErrInvalidConfig) {
		t.Fatalf("FindMessage(not a UUID) = %v, want ErrInvalidConfig", err)
	}
	recs, err := c.FindByKey(ctx, "order-7", 0)
	if err != nil || !slices.Equal(deadIDs(recs), []string{msgs[2].ID, msgs[1].ID, msgs[0].ID}) {
		t.Fatalf("FindByKey = %v, %v; want the three messages newest first", deadIDs(recs), err)
	}
	if recs, err := c.FindByKey(ctx, "order-7", 1); err != nil || len(recs) != 1 || recs[0].ID != msgs[2].ID {
		t.Fatalf("FindByKey(limit 1) = %v, %v; want the newest", recs, err)
	}
}

func testReplay[TTx any](t *testing.T, newDriver NewDriver[TTx]) {
	ctx := context.Background()
	clock := postboxtest.NewClock(time.Now().UTC().Truncate(time.Second))
	c := Client(t, newDriver(t), Tables(clock))
	start := clock.Now()
	var orders []postbox.Message
	for i := range 4 {
		m := []postbox.Message{{Topic: "orders", Type: "order.created", Payload: []byte(fmt.Sprint(i))}}
		enqueue(t, c, m...)
		orders = append(orders, m[0])
		clock.Advance(time.Minute)
	}
	enqueue(t, c, postbox.Message{Topic: "invoices", Type: "invoice.due"})
	rec := &postboxtest.Recorder{}
	r := relay(t, c, rec, &postbox.RelayConfig{KeepPublished: true})
	if n := drain(t, r); n != 5 {
		t.Fatalf("relayed %d, want 5", n)
	}
	f := postbox.ReplayFilter{Topic: "orders", From: start.Add(time.Minute), To: start.Add(3 * time.Minute)}
	if n, err := c.CountReplay(ctx, f, 0); err != nil || n.N != 2 || n.More {
		t.Fatalf("CountReplay = %v, %v; want 2", n, err)
	}
	if n, err := c.CountReplay(ctx, postbox.ReplayFilter{Topic: "orders"}, 3); err != nil || n.N != 3 || !n.More {
		t.Fatalf("CountReplay(limit 3) = %v, %v; want more than 3", n, err)
	}
	f.Limit = 1
	if n, err := c.ReplayPublished(ctx, f, "ops"); err != nil || n != 1 {
		t.Fatalf("ReplayPublished(limit 1) = %d, %v", n, err)
	}
	f.Limit = 0
	if n, err := c.ReplayPublished(ctx, f, "ops"); err != nil || n != 1 {
		t.Fatalf("ReplayPublished(rest) = %d, %v; want the second one", n, err)
	}
	replayed, err := c.FindMessage(ctx, orders[1].ID)
	if err != nil || replayed.Status != postbox.StatusPending || !replayed.PublishedAt.IsZero() || replayed.Attempts != 0 {
		t.Fatalf("replayed record = %+v, %v; want pending, attempts reset, no published time", replayed, err)
	}
	if n := drain(t, r); n != 2 {
		t.Fatalf("relayed %d after replay, want 2", n)
	}
	counts := rec.Counts()
	for i, want := range []int{1, 2, 2, 1} {
		if counts[orders[i].ID] != want {
			t.Fatalf("order %d published %d times, want %d (same ID replayed)", i, counts[orders[i].ID], want)
		}
	}
	for _, bad := range []postbox.ReplayFilter{{}, {Topic: "orders", From: start, To: start}, {Topic: "orders", Limit: -1}} {
		if _, err := c.ReplayPublished(ctx, bad, ""); !errors.Is(err, postbox.ErrInvalidConfig) {
			t.Fatalf("ReplayPublished(%+v) = %v, want ErrInvalidConfig", bad, err)
		}
	}
}

func testResendEdited[TTx any](t *testing.T, newDriver NewDriver[TTx]) {
	ctx := context.Background()
	var logs lockedLog
	cfg := Tables(nil)
	cfg.Logger = slog.New(slog.NewTextHandler(&logs, nil))
	c := Client(t, newDriver(t), cfg)
	enqueue(t, c, postbox.Message{Topic: "poison", Type: "order.created", Key: "k", Payload: []byte(`{"bad":1}`),
		Headers: map[string]string{"x-tenant": "acme"}})
	drain(t, relay(t, c, poisonRecorder(), nil))
	dead, err := c.ListDead(ctx, postbox.DeadFilter{Topic: "poison"})
	if err != nil || len(dead) != 1 {
		t.Fatalf("ListDead = %v, %v", dead, err)
	}
	m := dead[0].Message
	m.ID, m.Topic, m.Payload = "", "orders", []byte(`{"good":1}`)
	id, err := c.ResendEdited(ctx, dead[0].ID, m, "ops")
	if err != nil || id == "" || id == dead[0].ID {
		t.Fatalf("ResendEdited = %q, %v; want a new ID", id, err)
	}
	r, err := c.FindMessage(ctx, id)
	if err != nil || r.Status != postbox.StatusPending || string(r.Payload) != `{"good":1}` ||
		r.Headers[postbox.HeaderReplayOf] != dead[0].ID || r.Headers["x-tenant"] != "acme" || r.Key != "k" ||
		r.Headers[postbox.HeaderEditedBy] != "ops" {
		t.Fatalf("resent record = %+v, %v; want the edited payload, the original's headers and %s=%s", r, err,
			postbox.HeaderReplayOf, dead[0].ID)
	}
	if dead[0].Headers[postbox.HeaderReplayOf] != "" {
		t.Fatal("ResendEdited changed the caller's headers")
	}
	// The log says what changed, old and new, with digests of the payloads rather than the payloads.
	if line := logs.String(); !strings.Contains(line, "old_topic=poison") || !strings.Contains(line, "topic=orders") ||
		!strings.Contains(line, "old_payload_sha256=") || strings.Contains(line, `{"good":1}`) {
		t.Errorf("the resend's log line does not say what changed (old and new topic, payload digests):\n%s", line)
	}
	// The client's event registry checks the edited copy as it checks any enqueue.
	reg, err := postbox.NewRegistry(postbox.EventType{Type: "order.created", Topic: "orders"})
	if err != nil {
		t.Fatal(err)
	}
	strict := Tables(nil)
	strict.Table, strict.InboxTable, strict.Registry = c.Config().Table, c.Config().InboxTable, reg
	sc, err := postbox.NewClient(newDriver(t), strict)
	if err != nil {
		t.Fatal(err)
	}
	wrong := m
	wrong.Topic = "invoices"
	if _, err := sc.ResendEdited(ctx, dead[0].ID, wrong, "ops"); err == nil {
		t.Error("ResendEdited sent a copy on a topic the event registry refuses for its type")
	}
	if _, err := c.ResendEdited(ctx, "nope", m, ""); !errors.Is(err, postbox.ErrInvalidConfig) {
		t.Fatalf("ResendEdited(bad original) = %v, want ErrInvalidConfig", err)
	}
	m.Topic = ""
	if _, err := c.ResendEdited(ctx, dead[0].ID, m, ""); !errors.Is(err, postbox.ErrInvalidMessage) {
		t.Fatalf("ResendEdited(no topic) = %v, want ErrInvalidMessage", err)
	}
}

func testPauseTopic[TTx any](t *testing.T, newDriver NewDriver[TTx]) {
	ctx := context.Background()
	c := Client(t, newDriver(t), nil)
	if p, err := c.PausedTopics(ctx); err != nil || len(p) != 0 {
		t.Fatalf("PausedTopics on new tables = %v, %v", p, err)
	}
	if changed, err := c.PauseTopic(ctx, "orders", "ops@example.com"); err != nil || !changed {
		t.Fatalf("PauseTopic = %v, %v", changed, err)
	}
	if changed, err := c.PauseTopic(ctx, "orders", "someone else"); err != nil || changed {
		t.Fatalf("PauseTopic again = %v, %v; want no change", changed, err)
	}
	if _, err := c.PauseTopic(ctx, "refunds", ""); err != nil {
		t.Fatal(err)
	}
	p, err := c.PausedTopics(ctx)
	if err != nil || len(p) != 2 || p[0].Topic != "orders" || p[0].PausedBy != "ops@example.com" || p[0].PausedAt.IsZero() || p[1].Topic != "refunds" {
		t.Fatalf("PausedTopics = %+v, %v; want orders (by ops@example.com) and refunds", p, err)
	}
	enqueue(t, c, messages(3, "orders")...)
	enqueue(t, c, messages(2, "invoices")...)
	enqueue(t, c, messages(1, "refunds")...)
	rec := &postboxtest.Recorder{}
	// A refresh of a nanosecond reads the paused set before every claim.
	r := relay(t, c, rec, &postbox.RelayConfig{PausedRefresh: time.Nanosecond, BatchSize: 2})
	if n := drain(t, r); n != 2 {
		t.Fatalf("relayed %d with orders and refunds paused, want the 2 invoices", n)
	}
	if counts := rec.Counts(); len(counts) != 2 {
		t.Fatalf("published %v, want only the invoices", counts)
	}
	for _, m := range rec.Records() {
		if m.Topic != "invoices" {
			t.Fatalf("published a message of paused topic %s", m.Topic)
		}
	}
	if changed, err := c.ResumeTopic(ctx, "orders", "ops@example.com"); err != nil || !changed {
		t.Fatalf("ResumeTopic = %v, %v", changed, err)
	}
	if changed, err := c.ResumeTopic(ctx, "orders", "ops@example.com"); err != nil || changed {
		t.Fatalf("ResumeTopic again = %v, %v; want no change", changed, err)
	}
	if n := drain(t, r); n != 3 {
		t.Fatalf("relayed %d after resuming orders, want its 3 messages", n)
	}
	if s := stats(t, c); s.Pending != 1 || len(s.Topics) != 1 || s.Topics[0].Topic != "refunds" {
		t.Fatalf("stats %+v; want the refunds message still pending", s)
	}
	t.Run("Ordered", func(t *testing.T) {
		oc := Client(t, newDriver(t), orderedTables(nil))
		if _, err := oc.PauseTopic(ctx, "orders", "ops"); err != nil {
			t.Fatal(err)
		}
		// A paused record still holds its key: the last a, an invoice, waits behind the paused orders of a.
		msgs := keyed("a", "b", "a", "a")
		msgs[1].Topic, msgs[3].Topic = "invoices", "invoices"
		enqueue(t, oc, msgs...)
		rec := &postboxtest.Recorder{}
		r := relay(t, oc, rec, &postbox.RelayConfig{PausedRefresh: time.Nanosecond})
		if n := drain(t, r); n != 1 || rec.Counts()[msgs[1].ID] != 1 {
			t.Fatalf("ordered relay claimed %d with orders paused; want the invoice of b alone", n)
		}
		if _, err := oc.ResumeTopic(ctx, "orders", "ops"); err != nil {
			t.Fatal(err)
		}
		if n := drain(t, r); n != 3 {
			t.Fatalf("ordered relay claimed %d after resuming orders, want 3", n)
		}
		if got := publishedIDs(rec)[1:]; !slices.Equal(got, ids(pick(msgs, 0, 2, 3))) {
			t.Fatalf("key a published %v after resuming; want %v, in enqueue order", got, ids(pick(msgs, 0, 2, 3)))
		}
	})
	if _, err := c.PauseTopic(ctx, "", "ops"); !errors.Is(err, postbox.ErrInvalidConfig) {
		t.Fatalf("PauseTopic(empty) = %v, want ErrInvalidConfig", err)
	}
	if _, err := c.PauseTopic(ctx, "orders", "ops\x00"); !errors.Is(err, postbox.ErrInvalidConfig) {
		t.Fatalf("PauseTopic(control character in actor) = %v, want ErrInvalidConfig", err)
	}
}

func testOverview[TTx any](t *testing.T, newDriver NewDriver[TTx], opts Options[TTx]) {
	ctx := context.Background()
	clock := postboxtest.NewClock(time.Now().UTC().Truncate(time.Second))
	drv := newDriver(t)
	c := Client(t, drv, Tables(clock))
	o, err := c.Overview(ctx, 0)
	if err != nil || o.Pending.N != 0 || o.Dead.N != 0 || !o.OldestReady.IsZero() || len(o.Topics) != 0 {
		t.Fatalf("Overview of empty tables = %+v, %v", o, err)
	}
	first := clock.Now()
	enqueue(t, c, messages(3, "orders")...)
	clock.Advance(time.Minute)
	enqueue(t, c, messages(2, "poison")...)
	enqueue(t, c, messages(4, "invoices")...)
	drain(t, relay(t, c, poisonRecorder(), &postbox.RelayConfig{KeepPublished: true, BatchSize: 3}))
	enqueue(t, c, messages(2, "orders")...)
	clock.Advance(time.Minute)
	enqueue(t, c, messages(1, "orders")...)
	if _, err := c.PauseTopic(ctx, "refunds", "ops"); err != nil {
		t.Fatal(err)
	}

	o, err = c.Overview(ctx, 0)
	if err != nil {
		t.Fatal(err)
	}
	if o.Pending != (postbox.Count{N: 3}) || o.Dead != (postbox.Count{N: 2}) || o.Published != (postbox.Count{N: 7}) {
		t.Fatalf("Overview counts pending %v dead %v published %v; want 3, 2, 7", o.Pending, o.Dead, o.Published)
	}
	if !o.OldestReady.Equal(first.Add(time.Minute)) {
		t.Fatalf("OldestReady = %v, want %v (the oldest pending message's creation)", o.OldestReady, first.Add(time.Minute))
	}
	// The orders waiting longest were enqueued a minute after the first ones, which were published; the
	// others have no message waiting. Times are compared with Equal, the rest as a whole.
	waited := func(topics []postbox.TopicOverview, topic string, since time.Time) {
		t.Helper()
		for i, tp := range topics {
			if want := tp.Topic == topic; want && !tp.OldestWaiting.Equal(since) || !want && !tp.OldestWaiting.IsZero() {
				t.Fatalf("Overview topic %s waiting since %v; want orders since %v, the others not waiting", tp.Topic, tp.OldestWaiting, since)
			}
			topics[i].OldestWaiting = time.Time{}
		}
	}
	waited(o.Topics, "orders", first.Add(time.Minute))
	want := []postbox.TopicOverview{{Topic: "orders", Pending: 3}, {Topic: "poison", Dead: 2}, {Topic: "refunds", Paused: true}}
	if !slices.Equal(o.Topics, want) {
		t.Fatalf("Overview topics = %+v, want %+v", o.Topics, want)
	}
	if len(o.Paused) != 1 || o.Paused[0].Topic != "refunds" {
		t.Fatalf("Overview paused = %+v", o.Paused)
	}
	o, err = c.Overview(ctx, 2)
	if err != nil {
		t.Fatal(err)
	}
	if o.Pending != (postbox.Count{N: 2, More: true}) || o.Dead != (postbox.Count{N: 2}) || o.Published != (postbox.Count{N: 2, More: true}) {
		t.Fatalf("Overview(limit 2) pending %v dead %v published %v; want more than 2, 2, more than 2", o.Pending, o.Dead, o.Published)
	}
	waited(o.Topics, "orders", first.Add(time.Minute))
	if o.Topics[0] != (postbox.TopicOverview{Topic: "orders", Pending: 2}) {
		t.Fatalf("Overview(limit 2) topics = %+v; want orders counted over the 2 oldest pending", o.Topics)
	}
	if drv.Capabilities().Dialect != "postgres" {
		if o.PendingEstimate != -1 || o.DeadEstimate != -1 || o.PublishedEstimate != -1 {
			t.Fatalf("estimates %d %d %d on %s; want -1, none", o.PendingEstimate, o.DeadEstimate, o.PublishedEstimate, drv.Capabilities().Dialect)
		}
		return
	}
	// PostgreSQL's estimates come from its statistics, which ANALYZE brings up to date.
	if err := c.InTx(ctx, func(ctx context.Context, tx TTx) error {
		return opts.Exec(ctx, tx, "ANALYZE "+c.Config().Table)
	}); err != nil {
		t.Fatal(err)
	}
	o, err = c.Overview(ctx, 0)
	if err != nil || o.PendingEstimate != 3 || o.DeadEstimate != 2 || o.PublishedEstimate != 7 {
		t.Fatalf("estimates after ANALYZE = %d pending, %d dead, %d published (%v); want 3, 2, 7",
			o.PendingEstimate, o.DeadEstimate, o.PublishedEstimate, err)
	}
}

// testOverviewSplit checks the split of pending messages into ready and scheduled, and the figures of the
// messages published lately.
func testOverviewSplit[TTx any](t *testing.T, newDriver NewDriver[TTx]) {
	ctx := context.Background()
	clock := postboxtest.NewClock(time.Now().UTC().Truncate(time.Second))
	c := Client(t, newDriver(t), Tables(clock))
	enqueue(t, c, postbox.Message{Topic: "flaky", Type: "test.event"})
	enqueue(t, c, messages(4, "invoices")...)
	clock.Advance(30 * time.Second)
	flaky := &postboxtest.Recorder{Fail: func(r postbox.Record) error {
		if r.Topic == "flaky" {
			return errors.New("broker unavailable")
		}
		return nil
	}}
	drain(t, relay(t, c, flaky, &postbox.RelayConfig{KeepPublished: true, BackoffBase: time.Hour, BackoffMax: time.Hour}))
	enqueue(t, c, messages(2, "orders")...)
	enqueue(t, c, postbox.Message{Topic: "reminders", Type: "reminder.due", AvailableAt: clock.Now().Add(time.Hour)})
	clock.Advance(10 * time.Second)

	o, err := c.Overview(ctx, 0)
	if err != nil {
		t.Fatal(err)
	}
	if o.Pending != (postbox.Count{N: 4}) || o.Ready != (postbox.Count{N: 2}) || o.Scheduled != (postbox.Count{N: 1}) {
		t.Fatalf("pending %v, ready %v, scheduled %v; want 4, 2 (orders), 1 (the reminder; the failed message waits for a retry)",
			o.Pending, o.Ready, o.Scheduled)
	}
	// The longest wait per topic: the orders have waited since their enqueue; the failed message waits for its
	// retry and the reminder for its time, so neither is waiting for a relay.
	waits := map[string]time.Time{}
	for _, tp := range o.Topics {
		waits[tp.Topic] = tp.OldestWaiting
	}
	if !waits["orders"].Equal(clock.Now().Add(-10*time.Second)) || !waits["flaky"].IsZero() || !waits["reminders"].IsZero() {
		t.Fatalf("oldest waiting per topic %v; want orders since %v, none for flaky and reminders", waits, clock.Now().Add(-10*time.Second))
	}
	want := postbox.Recent{Published: postbox.Count{N: 4}, Span: postbox.RecentWindow, PerSecond: 4 / postbox.RecentWindow.Seconds(),
		LatencyP50: 30 * time.Second, LatencyP95: 30 * time.Second}
	if o.Recent != want {
		t.Fatalf("Recent = %+v, want %+v", o.Recent, want)
	}

	// Capped at 2: the split covers the two oldest pending (the failed message and the first order), and the
	// recent figures the two newest published, over the time since the first one left unread.
	o, err = c.Overview(ctx, 2)
	if err != nil {
		t.Fatal(err)
	}
	if o.Ready != (postbox.Count{N: 1, More: true}) || o.Scheduled != (postbox.Count{N: 0, More: true}) {
		t.Fatalf("Overview(limit 2) ready %v, scheduled %v; want 1 and 0 of the oldest two, with more", o.Ready, o.Scheduled)
	}
	if o.Recent.Published != (postbox.Count{N: 2, More: true}) || o.Recent.Span != 10*time.Second || o.Recent.PerSecond != 0.2 {
		t.Fatalf("Overview(limit 2) recent = %+v; want 2 and more, over the 10s since their publication", o.Recent)
	}

	clock.Advance(postbox.RecentWindow)
	o, err = c.Overview(ctx, 0)
	if err != nil {
		t.Fatal(err)
	}
	if want := (postbox.Recent{Span: postbox.RecentWindow}); o.Recent != want {
		t.Fatalf("Recent %s later = %+v, want %+v: nothing published in the window", postbox.RecentWindow, o.Recent, want)
	}
}

func testInboxView[TTx any](t *testing.T, newDriver NewDriver[TTx]) {
	ctx := context.Background()
	clock := postboxtest.NewClock(time.Now().UTC().Truncate(time.Hour).Add(10 * time.Minute))
	c := Client(t, newDriver(t), Tables(clock))
	cons, err := postbox.NewConsumer(c, "billing", &postbox.ConsumerConfig{MaxFailures: 2})
	if err != nil {
		t.Fatal(err)
	}
	ok := func(context.Context, TTx, postbox.Message) ([]postbox.Message, error) { return nil, nil }
	calls := 0
	boom := errors.New("ledger closed")
	fail := func(context.Context, TTx, postbox.Message) ([]postbox.Message, error) { calls++; return nil, boom }
	start := clock.Now()
	done := delivery()
	for _, m := range []postbox.Message{done, delivery(), delivery()} {
		if res, err := cons.Process(ctx, m, ok); err != nil || res.Outcome != postbox.Processed {
			t.Fatalf("Process = %v, %v", res.Outcome, err)
		}
	}
	clock.Advance(time.Minute)
	if res, err := postbox.Process(ctx, c, "shipping", delivery(), ok); err != nil || res.Outcome != postbox.Processed {
		t.Fatalf("Process(shipping) = %v, %v", res.Outcome, err)
	}
	failing, givenUp := delivery(), delivery()
	if res, _ := cons.Process(ctx, failing, fail); res.Outcome != postbox.Retry {
		t.Fatalf("first failure = %v, want Retry", res.Outcome)
	}
	for _, want := range []postbox.Outcome{postbox.Retry, postbox.Failed} {
		if res, _ := cons.Process(ctx, givenUp, fail); res.Outcome != want {
			t.Fatalf("failure = %v, want %v", res.Outcome, want)
		}
	}

	names, err := c.InboxConsumers(ctx)
	if err != nil || !slices.Equal(names, []string{"billing", "shipping"}) {
		t.Fatalf("InboxConsumers = %v, %v", names, err)
	}
	v, err := c.InboxView(ctx, "billing", start.Add(-time.Hour), 0)
	if err != nil {
		t.Fatal(err)
	}
	wantMinutes := []postbox.InboxMinute{{Minute: start, Processed: 3}, {Minute: start.Add(time.Minute), Failed: 1}}
	if !slices.Equal(v.Minutes, wantMinutes) {
		t.Fatalf("InboxView minutes = %+v, want %+v", v.Minutes, wantMinutes)
	}
	if len(v.Failing) != 1 || v.Failing[0].MessageID != failing.ID || v.Failing[0].Failures != 1 || v.Failing[0].LastError != boom.Error() {
		t.Fatalf("InboxView failing = %+v; want %s with 1 failure", v.Failing, failing.ID)
	}
	if len(v.GivenUp) != 1 || v.GivenUp[0].MessageID != givenUp.ID || v.GivenUp[0].Failures != 2 || v.GivenUp[0].LastError != boom.Error() ||
		!v.GivenUp[0].At.Equal(start.Add(time.Minute)) {
		t.Fatalf("InboxView given up = %+v; want %s with 2 failures", v.GivenUp, givenUp.ID)
	}

	if res, _ := cons.Process(ctx, givenUp, fail); res.Outcome != postbox.Duplicate || calls != 3 {
		t.Fatalf("redelivery of a given-up message = %v after %d handler calls; want Duplicate without a call", res.Outcome, calls)
	}
	if done, err := c.RetryInbox(ctx, "billing", givenUp.ID, "ops"); err != nil || !done {
		t.Fatalf("RetryInbox = %v, %v", done, err)
	}
	if done, err := c.RetryInbox(ctx, "billing", givenUp.ID, "ops"); err != nil || done {
		t.Fatalf("RetryInbox again = %v, %v; want nothing to do", done, err)
	}
	if res, err := cons.Process(ctx, givenUp, ok); err != nil || res.Outcome != postbox.Processed {
		t.Fatalf("delivery after RetryInbox = %v, %v; want Processed", res.Outcome, err)
	}
	v, err = c.InboxView(ctx, "billing", time.Time{}, 0)
	if err != nil || len(v.GivenUp) != 0 || len(v.Failing) != 1 {
		t.Fatalf("InboxView after retry = %+v, %v; want nothing given up", v, err)
	}
	if done, err := c.RetryInbox(ctx, "billing", v.Failing[0].MessageID, "ops"); err != nil || !done {
		t.Fatalf("RetryInbox(failing) = %v, %v; want its count forgotten", done, err)
	}
	for _, id := range []string{delivery().ID, done.ID} {
		if forgot, err := c.RetryInbox(ctx, "billing", id, "ops"); err != nil || forgot {
			t.Fatalf("RetryInbox(unknown or processed) = %v, %v; want nothing to do", forgot, err)
		}
	}
	if res, err := cons.Process(ctx, done, fail); err != nil || res.Outcome != postbox.Duplicate {
		t.Fatalf("redelivery of a processed message after RetryInbox = %v, %v; want Duplicate", res.Outcome, err)
	}
	if _, err := c.InboxView(ctx, "", time.Time{}, 0); !errors.Is(err, postbox.ErrInvalidConfig) {
		t.Fatalf("InboxView(no consumer) = %v, want ErrInvalidConfig", err)
	}
}

// lockedLog is a log destination safe for concurrent writes.
type lockedLog struct {
	mu sync.Mutex
	b  strings.Builder
}

func (l *lockedLog) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedLog) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

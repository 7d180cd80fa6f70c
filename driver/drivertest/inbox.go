package drivertest

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/postbox-go/postbox"
	"github.com/postbox-go/postbox/driver"
	"github.com/postbox-go/postbox/postboxtest"
)

func testInbox[TTx any](t *testing.T, newDriver NewDriver[TTx], opts Options[TTx]) {
	t.Run("ConcurrentDeliveries", func(t *testing.T) { testInboxConcurrent(t, newDriver, opts) })
	t.Run("DiesBeforeCommit", func(t *testing.T) { testInboxDies(t, newDriver, opts) })
	t.Run("ClaimWaitsForOpenClaim", func(t *testing.T) { testInboxOpenClaim(t, newDriver, opts) })
	t.Run("DuplicateKeepsTxUsable", func(t *testing.T) { testInboxDuplicateTx(t, newDriver, opts) })
	t.Run("EventsIfAndOnlyIfCommit", func(t *testing.T) { testInboxEvents(t, newDriver, opts) })
	t.Run("Consumers", func(t *testing.T) { testInboxConsumers(t, newDriver, opts) })
	t.Run("Consume", func(t *testing.T) { testInboxConsume(t, newDriver, opts) })
	t.Run("InvalidInput", func(t *testing.T) { testInboxInvalid(t, newDriver, opts) })
	t.Run("Refused", func(t *testing.T) { testInboxRefused(t, newDriver, opts) })
	t.Run("ScopeBySource", func(t *testing.T) { testInboxScopeBySource(t, newDriver, opts) })
	t.Run("Typed", func(t *testing.T) { testInboxTyped(t, newDriver, opts) })
	t.Run("FailurePolicy", func(t *testing.T) { testInboxFailurePolicy(t, newDriver, opts) })
	t.Run("DefaultFailurePolicy", func(t *testing.T) { testInboxDefaultPolicy(t, newDriver, opts) })
	t.Run("Cleanup", func(t *testing.T) { testInboxCleanup(t, newDriver, opts) })
	t.Run("CleanupRunner", func(t *testing.T) { testInboxCleanupRunner(t, newDriver, opts) })
}

// inboxEnv is one inbox test's client on fresh tables, with a table of business rows that handlers write, as a
// user's handler writes its own tables.
type inboxEnv[TTx any] struct {
	t    *testing.T
	drv  driver.Driver[TTx]
	cfg  *postbox.Config
	c    *postbox.Client[TTx]
	opts Options[TTx]
	biz  string
}

func newInboxEnv[TTx any](t *testing.T, drv driver.Driver[TTx], opts Options[TTx], clock postbox.Clock) *inboxEnv[TTx] {
	t.Helper()
	cfg := Tables(clock)
	e := &inboxEnv[TTx]{t: t, drv: drv, cfg: cfg, c: Client(t, drv, cfg), opts: opts,
		biz: "pbt_business_" + strings.TrimPrefix(cfg.Table, "pbt_outbox_")}
	e.inTx(func(ctx context.Context, tx TTx) error {
		return opts.Exec(ctx, tx, "CREATE TABLE "+e.biz+" (consumer TEXT NOT NULL, message_id TEXT NOT NULL)")
	})
	return e
}

// client returns a client on the same tables through another driver, as another process would have.
func (e *inboxEnv[TTx]) client(drv driver.Driver[TTx]) *postbox.Client[TTx] {
	e.t.Helper()
	c, err := postbox.NewClient(drv, e.cfg)
	if err != nil {
		e.t.Fatal(err)
	}
	return c
}

func (e *inboxEnv[TTx]) consumer(name string, cfg *postbox.ConsumerConfig) *postbox.Consumer[TTx] {
	e.t.Helper()
	c, err := postbox.NewConsumer(e.c, name, cfg)
	if err != nil {
		e.t.Fatal(err)
	}
	return c
}

func (e *inboxEnv[TTx]) inTx(fn func(ctx context.Context, tx TTx) error) {
	e.t.Helper()
	if err := e.c.InTx(context.Background(), fn); err != nil {
		e.t.Fatal(err)
	}
}

func (e *inboxEnv[TTx]) count(query string) int64 {
	e.t.Helper()
	var n int64
	e.inTx(func(ctx context.Context, tx TTx) error {
		var err error
		n, err = e.opts.QueryInt(ctx, tx, query)
		return err
	})
	return n
}

// write is a handler's business effect: one row naming the consumer and the message.
func (e *inboxEnv[TTx]) write(ctx context.Context, tx TTx, consumer string, m postbox.Message) error {
	return e.opts.Exec(ctx, tx, "INSERT INTO "+e.biz+" (consumer, message_id) VALUES ('"+consumer+"', '"+m.ID+"')")
}

// effects counts the business rows written for m.
func (e *inboxEnv[TTx]) effects(m postbox.Message) int64 {
	return e.count("SELECT count(*) FROM " + e.biz + " WHERE message_id = '" + m.ID + "'")
}

// handler writes the business row and returns one event.
func (e *inboxEnv[TTx]) handler(consumer string) postbox.Handler[TTx] {
	return func(ctx context.Context, tx TTx, m postbox.Message) ([]postbox.Message, error) {
		if err := e.write(ctx, tx, consumer, m); err != nil {
			return nil, err
		}
		return []postbox.Message{{Topic: "invoices", Type: "invoice.created", Key: m.Key, Payload: []byte(`{"for":"` + m.ID + `"}`)}}, nil
	}
}

// delivery returns a message as a broker delivers it, with a new ID.
func delivery() postbox.Message {
	return postbox.Message{ID: postbox.NewID(), Topic: "orders", Key: "order-1", Type: "order.created", Payload: []byte(`{"order":1}`)}
}

// processOnce processes m as consumer "billing" with the working handler, and checks that it is Processed and that
// m's business row then stands once.
func (e *inboxEnv[TTx]) processOnce(t *testing.T, what string, m postbox.Message) {
	t.Helper()
	res, err := postbox.Process(context.Background(), e.c, "billing", m, e.handler("billing"))
	expectOutcome(t, what, res, err, postbox.Processed)
	if n := e.effects(m); n != 1 {
		t.Fatalf("%d business rows; want 1", n)
	}
}

func expectOutcome(t *testing.T, what string, res postbox.Result, err error, want postbox.Outcome) {
	t.Helper()
	if err != nil || res.Outcome != want {
		t.Fatalf("%s: outcome %v, error %v; want %v and no error", what, res.Outcome, err, want)
	}
}

// testInboxConcurrent delivers one message 160 times at once, from 16 goroutines on 4 drivers (as 4 processes),
// and checks that its effect happened once.
func testInboxConcurrent[TTx any](t *testing.T, newDriver NewDriver[TTx], opts Options[TTx]) {
	ctx := context.Background()
	e := newInboxEnv(t, newDriver(t), opts, nil)
	clients := []*postbox.Client[TTx]{e.c, e.client(newDriver(t)), e.client(newDriver(t)), e.client(newDriver(t))}
	m := delivery()
	const goroutines, deliveries = 16, 10
	var processed, duplicate atomic.Int64
	errs := make(chan error, goroutines*deliveries)
	var wg sync.WaitGroup
	for g := range goroutines {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range deliveries {
				res, err := postbox.Process(ctx, clients[g%len(clients)], "billing", m, e.handler("billing"))
				switch {
				case err != nil:
					errs <- err
				case res.Outcome == postbox.Processed:
					processed.Add(1)
				case res.Outcome == postbox.Duplicate:
					duplicate.Add(1)
				default:
					errs <- fmt.Errorf("outcome %v without an error", res.Outcome)
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Errorf("delivery: %v", err)
	}
	if processed.Load() != 1 || duplicate.Load() != goroutines*deliveries-1 {
		t.Fatalf("%d processed and %d duplicates; want 1 and %d", processed.Load(), duplicate.Load(), goroutines*deliveries-1)
	}
	if n := e.effects(m); n != 1 {
		t.Fatalf("the handler's business row was written %d times by %d concurrent deliveries; want once", n, goroutines*deliveries)
	}
	if s := stats(t, e.c); s.Pending != 1 {
		t.Fatalf("%d events in the outbox; want the one event of the one processing", s.Pending)
	}
}

// testInboxDies: a consumer that fails between its handler's writes and the commit leaves nothing behind, and the
// redelivery processes the message, once.
func testInboxDies[TTx any](t *testing.T, newDriver NewDriver[TTx], opts Options[TTx]) {
	ctx := context.Background()
	e := newInboxEnv(t, newDriver(t), opts, nil)
	died := errors.New("consumer died after its writes")

	t.Run("HandlerFailsAfterWrites", func(t *testing.T) {
		m := delivery()
		res, err := postbox.Process(ctx, e.c, "billing", m, func(ctx context.Context, tx TTx, m postbox.Message) ([]postbox.Message, error) {
			if _, err := e.handler("billing")(ctx, tx, m); err != nil {
				return nil, err
			}
			return nil, died
		})
		if !errors.Is(err, died) || res.Outcome != postbox.Retry || res.Outcome.Ack() {
			t.Fatalf("Process = %v, %v; want the handler's error and Retry (nack)", res.Outcome, err)
		}
		if n := e.effects(m); n != 0 {
			t.Fatalf("%d business rows after the failed delivery rolled back; want 0", n)
		}
		res, err = postbox.Process(ctx, e.c, "billing", m, e.handler("billing"))
		expectOutcome(t, "redelivery", res, err, postbox.Processed)
		res, err = postbox.Process(ctx, e.c, "billing", m, e.handler("billing"))
		expectOutcome(t, "second redelivery", res, err, postbox.Duplicate)
		if n := e.effects(m); n != 1 {
			t.Fatalf("%d business rows; want 1", n)
		}
	})

	t.Run("ContextCancelledBeforeCommit", func(t *testing.T) {
		m := delivery()
		cctx, cancel := context.WithCancel(ctx)
		defer cancel()
		res, err := postbox.Process(cctx, e.c, "billing", m, func(ctx context.Context, tx TTx, m postbox.Message) ([]postbox.Message, error) {
			if err := e.write(ctx, tx, "billing", m); err != nil {
				return nil, err
			}
			cancel() // the consumer is stopped before it commits
			return nil, nil
		})
		if err == nil || res.Outcome != postbox.Retry {
			t.Fatalf("Process with its context cancelled before the commit = %v, %v; want an error and Retry", res.Outcome, err)
		}
		if n := e.effects(m); n != 0 {
			t.Fatalf("%d business rows committed by a cancelled delivery; want 0", n)
		}
		e.processOnce(t, "redelivery", m)
	})

	t.Run("HandlerPanics", func(t *testing.T) {
		m := delivery()
		func() {
			defer func() {
				if p := recover(); p != "boom" {
					t.Fatalf("recovered %v; want the handler's panic to reach the caller", p)
				}
			}()
			_, _ = postbox.Process(ctx, e.c, "billing", m, func(ctx context.Context, tx TTx, m postbox.Message) ([]postbox.Message, error) {
				if err := e.write(ctx, tx, "billing", m); err != nil {
					return nil, err
				}
				panic("boom")
			})
		}()
		e.processOnce(t, "redelivery after a panic", m)
	})
}

// testInboxOpenClaim: a claim of a message whose claim another transaction holds waits for that transaction: a
// duplicate if it commits, new if it rolls back.
func testInboxOpenClaim[TTx any](t *testing.T, newDriver NewDriver[TTx], opts Options[TTx]) {
	ctx := context.Background()
	e := newInboxEnv(t, newDriver(t), opts, nil)
	first := e.consumer("billing", nil)
	second, err := postbox.NewConsumer(e.client(newDriver(t)), "billing", nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, commit := range []bool{true, false} {
		m := delivery()
		tx, err := e.drv.Begin(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if fresh, err := first.Claim(ctx, tx, m.ID); err != nil || !fresh {
			e.drv.Rollback(ctx, tx)
			t.Fatalf("first claim = %v, %v; want new", fresh, err)
		}
		type claimed struct {
			fresh bool
			err   error
		}
		other := make(chan claimed, 1)
		go func() {
			var c claimed
			_, c.err = second.Process(ctx, m, func(ctx context.Context, tx TTx, m postbox.Message) ([]postbox.Message, error) {
				c.fresh = true
				return nil, nil
			})
			other <- c
		}()
		if commit {
			err = e.drv.Commit(ctx, tx)
		} else {
			err = e.drv.Rollback(ctx, tx)
		}
		if err != nil {
			t.Fatal(err)
		}
		got := <-other
		if got.err != nil || got.fresh == commit {
			t.Fatalf("a delivery racing an open claim that then ends with commit=%v: handler ran %v, error %v; want it to run only after a rollback",
				commit, got.fresh, got.err)
		}
	}
}

// testInboxDuplicateTx: a duplicate claim is not an error and the transaction goes on (on PostgreSQL a caught
// unique violation would have aborted it).
func testInboxDuplicateTx[TTx any](t *testing.T, newDriver NewDriver[TTx], opts Options[TTx]) {
	ctx := context.Background()
	e := newInboxEnv(t, newDriver(t), opts, nil)
	cons := e.consumer("billing", nil)
	seen := delivery()
	res, err := cons.Process(ctx, seen, e.handler("billing"))
	expectOutcome(t, "first delivery", res, err, postbox.Processed)

	later, next := delivery(), delivery()
	tx, err := e.drv.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer e.drv.Rollback(ctx, tx)
	if fresh, err := cons.Claim(ctx, tx, seen.ID); err != nil || fresh {
		t.Fatalf("claim of a processed message = %v, %v; want a duplicate and no error", fresh, err)
	}
	if err := e.write(ctx, tx, "billing", later); err != nil {
		t.Fatalf("a statement after a duplicate claim, in the same transaction: %v", err)
	}
	if _, err := e.c.Enqueue(ctx, tx, postbox.Message{Topic: "invoices", Type: "invoice.created"}); err != nil {
		t.Fatalf("Enqueue after a duplicate claim, in the same transaction: %v", err)
	}
	if fresh, err := cons.Claim(ctx, tx, next.ID); err != nil || !fresh {
		t.Fatalf("claim of a new message after a duplicate, in the same transaction = %v, %v; want new", fresh, err)
	}
	if err := e.drv.Commit(ctx, tx); err != nil {
		t.Fatalf("commit after a duplicate claim: %v", err)
	}
	if n := e.effects(later); n != 1 {
		t.Fatalf("%d rows written after the duplicate claim committed; want 1", n)
	}
	res, err = cons.Process(ctx, next, e.handler("billing"))
	expectOutcome(t, "delivery of the message claimed in that transaction", res, err, postbox.Duplicate)
	if s := stats(t, e.c); s.Pending != 2 {
		t.Fatalf("%d events pending; want the first delivery's and the one enqueued after the duplicate", s.Pending)
	}
}

// testInboxEvents: the messages a handler returns are in the outbox if and only if its transaction committed.
func testInboxEvents[TTx any](t *testing.T, newDriver NewDriver[TTx], opts Options[TTx]) {
	ctx := context.Background()
	e := newInboxEnv(t, newDriver(t), opts, nil)
	m := delivery()
	events := func(ctx context.Context, tx TTx, m postbox.Message) ([]postbox.Message, error) {
		if err := e.write(ctx, tx, "billing", m); err != nil {
			return nil, err
		}
		return []postbox.Message{
			{Topic: "invoices", Type: "invoice.created", Key: "order-1", Payload: []byte(`{"n":1}`)},
			{Topic: "emails", Type: "email.requested", Payload: []byte(`{"n":2}`)},
		}, nil
	}
	declined := errors.New("declined")
	res, err := postbox.Process(ctx, e.c, "billing", m, func(ctx context.Context, tx TTx, m postbox.Message) ([]postbox.Message, error) {
		if _, err := events(ctx, tx, m); err != nil {
			return nil, err
		}
		return []postbox.Message{{Topic: "invoices", Type: "invoice.created"}}, declined
	})
	if !errors.Is(err, declined) || len(res.Enqueued) != 0 {
		t.Fatalf("failed delivery = %+v, %v; want the handler's error and nothing enqueued", res, err)
	}
	// An invalid event is refused and rolls the delivery back like any handler error.
	_, err = postbox.Process(ctx, e.c, "billing", m, func(context.Context, TTx, postbox.Message) ([]postbox.Message, error) {
		return []postbox.Message{{Topic: "invoices"}}, nil
	})
	if !errors.Is(err, postbox.ErrInvalidMessage) {
		t.Fatalf("handler returning an event without a type: %v; want ErrInvalidMessage", err)
	}
	if s := stats(t, e.c); s.Pending != 0 {
		t.Fatalf("%d events in the outbox after rolled-back deliveries; want 0", s.Pending)
	}

	res, err = postbox.Process(ctx, e.c, "billing", m, events)
	expectOutcome(t, "delivery", res, err, postbox.Processed)
	if len(res.Enqueued) != 2 || res.Enqueued[0].ID == "" || res.Enqueued[1].ID == "" {
		t.Fatalf("Result.Enqueued = %+v; want the two events with their IDs", res.Enqueued)
	}
	res2, err := postbox.Process(ctx, e.c, "billing", m, events)
	expectOutcome(t, "redelivery", res2, err, postbox.Duplicate)
	if len(res2.Enqueued) != 0 {
		t.Fatalf("a duplicate reported enqueued events %+v", res2.Enqueued)
	}
	rec := &postboxtest.Recorder{}
	if n := drain(t, relay(t, e.c, rec, nil)); n != 2 {
		t.Fatalf("relay published %d events; want the 2 of the committed delivery", n)
	}
	got := recordIDs(rec.Records())
	want := ids(res.Enqueued)
	slices.Sort(got)
	slices.Sort(want)
	if !slices.Equal(got, want) {
		t.Fatalf("published %v; want the enqueued events %v", got, want)
	}
}

func recordIDs(recs []postbox.Record) []string {
	out := make([]string, len(recs))
	for i, r := range recs {
		out[i] = r.ID
	}
	return out
}

// testInboxConsumers: deduplication is per consumer: each consumer processes a message once.
func testInboxConsumers[TTx any](t *testing.T, newDriver NewDriver[TTx], opts Options[TTx]) {
	ctx := context.Background()
	e := newInboxEnv(t, newDriver(t), opts, nil)
	m := delivery()
	for _, name := range []string{"billing", "shipping", "billing", "shipping"} {
		if _, err := postbox.Process(ctx, e.c, name, m, e.handler(name)); err != nil {
			t.Fatal(err)
		}
	}
	for _, name := range []string{"billing", "shipping"} {
		if n := e.count("SELECT count(*) FROM " + e.biz + " WHERE consumer = '" + name + "'"); n != 1 {
			t.Fatalf("consumer %s wrote %d rows; want 1", name, n)
		}
	}
}

// testInboxInvalid: bad input is refused before anything is written.
func testInboxInvalid[TTx any](t *testing.T, newDriver NewDriver[TTx], opts Options[TTx]) {
	ctx := context.Background()
	e := newInboxEnv(t, newDriver(t), opts, nil)
	h := e.handler("billing")
	for _, tc := range []struct {
		id, want string
	}{
		{"", "message ID is empty"},
		{strings.Repeat("x", postbox.MaxMessageIDLen+1), "message ID is 256 bytes"},
		{"a\nb", "control character"},
	} {
		res, err := postbox.Process(ctx, e.c, "billing", postbox.Message{ID: tc.id, Topic: "orders", Type: "x"}, h)
		if !errors.Is(err, postbox.ErrInvalidMessage) || !postbox.IsPermanent(err) || res.Outcome != postbox.Rejected ||
			!strings.Contains(err.Error(), tc.want) {
			t.Errorf("message ID %q: %v, %v; want Rejected and a permanent ErrInvalidMessage saying %q", tc.id, res.Outcome, err, tc.want)
		}
	}
	// IDs of producers other than Postbox are fine.
	res, err := postbox.Process(ctx, e.c, "billing", postbox.Message{ID: "order-42/attempt-1"}, h)
	expectOutcome(t, "a message ID that is not a UUID", res, err, postbox.Processed)

	for _, tc := range []struct {
		name string
		cfg  *postbox.ConsumerConfig
		want string
	}{
		{"", nil, "consumer name is empty"},
		{strings.Repeat("c", postbox.MaxConsumerLen+1), nil, "256 bytes"},
		{"billing", &postbox.ConsumerConfig{MaxFailures: -1}, "MaxFailures is -1"},
		{"billing", &postbox.ConsumerConfig{MaxPayloadBytes: -1}, "MaxPayloadBytes is -1"},
		{"billing", &postbox.ConsumerConfig{DeadLetterTopic: "dead"}, "set MaxFailures"},
		{"billing", &postbox.ConsumerConfig{MaxFailures: 3, DeadLetterTopic: "a\tb"}, "not a valid topic"},
	} {
		_, err := postbox.NewConsumer(e.c, tc.name, tc.cfg)
		if !errors.Is(err, postbox.ErrInvalidConfig) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("NewConsumer(%.20q, %+v): %v; want ErrInvalidConfig saying %q", tc.name, tc.cfg, err, tc.want)
		}
	}
	if _, err := postbox.Process[TTx](ctx, e.c, "billing", delivery(), nil); !errors.Is(err, postbox.ErrInvalidConfig) {
		t.Errorf("Process with a nil handler: %v; want ErrInvalidConfig", err)
	}
	if _, err := postbox.NewConsumer[TTx](nil, "billing", nil); !errors.Is(err, postbox.ErrInvalidConfig) {
		t.Errorf("NewConsumer with a nil client: %v; want ErrInvalidConfig", err)
	}
	// A refused claim in the caller's own transaction leaves it usable.
	consumer, err := postbox.NewConsumer(e.c, "billing", nil)
	if err != nil {
		t.Fatal(err)
	}
	e.inTx(func(ctx context.Context, tx TTx) error {
		if _, err := consumer.Claim(ctx, tx, ""); !errors.Is(err, postbox.ErrInvalidMessage) {
			t.Errorf("Claim of an empty ID: %v; want ErrInvalidMessage", err)
		}
		fresh, err := consumer.Claim(ctx, tx, "order-43")
		if err != nil || !fresh {
			t.Errorf("Claim after a refused one: %v, %v; want a fresh claim", fresh, err)
		}
		return err
	})
	if n := e.count("SELECT count(*) FROM " + e.cfg.InboxTable); n != 2 {
		t.Fatalf("%d inbox claims; want only the 2 valid ones", n)
	}
}

type chargeCard struct {
	OrderID string `json:"order_id"`
	Cents   int    `json:"cents"`
}

type cardCharged struct {
	OrderID string `json:"order_id"`
	Cents   int    `json:"cents"`
	Charge  string `json:"charge"`
}

// testInboxTyped: a command handler gets its command decoded and its typed events enqueued in its transaction.
func testInboxTyped[TTx any](t *testing.T, newDriver NewDriver[TTx], opts Options[TTx]) {
	ctx := context.Background()
	e := newInboxEnv(t, newDriver(t), opts, nil)
	h := postbox.JSONHandler(func(ctx context.Context, tx TTx, cmd chargeCard, m postbox.Message) ([]postbox.Event, error) {
		if err := e.write(ctx, tx, "payments", m); err != nil {
			return nil, err
		}
		return []postbox.Event{{Topic: "payments", Key: cmd.OrderID, Type: "card.charged",
			Data: cardCharged{OrderID: cmd.OrderID, Cents: cmd.Cents, Charge: "ch_" + cmd.OrderID}}}, nil
	})
	m := delivery()
	m.Payload = []byte(`{"order_id":"o-7","cents":1250}`)
	res, err := postbox.Process(ctx, e.c, "payments", m, h)
	expectOutcome(t, "typed command", res, err, postbox.Processed)
	rec := &postboxtest.Recorder{}
	if n := drain(t, relay(t, e.c, rec, nil)); n != 1 {
		t.Fatalf("published %d events; want 1", n)
	}
	got := rec.Records()[0]
	ev, err := postbox.DecodeJSON[cardCharged](got.Payload)
	if err != nil || ev != (cardCharged{OrderID: "o-7", Cents: 1250, Charge: "ch_o-7"}) || got.Key != "o-7" || got.Type != "card.charged" {
		t.Fatalf("published %+v with payload %s (%v); want the typed event as JSON", got.Message, got.Payload, err)
	}

	// A producer added a field the command type does not know: the handler still processes the message.
	added := delivery()
	added.Payload = []byte(`{"order_id":"o-8","cents":1,"currency":"EUR"}`)
	res, err = postbox.Process(ctx, e.c, "payments", added, h)
	expectOutcome(t, "typed command with a field its type does not know", res, err, postbox.Processed)
	if n := e.effects(added); n != 1 {
		t.Fatalf("%d business rows for the command with an added field; want 1", n)
	}

	// A strict handler refuses it as permanent: no redelivery can fix it.
	strict := postbox.JSONHandlerStrict(func(ctx context.Context, tx TTx, cmd chargeCard, m postbox.Message) ([]postbox.Event, error) {
		return nil, e.write(ctx, tx, "payments", m)
	})
	bad := delivery()
	bad.Payload = added.Payload
	res, err = postbox.Process(ctx, e.c, "payments", bad, strict)
	if !postbox.IsPermanent(err) || !strings.Contains(err.Error(), `unknown field "currency"`) || res.Outcome != postbox.Rejected {
		t.Fatalf("strict handler, payload with an unknown field: %v, %v; want a permanent error naming the field, Rejected", res.Outcome, err)
	}
	if n := e.effects(bad); n != 0 {
		t.Fatalf("the strict handler wrote for an undecodable payload")
	}
}

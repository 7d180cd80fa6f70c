package watermillbridge_test

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"log/slog"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ThreeDotsLabs/watermill"
	"github.com/ThreeDotsLabs/watermill/message"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/postbox-go/postbox"
	"github.com/postbox-go/postbox/broker/brokertest"
	watermillbridge "github.com/postbox-go/postbox/broker/watermillbridge"
	"github.com/postbox-go/postbox/driver/pgxv5"
)

// env is a Postbox client on a schema of its own, with an effects table for handlers to write to.
type env struct {
	pool   *pgxpool.Pool
	client *postbox.Client[pgx.Tx]
	schema string
}

func newEnv(t *testing.T) *env {
	t.Helper()
	ctx := context.Background()
	pool, err := pgxpool.New(ctx, dbURL)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	b := make([]byte, 6)
	_, _ = rand.Read(b)
	e := &env{pool: pool, schema: "wm_" + hex.EncodeToString(b)}
	e.client, err = postbox.NewClient(pgxv5.New(pool), &postbox.Config{Schema: e.schema, Logger: quiet()})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := e.client.Migrate(ctx); err != nil {
		t.Fatalf("migrate: %v", err)
	}
	t.Cleanup(func() { _, _ = pool.Exec(context.Background(), "DROP SCHEMA "+e.schema+" CASCADE") })
	// No unique key: a second effect of one message would show as a second row.
	if _, err := pool.Exec(ctx, "CREATE TABLE "+e.schema+".effects (message_id text NOT NULL)"); err != nil {
		t.Fatal(err)
	}
	return e
}

func quiet() *slog.Logger { return slog.New(slog.DiscardHandler) }

// effects counts the effect rows, outside any handler transaction.
func (e *env) effects(t *testing.T) int64 {
	var n int64
	if err := e.pool.QueryRow(context.Background(), "SELECT count(*) FROM "+e.schema+".effects").Scan(&n); err != nil {
		t.Error(err)
	}
	return n
}

// pending counts the messages waiting in the outbox.
func (e *env) pending(t *testing.T) int64 {
	st, err := e.client.Stats(context.Background())
	if err != nil {
		t.Error(err)
	}
	return st.Pending
}

// effect writes one effect row for msg in the middleware's transaction.
func (e *env) effect(msg *message.Message) error {
	tx, ok := watermillbridge.Tx[pgx.Tx](msg)
	if !ok {
		return errors.New("no transaction in the message context")
	}
	_, err := tx.Exec(msg.Context(), "INSERT INTO "+e.schema+".effects VALUES ($1)", msg.UUID)
	return err
}

func (e *env) inbox(t *testing.T, cfg *postbox.ConsumerConfig, mcfg *watermillbridge.MiddlewareConfig) message.HandlerMiddleware {
	t.Helper()
	consumer, err := postbox.NewConsumer(e.client, "billing", cfg)
	if err != nil {
		t.Fatal(err)
	}
	mw, err := watermillbridge.NewMiddleware(consumer, mcfg)
	if err != nil {
		t.Fatal(err)
	}
	return mw
}

// startRouter runs a router set up by setup until the end of the test.
func startRouter(t *testing.T, setup func(r *message.Router)) {
	t.Helper()
	r, err := message.NewRouter(message.RouterConfig{}, watermill.NopLogger{})
	if err != nil {
		t.Fatal(err)
	}
	setup(r)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- r.Run(ctx) }()
	<-r.Running()
	t.Cleanup(func() {
		cancel()
		_ = r.Close()
		<-done
	})
}

// publish publishes msg and waits until the handlers acked it (the GoChannel blocks until then), failing the
// test after 30 seconds.
func publish(t *testing.T, pub message.Publisher, topic string, msg *message.Message) {
	t.Helper()
	done := make(chan error, 1)
	go func() { done <- pub.Publish(topic, msg) }()
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(30 * time.Second):
		t.Fatalf("message %s was not acked within 30s", msg.UUID)
	}
}

func event(typ, key string) *message.Message {
	ev := message.NewMessage(watermill.NewUUID(), []byte(`{"total":42}`))
	watermillbridge.Mapping{}.SetType(ev, typ)
	watermillbridge.Mapping{}.SetKey(ev, key)
	ev.Metadata.Set("traceparent", "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01")
	return ev
}

func TestDuplicateDeliveriesHaveOneEffect(t *testing.T) {
	e := newEnv(t)
	in := goChannel(t)
	inbox := e.inbox(t, nil, nil)
	var calls atomic.Int32
	handler := func(msg *message.Message) ([]*message.Message, error) {
		calls.Add(1)
		if err := e.effect(msg); err != nil {
			return nil, err
		}
		return message.Messages{event("invoice.created", "order-7")}, nil
	}
	startRouter(t, func(r *message.Router) {
		r.AddMiddleware(inbox)
		// Two handlers on one topic: the GoChannel hands every message to both at once, so each publish is a
		// pair of concurrent deliveries.
		r.AddHandler("a", "orders", in, "invoices", in, handler)
		r.AddHandler("b", "orders", in, "invoices", in, handler)
	})
	msg := message.NewMessage(watermill.NewUUID(), []byte(`{"order":7}`))
	for range 3 {
		publish(t, in, "orders", msg.Copy())
	}
	if n := calls.Load(); n != 1 {
		t.Errorf("handler ran %d times for one message delivered 6 times; want once", n)
	}
	if n := e.effects(t); n != 1 {
		t.Errorf("%d effects of one message delivered 6 times; want 1", n)
	}
	if n := e.pending(t); n != 1 {
		t.Errorf("%d messages in the outbox; want the one event of the one handler run", n)
	}
}

func TestProducedMessagesCommitWithTheHandler(t *testing.T) {
	e := newEnv(t)
	in, out := goChannel(t), goChannel(t)
	invoices := collect(t, out, "invoices")
	inbox := e.inbox(t, nil, nil)
	var mu sync.Mutex
	var returned []int // produced messages the router saw, per call
	var produced []string
	recorder := func(h message.HandlerFunc) message.HandlerFunc {
		return func(msg *message.Message) ([]*message.Message, error) {
			msgs, err := h(msg)
			mu.Lock()
			returned = append(returned, len(msgs))
			mu.Unlock()
			return msgs, err
		}
	}
	var calls atomic.Int32
	handler := func(msg *message.Message) ([]*message.Message, error) {
		n := calls.Add(1)
		if n == 2 {
			// The first attempt wrote an effect and produced an event, then failed: neither may be visible.
			if c := e.effects(t); c != 0 {
				t.Errorf("after a failed attempt: %d effects, want 0", c)
			}
			if c := e.pending(t); c != 0 {
				t.Errorf("after a failed attempt: %d messages in the outbox, want 0", c)
			}
		}
		if err := e.effect(msg); err != nil {
			return nil, err
		}
		ev := event("invoice.created", "order-7")
		mu.Lock()
		produced = append(produced, ev.UUID)
		mu.Unlock()
		if n == 1 {
			return message.Messages{ev}, errors.New("failing after the writes, on purpose")
		}
		return message.Messages{ev}, nil
	}
	startRouter(t, func(r *message.Router) {
		r.AddMiddleware(recorder, inbox)
		r.AddHandler("bill", "orders", in, "invoices", out, handler)
	})
	publish(t, in, "orders", message.NewMessage(watermill.NewUUID(), []byte(`{"order":7}`)))

	if n := calls.Load(); n != 2 {
		t.Fatalf("handler ran %d times; want twice (a failure, then a success)", n)
	}
	if n := e.effects(t); n != 1 {
		t.Errorf("%d effects after the commit; want 1", n)
	}
	if n := e.pending(t); n != 1 {
		t.Errorf("%d messages in the outbox after the commit; want the second attempt's event", n)
	}
	mu.Lock()
	if len(returned) != 2 || returned[0] != 0 || returned[1] != 0 {
		t.Errorf("the middleware handed %v produced messages to the router; want none, they go to the outbox", returned)
	}
	mu.Unlock()

	// The relay publishes the committed event through the bridge, to the handler's publish topic.
	bridge, err := watermillbridge.NewPublisher(out, nil)
	if err != nil {
		t.Fatal(err)
	}
	relay, err := postbox.NewRelay(e.client, bridge, &postbox.RelayConfig{Logger: quiet()})
	if err != nil {
		t.Fatal(err)
	}
	if n, err := relay.RunOnce(context.Background()); n != 1 || err != nil {
		t.Fatalf("RunOnce = %d, %v; want the one event", n, err)
	}
	msg := invoices.wait(t, 1)[0]
	var m watermillbridge.Mapping
	if msg.UUID != produced[1] || m.Type(msg) != "invoice.created" || m.Key(msg) != "order-7" ||
		string(msg.Payload) != `{"total":42}` || msg.Metadata.Get("traceparent") == "" {
		t.Fatalf("published %s type %q key %q payload %s metadata %v; want event %s as the handler produced it",
			msg.UUID, m.Type(msg), m.Key(msg), msg.Payload, msg.Metadata, produced[1])
	}
}

func TestInboxKeysOnTheCloudEventsID(t *testing.T) {
	e := newEnv(t)
	in := goChannel(t)
	inbox := e.inbox(t, nil, nil)
	var mu sync.Mutex
	var seen []postbox.Message
	startRouter(t, func(r *message.Router) {
		r.AddMiddleware(inbox)
		r.AddHandler("bill", "orders", in, "invoices", in, func(msg *message.Message) ([]*message.Message, error) {
			d, err := watermillbridge.Mapping{}.Delivered(msg)
			if err != nil {
				return nil, err
			}
			mu.Lock()
			seen = append(seen, d)
			mu.Unlock()
			return nil, e.effect(msg)
		})
	})
	// A message a Postbox relay published through the bridge, delivered twice by a transport that gave each
	// copy a UUID of its own.
	rec := brokertest.Records("orders", 1, 1)[0]
	msg, err := watermillbridge.Mapping{}.Message(rec)
	if err != nil {
		t.Fatal(err)
	}
	for range 2 {
		c := msg.Copy()
		c.UUID = watermill.NewUUID()
		publish(t, in, "orders", c)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(seen) != 1 || e.effects(t) != 1 {
		t.Fatalf("handler ran %d times, %d effects; want once for two copies with one ce_id", len(seen), e.effects(t))
	}
	if d := seen[0]; d.ID != rec.ID || d.Topic != "orders" || d.Type != rec.Type || d.Key != rec.Key {
		t.Fatalf("Delivered in the handler = %+v; want ID, type and key of the record and the subscribed topic", d)
	}
}

func TestFailurePolicyAcksWhenItGivesUp(t *testing.T) {
	e := newEnv(t)
	in := goChannel(t)
	inbox := e.inbox(t, &postbox.ConsumerConfig{MaxFailures: 2, DeadLetterTopic: "billing.dead", Logger: quiet()}, nil)
	var calls atomic.Int32
	startRouter(t, func(r *message.Router) {
		r.AddMiddleware(inbox)
		r.AddHandler("bill", "orders", in, "invoices", in, func(msg *message.Message) ([]*message.Message, error) {
			calls.Add(1)
			if err := e.effect(msg); err != nil {
				return nil, err
			}
			return nil, errors.New("always failing")
		})
	})
	publish(t, in, "orders", message.NewMessage(watermill.NewUUID(), []byte(`{}`))) // returns once acked
	if n := calls.Load(); n != 2 {
		t.Errorf("handler ran %d times; want MaxFailures (2) before the message is given up and acked", n)
	}
	if n := e.effects(t); n != 0 {
		t.Errorf("%d effects of a handler that always failed; want 0", n)
	}
	st, err := e.client.Stats(context.Background())
	if err != nil || len(st.Topics) != 1 || st.Topics[0].Topic != "billing.dead" {
		t.Fatalf("outbox %+v, %v; want the dead letter only", st, err)
	}
}

func TestMiddlewareTopic(t *testing.T) {
	e := newEnv(t)
	in := goChannel(t)
	inbox := e.inbox(t, nil, &watermillbridge.MiddlewareConfig{Topic: "audit"})
	startRouter(t, func(r *message.Router) {
		r.AddMiddleware(inbox)
		r.AddHandler("bill", "orders", in, "invoices", in, func(msg *message.Message) ([]*message.Message, error) {
			return message.Messages{event("order.audited", "")}, nil
		})
	})
	publish(t, in, "orders", message.NewMessage(watermill.NewUUID(), []byte(`{}`)))
	st, err := e.client.Stats(context.Background())
	if err != nil || len(st.Topics) != 1 || st.Topics[0].Topic != "audit" || st.Topics[0].Pending != 1 {
		t.Fatalf("outbox %+v, %v; want one message on MiddlewareConfig.Topic", st, err)
	}
}

func TestMiddlewareConfigErrors(t *testing.T) {
	if _, err := watermillbridge.NewMiddleware[pgx.Tx](nil, nil); !errors.Is(err, postbox.ErrInvalidConfig) {
		t.Errorf("NewMiddleware(nil) = %v, want ErrInvalidConfig", err)
	}
	if _, ok := watermillbridge.Tx[pgx.Tx](message.NewMessage(watermill.NewUUID(), nil)); ok {
		t.Error("Tx found a transaction outside the middleware")
	}
}

// TestRejectedIsPermanent: a message no delivery can process (here an ID with a control character) comes back as
// a permanent error, for middleware.PoisonQueue to park, without running the handler.
func TestRejectedIsPermanent(t *testing.T) {
	e := newEnv(t)
	called := false
	h := e.inbox(t, nil, nil)(func(msg *message.Message) ([]*message.Message, error) {
		called = true
		return nil, nil
	})
	_, err := h(message.NewMessage("order-1\x1b[2J", []byte(`{}`)))
	if !postbox.IsPermanent(err) || !errors.Is(err, postbox.ErrInvalidMessage) || called {
		t.Fatalf("message with a control character in its ID: %v (handler called %v); want a permanent ErrInvalidMessage, no call", err, called)
	}
}

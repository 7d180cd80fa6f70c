package amqpbroker_test

import (
	"context"
	"errors"
	"net"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/postbox-go/postbox"
	"github.com/postbox-go/postbox/broker"
	amqpbroker "github.com/postbox-go/postbox/broker/amqpbroker"
	"github.com/postbox-go/postbox/broker/brokertest"
	"github.com/postbox-go/postbox/internal/testenv/tcpproxy"
	amqp "github.com/rabbitmq/amqp091-go"
)

func publisher(t *testing.T, cfg amqpbroker.PublisherConfig) *amqpbroker.Publisher {
	t.Helper()
	if cfg.URL == "" {
		cfg.ConnConfig = conn()
	}
	pub, err := amqpbroker.NewPublisher(&cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = pub.Close() })
	return pub
}

func subscriber(t *testing.T, cfg amqpbroker.SubscriberConfig) *amqpbroker.Subscriber {
	t.Helper()
	if cfg.URL == "" {
		cfg.ConnConfig = conn()
	}
	if cfg.Logger == nil {
		cfg.Logger = quietLogger()
	}
	sub, err := amqpbroker.NewSubscriber(&cfg)
	if err != nil {
		t.Fatal(err)
	}
	return sub
}

// queueFor declares a classic queue bound to a new topic and returns both.
func queueFor(t *testing.T, conn *amqp.Connection) (queue, topic string) {
	t.Helper()
	topic = brokertest.Topic()
	queue = queuePrefix + topic
	declare(t, conn, amqpbroker.Topology{Queue: queue, Topics: []string{topic}})
	return queue, topic
}

// get takes one message from queue, failing the test if there is none.
func get(t *testing.T, conn *amqp.Connection, queue string) amqp.Delivery {
	t.Helper()
	ch, err := conn.Channel()
	if err != nil {
		t.Fatal(err)
	}
	defer ch.Close()
	d, ok, err := ch.Get(queue, true)
	if err != nil || !ok {
		t.Fatalf("get from %s: ok %v, err %v", queue, ok, err)
	}
	return d
}

func TestPublishRefusesWhatNoRetryFixes(t *testing.T) {
	conn := admin(t)
	_, topic := queueFor(t, conn)
	pub := publisher(t, amqpbroker.PublisherConfig{})
	recs := brokertest.Records(topic, 7, 1)
	recs[1].Topic = ""
	recs[2].Topic = strings.Repeat("t", 256)
	recs[3].Headers = map[string]string{"CC": "other-queue"} // would route the message to more queues
	recs[4].Headers = map[string]string{"x-death": "forged"}
	recs[5].Headers = map[string]string{"cloudEvents:type": "forged"}
	brokertest.CheckRefused(t, pub.Publish(context.Background(), recs),
		[]string{"", "topic is empty", "longer than", `"CC" is reserved`, `"x-death" is reserved`, "CloudEvents attribute", ""})
}

func TestWireFormat(t *testing.T) {
	conn := admin(t)
	for _, keyInRoutingKey := range []bool{false, true} {
		topic := "orders." + brokertest.Topic()
		queue := queuePrefix + topic
		declare(t, conn, amqpbroker.Topology{Queue: queue, Topics: []string{topic}, KeyInRoutingKey: keyInRoutingKey})
		pub := publisher(t, amqpbroker.PublisherConfig{KeyInRoutingKey: keyInRoutingKey, Source: "/billing"})
		rec := brokertest.Records(topic, 2, 2)[1] // key "clé-ü-1", JSON payload
		if err := pub.Publish(context.Background(), []postbox.Record{rec}); err != nil {
			t.Fatal(err)
		}
		d := get(t, conn, queue)
		wantKey := topic
		if keyInRoutingKey {
			wantKey = topic + ".cl%C3%A9-%C3%BC-1"
		}
		if d.RoutingKey != wantKey || d.Exchange != amqpbroker.DefaultExchange {
			t.Errorf("published to %q with key %q, want %q with key %q", d.Exchange, d.RoutingKey, amqpbroker.DefaultExchange, wantKey)
		}
		if d.MessageId != rec.ID || d.ContentType != "application/json" || d.DeliveryMode != amqp.Persistent {
			t.Errorf("properties message-id %q, content-type %q, delivery mode %d; want %q, application/json, persistent",
				d.MessageId, d.ContentType, d.DeliveryMode, rec.ID)
		}
		want := map[string]any{
			"cloudEvents_specversion":  "1.0",
			"cloudEvents_id":           rec.ID,
			"cloudEvents_type":         rec.Type,
			"cloudEvents_source":       "/billing",
			"cloudEvents_time":         rec.CreatedAt.Format(time.RFC3339Nano),
			"cloudEvents_subject":      rec.Key,
			"cloudEvents_partitionkey": rec.Key,
			"traceparent":              rec.Headers["traceparent"],
			"X-Tenant":                 "acme",
		}
		for k, v := range want {
			if d.Headers[k] != v {
				t.Errorf("header %s = %v, want %v", k, d.Headers[k], v)
			}
		}
		if _, ok := d.Headers["content-type"]; ok {
			t.Error("content-type travels as a header as well as the property")
		}
		if string(d.Body) != string(rec.Payload) {
			t.Errorf("body %q, want %q", d.Body, rec.Payload)
		}
	}
}

func TestReadsOtherProducersCloudEvents(t *testing.T) {
	conn := admin(t)
	queue, topic := queueFor(t, conn)
	ch, err := conn.Channel()
	if err != nil {
		t.Fatal(err)
	}
	defer ch.Close()
	when := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	// The older separator, and attribute values in native AMQP types, which the binding allows.
	err = ch.PublishWithContext(context.Background(), amqpbroker.DefaultExchange, topic, false, false, amqp.Publishing{
		ContentType: "text/plain",
		Headers: amqp.Table{
			"cloudEvents:specversion": "1.0",
			"cloudEvents:id":          "evt-1",
			"cloudEvents:type":        "com.example.ping",
			"cloudEvents:source":      "/other",
			"cloudEvents:time":        when,
			"attempt":                 int32(3),
		},
		Body: []byte("ping"),
	})
	if err != nil {
		t.Fatal(err)
	}
	sub := subscriber(t, amqpbroker.SubscriberConfig{Queue: queue})
	m := brokertest.ReceiveN(t, sub, 1, nil)[0].Message
	if m.ID != "evt-1" || m.Type != "com.example.ping" || m.Topic != topic || string(m.Payload) != "ping" ||
		m.Headers["content-type"] != "text/plain" || m.Headers["attempt"] != "3" {
		t.Fatalf("decoded %+v", m)
	}
}

func TestRejectedMessagesAreDeadLettered(t *testing.T) {
	conn := admin(t)
	topic := brokertest.Topic()
	queue, dlx, dlq := queuePrefix+topic, queuePrefix+topic+".dlx", queuePrefix+topic+".dead"
	declare(t, conn, amqpbroker.Topology{Exchange: dlx, Queue: dlq, Topics: []string{"#"}})
	declare(t, conn, amqpbroker.Topology{Queue: queue, QueueType: amqpbroker.QueueQuorum, Topics: []string{topic}, DeadLetterExchange: dlx})
	ch, err := conn.Channel()
	if err != nil {
		t.Fatal(err)
	}
	defer ch.Close()
	if err := ch.PublishWithContext(context.Background(), amqpbroker.DefaultExchange, topic, false, false,
		amqp.Publishing{Body: []byte("plain, not a CloudEvent")}); err != nil {
		t.Fatal(err)
	}
	recs := brokertest.Records(topic, 2, 1)
	if err := publisher(t, amqpbroker.PublisherConfig{}).Publish(context.Background(), recs); err != nil {
		t.Fatal(err)
	}
	sub := subscriber(t, amqpbroker.SubscriberConfig{Queue: queue})
	got := brokertest.ReceiveN(t, sub, 2, func(ctx context.Context, d *broker.Delivery) {
		if d.Message.ID == recs[0].ID {
			_ = d.Reject(ctx)
			return
		}
		_ = d.Ack(ctx)
	})
	if got[0].Message.ID == got[1].Message.ID {
		t.Fatalf("handler got %s twice; the foreign message must not reach it and the failed one must not come back", got[0].Message.ID)
	}
	deliveries, err := ch.Consume(dlq, "", true, false, false, false, nil)
	if err != nil {
		t.Fatal(err)
	}
	dead := map[string]bool{}
	for len(dead) < 2 {
		select {
		case d := <-deliveries:
			if _, ok := d.Headers["x-death"]; !ok {
				t.Errorf("dead-lettered message has no x-death header: %v", d.Headers)
			}
			dead[string(d.Body)] = true
		case <-time.After(30 * time.Second):
			t.Fatalf("dead-letter queue has %v; want the foreign message and the permanently failed one", dead)
		}
	}
	if !dead["plain, not a CloudEvent"] || !dead[string(recs[0].Payload)] {
		t.Fatalf("dead-letter queue has %v", dead)
	}
}

func TestDelayedNack(t *testing.T) {
	conn := admin(t)
	queue, topic := queueFor(t, conn)
	recs := brokertest.Records(topic, 1, 1)
	if err := publisher(t, amqpbroker.PublisherConfig{}).Publish(context.Background(), recs); err != nil {
		t.Fatal(err)
	}
	sub := subscriber(t, amqpbroker.SubscriberConfig{Queue: queue})

	// A short delay: the message comes back once it is over.
	var mu sync.Mutex
	calls := 0
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	err := sub.Receive(ctx, func(ctx context.Context, d *broker.Delivery) {
		mu.Lock()
		calls++
		n := calls
		mu.Unlock()
		if n == 1 {
			_ = d.Nack(ctx, 50*time.Millisecond)
			return
		}
		_ = d.Ack(ctx)
		cancel()
	})
	if err != nil || calls != 2 {
		t.Fatalf("Receive = %v after %d deliveries; want the nacked message delivered again", err, calls)
	}

	// A long delay: stopping Receive requeues the message at once instead of waiting it out.
	if err := publisher(t, amqpbroker.PublisherConfig{}).Publish(context.Background(), recs); err != nil {
		t.Fatal(err)
	}
	ctx, cancel = context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	err = sub.Receive(ctx, func(ctx context.Context, d *broker.Delivery) {
		_ = d.Nack(ctx, time.Hour)
		cancel()
	})
	if err != nil || errors.Is(ctx.Err(), context.DeadlineExceeded) {
		t.Fatalf("Receive = %v, context %v; want it to return once cancelled", err, ctx.Err())
	}
	if got := brokertest.ReceiveN(t, sub, 1, nil); got[0].Message.ID != recs[0].ID {
		t.Fatalf("got %s", got[0].Message.ID)
	}
}

// TestPrefetch: RabbitMQ sends no more than Prefetch unacknowledged messages, however many handlers are free.
func TestPrefetch(t *testing.T) {
	conn := admin(t)
	queue, topic := queueFor(t, conn)
	recs := brokertest.Records(topic, 10, 0) // no keys: any free lane may take any message
	if err := publisher(t, amqpbroker.PublisherConfig{}).Publish(context.Background(), recs); err != nil {
		t.Fatal(err)
	}
	sub := subscriber(t, amqpbroker.SubscriberConfig{Queue: queue, Prefetch: 2, Concurrency: len(recs)})

	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var mu sync.Mutex
	held, maxHeld := 0, 0
	seen := map[string]bool{}
	arrived := make(chan struct{}, len(recs))
	release := make(chan struct{})
	done := make(chan error, 1)
	go func() {
		done <- sub.Receive(ctx, func(ctx context.Context, d *broker.Delivery) {
			mu.Lock()
			held++
			maxHeld = max(maxHeld, held)
			seen[d.Message.ID] = true
			all := len(seen) == len(recs)
			mu.Unlock()
			arrived <- struct{}{}
			select {
			case <-release:
			case <-ctx.Done():
				return
			}
			mu.Lock()
			held-- // before the ack: RabbitMQ sends the next message only once the ack reaches it
			mu.Unlock()
			_ = d.Ack(ctx)
			if all {
				cancel()
			}
		})
	}()

	for range 2 {
		select {
		case <-arrived:
		case <-ctx.Done():
			t.Fatal("the handlers did not get the first two messages")
		}
	}
	// Ten handlers are free, but with two messages unacknowledged RabbitMQ keeps the other eight in the queue.
	select {
	case <-arrived:
		t.Fatal("a third message reached a handler while two were unacknowledged with Prefetch 2")
	case <-time.After(200 * time.Millisecond):
	}
	ch, err := conn.Channel()
	if err != nil {
		t.Fatal(err)
	}
	q, err := ch.QueueDeclarePassive(queue, true, false, false, false, nil)
	_ = ch.Close()
	if err != nil {
		t.Fatal(err)
	}
	if q.Messages != len(recs)-2 {
		t.Fatalf("%d messages ready in the queue with two unacknowledged; want %d", q.Messages, len(recs)-2)
	}

	close(release)
	if err := <-done; err != nil {
		t.Fatalf("Receive: %v", err)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(seen) != len(recs) {
		t.Fatalf("handled %d of %d messages", len(seen), len(recs))
	}
	if maxHeld > 2 {
		t.Fatalf("%d messages were unacknowledged at once; want at most Prefetch (2)", maxHeld)
	}
}

func TestReceiveErrors(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	nop := func(context.Context, *broker.Delivery) {}

	missing := subscriber(t, amqpbroker.SubscriberConfig{Queue: queuePrefix + "missing-" + brokertest.Topic()})
	if err := missing.Receive(ctx, nop); err == nil || !strings.Contains(err.Error(), "NOT_FOUND") {
		t.Errorf("Receive on a missing queue = %v, want a NOT_FOUND error", err)
	}

	conn := admin(t)
	queue, _ := queueFor(t, conn)
	badPassword := subscriber(t, amqpbroker.SubscriberConfig{ConnConfig: amqpbroker.ConnConfig{URL: "amqp://guest:wrong@127.0.0.1:5672/"}, Queue: queue})
	if err := badPassword.Receive(ctx, nop); err == nil {
		t.Error("Receive with a wrong password succeeded")
	}
}

func TestPublisherReopensChannelAfterChannelError(t *testing.T) {
	conn := admin(t)
	topic := brokertest.Topic()
	exchange := queuePrefix + topic
	pub := publisher(t, amqpbroker.PublisherConfig{Exchange: exchange, Logger: quietLogger()})
	recs := brokertest.Records(topic, 2, 1)
	err := pub.Publish(context.Background(), recs)
	if err == nil || postbox.IsPermanent(err) || !strings.Contains(err.Error(), "NOT_FOUND") {
		t.Fatalf("Publish to a missing exchange = %v; want a retryable NOT_FOUND error", err)
	}
	declare(t, conn, amqpbroker.Topology{Exchange: exchange, Queue: queuePrefix + topic, Topics: []string{topic}})
	if err := pub.Publish(context.Background(), recs); err != nil {
		t.Fatalf("Publish once the exchange exists: %v", err)
	}
}

func TestSubscriberRecovers(t *testing.T) {
	conn := admin(t)
	queue, topic := queueFor(t, conn)
	px := tcpproxy.Start(t, "127.0.0.1:5672")
	sub := subscriber(t, amqpbroker.SubscriberConfig{Queue: queue,
		ConnConfig: amqpbroker.ConnConfig{URL: "amqp://guest:guest@" + px.Addr() + "/", MinReconnectDelay: 10 * time.Millisecond}})
	pub := publisher(t, amqpbroker.PublisherConfig{})
	recs := brokertest.Records(topic, 2, 1)
	if err := pub.Publish(context.Background(), recs[:1]); err != nil {
		t.Fatal(err)
	}

	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	holding, cut := make(chan struct{}), make(chan struct{})
	var mu sync.Mutex
	count := map[string]int{}
	done := make(chan error, 1)
	go func() {
		done <- sub.Receive(ctx, func(ctx context.Context, d *broker.Delivery) {
			mu.Lock()
			count[d.Message.ID]++
			n := count[d.Message.ID]
			all := count[recs[0].ID] >= 2 && count[recs[1].ID] >= 1
			mu.Unlock()
			if d.Message.ID == recs[0].ID && n == 1 {
				close(holding)
				<-cut
			}
			_ = d.Ack(ctx) // lost for the first delivery: its connection is gone
			if all {
				cancel()
			}
		})
	}()
	<-holding
	px.Cut()
	close(cut)
	if err := pub.Publish(context.Background(), recs[1:]); err != nil {
		t.Fatal(err)
	}
	if err := <-done; err != nil {
		t.Fatalf("Receive = %v; want it to reconnect and go on", err)
	}
	if errors.Is(ctx.Err(), context.DeadlineExceeded) {
		t.Fatalf("deliveries %v; want the message held during the connection loss delivered again, and the later one", count)
	}
}

func TestConfigErrors(t *testing.T) {
	for name, cfg := range map[string]*amqpbroker.PublisherConfig{
		"nil":      nil,
		"no URL":   {},
		"bad URL":  {ConnConfig: amqpbroker.ConnConfig{URL: "http://localhost"}},
		"Recovery": {ConnConfig: amqpbroker.ConnConfig{URL: serverURL, AMQP: amqp.Config{Recovery: &amqp.Recovery{}}}},
		"delay":    {ConnConfig: amqpbroker.ConnConfig{URL: serverURL, MinReconnectDelay: -1}},
	} {
		if _, err := amqpbroker.NewPublisher(cfg); !errors.Is(err, postbox.ErrInvalidConfig) {
			t.Errorf("NewPublisher with %s: %v", name, err)
		}
	}
	for name, cfg := range map[string]*amqpbroker.SubscriberConfig{
		"nil":         nil,
		"no queue":    {ConnConfig: conn()},
		"no URL":      {Queue: "q"},
		"prefetch":    {ConnConfig: conn(), Queue: "q", Prefetch: 70000},
		"concurrency": {ConnConfig: conn(), Queue: "q", Concurrency: -1},
	} {
		if _, err := amqpbroker.NewSubscriber(cfg); !errors.Is(err, postbox.ErrInvalidConfig) {
			t.Errorf("NewSubscriber with %s: %v", name, err)
		}
	}
	ctx := context.Background()
	if err := amqpbroker.EnsureTopology(ctx, nil, amqpbroker.Topology{Queue: "q", Topics: []string{"t"}}); err == nil {
		t.Error("EnsureTopology without a connection succeeded")
	}
	if err := amqpbroker.EnsureTopology(ctx, admin(t), amqpbroker.Topology{Queue: "q"}); err == nil {
		t.Error("EnsureTopology without topics succeeded")
	}
}

func TestRoutingKey(t *testing.T) {
	if got := amqpbroker.RoutingKey("orders", "a.b", true); got != "orders.a%2Eb" {
		t.Errorf("RoutingKey = %q", got)
	}
	if got := amqpbroker.BindingKey("orders", true); got != "orders.*" {
		t.Errorf("BindingKey = %q", got)
	}
	if got := amqpbroker.RoutingKey("orders", "a.b", false) + amqpbroker.BindingKey("orders", false); got != "ordersorders" {
		t.Errorf("without the key in the routing key: %q", got)
	}
}

// TestPublisherRetriesARefusedConnectionAtItsMinimumDelay: while nothing listens on RabbitMQ's port (a node
// restarting), the publisher tries again every MinReconnectDelay instead of doubling its wait up to
// MaxReconnectDelay, so that it finds the node soon after it listens again however long it was down.
func TestPublisherRetriesARefusedConnectionAtItsMinimumDelay(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	_ = ln.Close() // nothing listens there now: connections are refused
	pub := publisher(t, amqpbroker.PublisherConfig{ConnConfig: amqpbroker.ConnConfig{URL: "amqp://guest:guest@" + addr + "/",
		MinReconnectDelay: 20 * time.Millisecond, MaxReconnectDelay: time.Minute}})
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	start := time.Now()
	const attempts = 12
	for range attempts {
		if err := pub.Ping(ctx); !errors.Is(err, syscall.ECONNREFUSED) {
			t.Fatalf("Ping with nothing listening: %v; want a refused connection", err)
		}
	}
	// Doubling from 20ms, the 12 attempts would take over 20s; at the minimum delay, about 12 × 20ms.
	if took := time.Since(start); took > 5*time.Second {
		t.Errorf("%d refused attempts took %v; want the wait to stay at MinReconnectDelay (20ms) while connections are refused", attempts, took)
	}
}

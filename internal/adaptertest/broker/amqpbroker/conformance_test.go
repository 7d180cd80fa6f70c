package amqpbroker_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/postbox-go/postbox"
	"github.com/postbox-go/postbox/broker"
	amqpbroker "github.com/postbox-go/postbox/broker/amqpbroker"
	"github.com/postbox-go/postbox/broker/brokertest"
	"github.com/postbox-go/postbox/internal/testenv/tcpproxy"
	amqp "github.com/rabbitmq/amqp091-go"
)

// serverURL is the RabbitMQ server that the development machines run.
const serverURL = "amqp://guest:guest@127.0.0.1:5672/"

// queuePrefix names this package's queues and exchanges, so that other packages' tests on the same server
// never touch them.
const queuePrefix = "amqpbroker."

// admin returns a connection for declaring and inspecting topology, closed at the end of the test.
func admin(t *testing.T) *amqp.Connection {
	t.Helper()
	conn, err := amqp.Dial(serverURL)
	if err != nil {
		t.Fatalf("connect to RabbitMQ at %s: %v (the tests need a RabbitMQ server there)", serverURL, err)
	}
	t.Cleanup(func() { _ = conn.Close() })
	return conn
}

// declare declares topo and deletes its queue (and exchange, unless predeclared) at the end of the test.
func declare(t *testing.T, conn *amqp.Connection, topo amqpbroker.Topology) {
	t.Helper()
	if err := amqpbroker.EnsureTopology(context.Background(), conn, topo); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ch, err := conn.Channel()
		if err != nil {
			return
		}
		defer ch.Close()
		_, _ = ch.QueueDelete(topo.Queue, false, false, false)
		if topo.Exchange != "" && topo.Exchange != amqpbroker.DefaultExchange {
			_ = ch.ExchangeDelete(topo.Exchange, false, false)
		}
	})
}

func conn() amqpbroker.ConnConfig { return amqpbroker.ConnConfig{URL: serverURL} }

// harness makes one queue per topic, and a publisher and subscriber per call.
type harness struct {
	conn            *amqp.Connection
	queueType       string
	keyInRoutingKey bool
	mu              sync.Mutex
	queues          map[string]bool
}

func newHarness(t *testing.T, queueType string, keyInRoutingKey bool) *harness {
	return &harness{conn: admin(t), queueType: queueType, keyInRoutingKey: keyInRoutingKey, queues: map[string]bool{}}
}

func (h *harness) new(t *testing.T, topic string) (postbox.Publisher, broker.Subscriber) {
	t.Helper()
	queue := queuePrefix + topic
	h.mu.Lock()
	if !h.queues[topic] {
		h.queues[topic] = true
		declare(t, h.conn, amqpbroker.Topology{Queue: queue, QueueType: h.queueType, Topics: []string{topic},
			KeyInRoutingKey: h.keyInRoutingKey})
	}
	h.mu.Unlock()
	pub, err := amqpbroker.NewPublisher(&amqpbroker.PublisherConfig{ConnConfig: conn(), KeyInRoutingKey: h.keyInRoutingKey,
		Source: "/conformance"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := pub.Close(); err != nil {
			t.Errorf("Close: %v", err)
		}
	})
	sub, err := amqpbroker.NewSubscriber(&amqpbroker.SubscriberConfig{ConnConfig: conn(), Queue: queue,
		KeyInRoutingKey: h.keyInRoutingKey, Concurrency: 4})
	if err != nil {
		t.Fatal(err)
	}
	return pub, sub
}

func (h *harness) features(attempts bool) brokertest.Features {
	return brokertest.Features{PerKeyOrder: true, Redelivery: true, Unroutable: true, Attempts: attempts,
		Unreachable: unreachable, ErrClosed: amqpbroker.ErrClosed, Reconnect: h.reconnect}
}

// reconnect returns a publisher that reaches RabbitMQ through a proxy, and the proxy's Cut.
func (h *harness) reconnect(t *testing.T, _ string) (postbox.Publisher, func()) {
	px := tcpproxy.Start(t, "127.0.0.1:5672")
	pub := publisher(t, amqpbroker.PublisherConfig{ConnConfig: amqpbroker.ConnConfig{URL: "amqp://guest:guest@" + px.Addr() + "/",
		MinReconnectDelay: 10 * time.Millisecond}, KeyInRoutingKey: h.keyInRoutingKey, Logger: quietLogger()})
	return pub, func() { px.Cut() }
}

// unreachable returns a publisher configured for a port where nothing listens.
func unreachable(t *testing.T) postbox.Publisher {
	pub, err := amqpbroker.NewPublisher(&amqpbroker.PublisherConfig{ConnConfig: amqpbroker.ConnConfig{URL: "amqp://guest:guest@127.0.0.1:1/"}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = pub.Close() })
	return pub
}

func TestConformanceClassic(t *testing.T) {
	h := newHarness(t, amqpbroker.QueueClassic, false)
	brokertest.Exercise(t, h.features(false), h.new)
}

func TestConformanceQuorum(t *testing.T) {
	h := newHarness(t, amqpbroker.QueueQuorum, false)
	brokertest.Exercise(t, h.features(true), h.new)
}

func TestConformanceKeyInRoutingKey(t *testing.T) {
	h := newHarness(t, amqpbroker.QueueQuorum, true)
	brokertest.Exercise(t, h.features(true), h.new)
}

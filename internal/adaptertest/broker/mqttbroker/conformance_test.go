package mqttbroker_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/postbox-go/postbox"
	"github.com/postbox-go/postbox/broker"
	"github.com/postbox-go/postbox/broker/brokertest"
	mqttbroker "github.com/postbox-go/postbox/broker/mqttbroker"
	"github.com/postbox-go/postbox/internal/testenv/tcpproxy"
)

// serverURL is the Mosquitto server that the development machines run.
const serverURL = "mqtt://127.0.0.1:1883"

// clientPrefix names this package's MQTT sessions, so that other packages' tests on the same server never take
// them over.
const clientPrefix = "mqttbroker-"

func conn() mqttbroker.ConnConfig {
	return mqttbroker.ConnConfig{URL: serverURL, MinReconnectDelay: 10 * time.Millisecond}
}

func publisher(t *testing.T, cfg mqttbroker.PublisherConfig) *mqttbroker.Publisher {
	t.Helper()
	if cfg.URL == "" {
		cfg.ConnConfig = conn()
	}
	if cfg.Logger == nil {
		cfg.Logger = quietLogger()
	}
	pub, err := mqttbroker.NewPublisher(&cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := pub.Close(); err != nil {
			t.Errorf("Close: %v", err)
		}
	})
	return pub
}

// subscriber makes a subscriber, creates its session now and deletes it at the end of the test.
func subscriber(t *testing.T, cfg mqttbroker.SubscriberConfig) *mqttbroker.Subscriber {
	t.Helper()
	if cfg.URL == "" {
		cfg.ConnConfig = conn()
	}
	if cfg.Logger == nil {
		cfg.Logger = quietLogger()
	}
	sub, err := mqttbroker.NewSubscriber(&cfg)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := sub.EnsureSession(ctx); err != nil {
		t.Fatalf("EnsureSession: %v (the tests need an MQTT 5 server at %s)", err, serverURL)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if err := sub.DeleteSession(ctx); err != nil {
			t.Errorf("DeleteSession: %v", err)
		}
	})
	return sub
}

// harness gives every subscriber of a topic its own session in one shared-subscription group.
type harness struct {
	mu sync.Mutex
	n  map[string]int
}

func (h *harness) new(t *testing.T, topic string) (postbox.Publisher, broker.Subscriber) {
	t.Helper()
	h.mu.Lock()
	h.n[topic]++
	id := fmt.Sprintf("%s%s-%d", clientPrefix, topic, h.n[topic])
	h.mu.Unlock()
	pub := publisher(t, mqttbroker.PublisherConfig{Source: "/conformance"})
	sub := subscriber(t, mqttbroker.SubscriberConfig{ClientID: id, Group: "conformance", Topics: []string{topic}, Concurrency: 4})
	return pub, sub
}

// unreachable returns a publisher configured for a port where nothing listens.
func unreachable(t *testing.T) postbox.Publisher {
	return publisher(t, mqttbroker.PublisherConfig{ConnConfig: mqttbroker.ConnConfig{URL: "mqtt://127.0.0.1:1", ConnectTimeout: 5 * time.Second}})
}

// reconnect returns a publisher that reaches the server through a proxy, and the proxy's Cut.
func reconnect(t *testing.T, _ string) (postbox.Publisher, func()) {
	px := tcpproxy.Start(t, "127.0.0.1:1883")
	pub := publisher(t, mqttbroker.PublisherConfig{ConnConfig: mqttbroker.ConnConfig{URL: "mqtt://" + px.Addr(),
		MinReconnectDelay: 10 * time.Millisecond}})
	return pub, func() { px.Cut() }
}

func TestConformance(t *testing.T) {
	// NackRedelivery but not Redelivery: a nack has the subscriber reconnect and resume its session, and the
	// server sends the message again, but a message a stopped subscriber leaves unacknowledged stays in that
	// subscriber's session until the same ClientID comes back (TestUnackedMessagesComeBackAfterRestart); the
	// server never hands it to another member of the shared subscription, as RedeliverUnsettled requires. Not
	// Dedup, AckTimeout or Attempts: MQTT has none of them (a redelivery carries only the DUP flag).
	brokertest.Exercise(t, brokertest.Features{PerKeyOrder: true, NackRedelivery: true, Unroutable: true, Unreachable: unreachable,
		ErrClosed: mqttbroker.ErrClosed, Reconnect: reconnect},
		(&harness{n: map[string]int{}}).new)
}

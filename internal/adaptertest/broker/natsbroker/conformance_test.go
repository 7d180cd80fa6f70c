package natsbroker_test

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/postbox-go/postbox"
	"github.com/postbox-go/postbox/broker"
	"github.com/postbox-go/postbox/broker/brokertest"
	natsbroker "github.com/postbox-go/postbox/broker/natsbroker"
	"github.com/postbox-go/postbox/broker/natsbroker/embedded"
)

// serverURL is the NATS server with JetStream that the development machines run.
const serverURL = "nats://127.0.0.1:4222"

// streamPrefix names this package's streams, so that other packages' tests on the same server never touch them.
const streamPrefix = "NATSBROKER_"

const ackWait = time.Second

func connect(t *testing.T, url string) jetstream.JetStream {
	t.Helper()
	nc, err := nats.Connect(url, nats.Name(t.Name()))
	if err != nil {
		t.Fatalf("connect to NATS at %s: %v (the tests need a NATS server with JetStream there)", url, err)
	}
	t.Cleanup(nc.Close)
	js, err := jetstream.New(nc, jetstream.WithPublishAsyncTimeout(10*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	return js
}

func runEmbedded(t *testing.T) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	url, shutdown, err := embedded.Run(ctx, t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(shutdown)
	return url
}

// harness makes one stream and durable consumer per topic, and a publisher and subscriber per call.
type harness struct {
	js           jetstream.JetStream
	keyInSubject bool
	mu           sync.Mutex
	streams      map[string]bool
}

func (h *harness) new(t *testing.T, topic string) (postbox.Publisher, broker.Subscriber) {
	t.Helper()
	ctx := context.Background()
	stream := streamPrefix + strings.ToUpper(topic)
	h.mu.Lock()
	if !h.streams[topic] {
		h.streams[topic] = true
		_, err := natsbroker.EnsureStream(ctx, h.js, jetstream.StreamConfig{Name: stream,
			Subjects: []string{natsbroker.TopicFilter(topic, h.keyInSubject)}, Storage: jetstream.MemoryStorage})
		if err != nil {
			h.mu.Unlock()
			t.Fatal(err)
		}
		_, err = natsbroker.EnsureConsumer(ctx, h.js, stream, jetstream.ConsumerConfig{Durable: "conformance", AckWait: ackWait})
		if err != nil {
			h.mu.Unlock()
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = h.js.DeleteStream(context.Background(), stream) })
	}
	h.mu.Unlock()
	pub, err := natsbroker.NewPublisher(h.js, &natsbroker.PublisherConfig{KeyInSubject: h.keyInSubject, Source: "/conformance"})
	if err != nil {
		t.Fatal(err)
	}
	cons, err := h.js.Consumer(ctx, stream, "conformance")
	if err != nil {
		t.Fatal(err)
	}
	sub, err := natsbroker.NewSubscriber(cons, &natsbroker.SubscriberConfig{KeyInSubject: h.keyInSubject, Concurrency: 4})
	if err != nil {
		t.Fatal(err)
	}
	return pub, sub
}

func features() brokertest.Features {
	return brokertest.Features{PerKeyOrder: true, Redelivery: true, Dedup: true, Unroutable: true, AckTimeout: true,
		AckWait: ackWait, Attempts: true, Unreachable: unreachable, ErrClosed: natsbroker.ErrClosed}
}

// unreachable returns a publisher whose connection keeps trying a port where nothing listens.
func unreachable(t *testing.T) postbox.Publisher {
	nc, err := nats.Connect("nats://127.0.0.1:1", nats.RetryOnFailedConnect(true), nats.MaxReconnects(-1),
		nats.ReconnectWait(100*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	js, err := jetstream.New(nc, jetstream.WithPublishAsyncTimeout(time.Second))
	if err != nil {
		t.Fatal(err)
	}
	pub, err := natsbroker.NewPublisher(js, nil)
	if err != nil {
		t.Fatal(err)
	}
	return pub
}

func TestConformanceServer(t *testing.T) {
	h := &harness{js: connect(t, serverURL), streams: map[string]bool{}}
	brokertest.Exercise(t, features(), h.new)
}

func TestConformanceEmbedded(t *testing.T) {
	js := connect(t, runEmbedded(t))
	t.Run("TopicSubject", func(t *testing.T) {
		brokertest.Exercise(t, features(), (&harness{js: js, streams: map[string]bool{}}).new)
	})
	t.Run("KeyInSubject", func(t *testing.T) {
		brokertest.Exercise(t, features(), (&harness{js: js, keyInSubject: true, streams: map[string]bool{}}).new)
	})
}

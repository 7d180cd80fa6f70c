package gcppubsub_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"cloud.google.com/go/pubsub/v2"
	"cloud.google.com/go/pubsub/v2/apiv1/pubsubpb"
	"cloud.google.com/go/pubsub/v2/pstest"
	"github.com/postbox-go/postbox"
	"github.com/postbox-go/postbox/broker"
	"github.com/postbox-go/postbox/broker/brokertest"
	"github.com/postbox-go/postbox/broker/gcppubsub"
	"google.golang.org/api/option"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
)

const project = "postbox-test"

// server starts an in-process Pub/Sub (pstest) and returns a client for it; both live as long as the test.
func server(t *testing.T, opts ...pstest.ServerReactorOption) (*pstest.Server, *pubsub.Client) {
	t.Helper()
	srv := pstest.NewServer(opts...)
	t.Cleanup(func() { _ = srv.Close() })
	return srv, dial(t, srv.Addr)
}

// dial returns a client for the Pub/Sub server at addr, closed at the end of the test.
func dial(t *testing.T, addr string) *pubsub.Client {
	t.Helper()
	conn, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	c, err := pubsub.NewClient(context.Background(), project, option.WithGRPCConn(conn))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = c.Close()
		_ = conn.Close()
	})
	return c
}

func publisher(t *testing.T, c *pubsub.Client, cfg *gcppubsub.PublisherConfig) *gcppubsub.Publisher {
	t.Helper()
	pub, err := gcppubsub.NewPublisher(c, cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = pub.Close() })
	return pub
}

// harness makes a topic and a subscription per topic, and a subscriber per call.
type harness struct {
	c      *pubsub.Client
	prefix string
	sub    func(topic string) *pubsubpb.Subscription // the subscription to make for topic
	subCfg gcppubsub.SubscriberConfig

	mu     sync.Mutex
	pub    *gcppubsub.Publisher
	topics map[string]bool
}

func (h *harness) new(t *testing.T, topic string) (postbox.Publisher, broker.Subscriber) {
	t.Helper()
	ctx := context.Background()
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.pub == nil {
		h.pub = publisher(t, h.c, &gcppubsub.PublisherConfig{TopicPrefix: h.prefix, Source: "/conformance"})
		t.Cleanup(func() { h.mu.Lock(); h.pub = nil; h.mu.Unlock() })
	}
	if !h.topics[topic] {
		h.topics[topic] = true
		if _, err := gcppubsub.EnsureTopic(ctx, h.c, h.prefix+topic); err != nil {
			t.Fatal(err)
		}
		if _, err := gcppubsub.EnsureSubscription(ctx, h.c, h.sub(topic)); err != nil {
			t.Fatal(err)
		}
	}
	cfg := h.subCfg
	cfg.Subscription, cfg.Topic, cfg.Logger = "sub-"+topic, topic, quietLogger()
	sub, err := gcppubsub.NewSubscriber(h.c, &cfg)
	if err != nil {
		t.Fatal(err)
	}
	return h.pub, sub
}

// unreachable returns a publisher whose client talks to a port where nothing listens.
func unreachable(t *testing.T) postbox.Publisher {
	settings := pubsub.DefaultPublishSettings
	settings.Timeout = 2 * time.Second
	return publisher(t, dial(t, "127.0.0.1:1"), &gcppubsub.PublisherConfig{Settings: &settings})
}

func TestConformance(t *testing.T) {
	_, c := server(t)
	f := brokertest.Features{PerKeyOrder: true, Redelivery: true, Unroutable: true, Unreachable: unreachable, ErrClosed: gcppubsub.ErrClosed}
	plain := func(prefix string) func(topic string) *pubsubpb.Subscription {
		return func(topic string) *pubsubpb.Subscription {
			return &pubsubpb.Subscription{Name: "sub-" + topic, Topic: prefix + topic}
		}
	}
	t.Run("Plain", func(t *testing.T) {
		brokertest.Exercise(t, f, (&harness{c: c, sub: plain(""), topics: map[string]bool{}}).new)
	})
	t.Run("TopicPrefix", func(t *testing.T) {
		brokertest.Exercise(t, f, (&harness{c: c, prefix: "gcppubsub-test.", sub: plain("gcppubsub-test."), topics: map[string]bool{}}).new)
	})
	t.Run("ExactlyOnce", func(t *testing.T) {
		brokertest.Exercise(t, f, (&harness{c: c, topics: map[string]bool{}, sub: func(topic string) *pubsubpb.Subscription {
			return &pubsubpb.Subscription{Name: "sub-" + topic, Topic: topic, EnableExactlyOnceDelivery: true}
		}}).new)
	})
	t.Run("DeadLetterPolicy", func(t *testing.T) {
		// Pub/Sub counts delivery attempts only on subscriptions with a dead-letter policy.
		if _, err := gcppubsub.EnsureTopic(context.Background(), c, "dead-letters"); err != nil {
			t.Fatal(err)
		}
		f := f
		f.Attempts = true
		brokertest.Exercise(t, f, (&harness{c: c, topics: map[string]bool{}, sub: func(topic string) *pubsubpb.Subscription {
			return &pubsubpb.Subscription{Name: "sub-" + topic, Topic: topic,
				DeadLetterPolicy: &pubsubpb.DeadLetterPolicy{DeadLetterTopic: "dead-letters", MaxDeliveryAttempts: 100}}
		}}).new)
	})
	t.Run("AckTimeout", func(t *testing.T) {
		// MaxExtension stops the client extending the lease after a second; the subscription's ack deadline (10s,
		// Pub/Sub's minimum and default) then lets the message go to another subscriber.
		f := brokertest.Features{AckTimeout: true, AckWait: 10 * time.Second}
		brokertest.Exercise(t, f, (&harness{c: c, sub: plain(""), topics: map[string]bool{},
			subCfg: gcppubsub.SubscriberConfig{MaxExtension: time.Second}}).new)
	})
}

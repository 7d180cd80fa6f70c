package redisstream_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/postbox-go/postbox"
	"github.com/postbox-go/postbox/broker"
	"github.com/postbox-go/postbox/broker/brokertest"
	"github.com/postbox-go/postbox/broker/redisstream"
	"github.com/redis/go-redis/v9"
)

const claimIdle = time.Second

// harness makes one stream and consumer group per topic, and a publisher and subscriber per call.
type harness struct {
	rdb           *redis.Client
	requireStream bool
	mu            sync.Mutex
	groups        map[string]bool
}

func (h *harness) new(t *testing.T, topic string) (postbox.Publisher, broker.Subscriber) {
	t.Helper()
	h.mu.Lock()
	if !h.groups[topic] {
		h.groups[topic] = true
		if err := redisstream.EnsureGroup(context.Background(), h.rdb, prefix+topic, "conformance", redisstream.StartOldest); err != nil {
			h.mu.Unlock()
			t.Fatal(err)
		}
		cleanup(t, h.rdb, prefix+topic)
	}
	h.mu.Unlock()
	pub, err := redisstream.NewPublisher(h.rdb, &redisstream.PublisherConfig{StreamPrefix: prefix,
		RequireStream: h.requireStream, Source: "/conformance"})
	if err != nil {
		t.Fatal(err)
	}
	sub, err := redisstream.NewSubscriber(h.rdb, &redisstream.SubscriberConfig{Group: "conformance", Topics: []string{topic},
		StreamPrefix: prefix, Concurrency: 4, ClaimIdle: claimIdle, Block: 200 * time.Millisecond, Logger: quietLogger()})
	if err != nil {
		t.Fatal(err)
	}
	return pub, sub
}

// unreachable returns a publisher whose client dials a port where nothing listens.
func unreachable(t *testing.T) postbox.Publisher {
	rdb := redis.NewClient(&redis.Options{Addr: "127.0.0.1:1", MaxRetries: 1})
	t.Cleanup(func() { _ = rdb.Close() })
	pub, err := redisstream.NewPublisher(rdb, nil)
	if err != nil {
		t.Fatal(err)
	}
	return pub
}

func TestConformance(t *testing.T) {
	rdb := connect(t)
	f := brokertest.Features{PerKeyOrder: true, Redelivery: true, AckTimeout: true, AckWait: claimIdle, Attempts: true,
		Unreachable: unreachable, ErrClosed: redisstream.ErrClosed}
	t.Run("MakeStream", func(t *testing.T) {
		brokertest.Exercise(t, f, (&harness{rdb: rdb, groups: map[string]bool{}}).new)
	})
	t.Run("RequireStream", func(t *testing.T) {
		f := f
		f.Unroutable = true
		brokertest.Exercise(t, f, (&harness{rdb: rdb, requireStream: true, groups: map[string]bool{}}).new)
	})
}

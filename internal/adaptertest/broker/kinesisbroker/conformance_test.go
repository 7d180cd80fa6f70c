package kinesisbroker_test

import (
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/kinesis"
	"github.com/postbox-go/postbox"
	"github.com/postbox-go/postbox/broker"
	"github.com/postbox-go/postbox/broker/brokertest"
	"github.com/postbox-go/postbox/broker/kinesisbroker"
)

// harness makes a stream of two shards per topic and a subscriber reading it from its start per call, all
// sharing one publisher.
type harness struct {
	c *kinesis.Client

	mu      sync.Mutex
	pub     *kinesisbroker.Publisher
	streams map[string]bool
}

func (h *harness) new(t *testing.T, topic string) (postbox.Publisher, broker.Subscriber) {
	t.Helper()
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.pub == nil {
		pub, err := kinesisbroker.NewPublisher(h.c, nil)
		if err != nil {
			t.Fatal(err)
		}
		h.pub = pub
		t.Cleanup(func() { h.mu.Lock(); h.pub = nil; h.mu.Unlock() })
	}
	if !h.streams[topic] {
		h.streams[topic] = true
		stream(t, h.c, topic, 2)
	}
	sub, err := kinesisbroker.NewSubscriber(h.c, &kinesisbroker.SubscriberConfig{StreamName: topic, Topic: topic, PollInterval: 50 * time.Millisecond,
		Logger: quietLogger()})
	if err != nil {
		t.Fatal(err)
	}
	return h.pub, sub
}

// TestConformance runs the suite against kinesalite. Kinesis keeps a key's records in one shard in order
// (PerKeyOrder), and the subscriber hands a nacked record to the handler again (NackRedelivery) and counts the
// attempts. Not claimed: Redelivery to another subscriber (subscribers do not share shards), Dedup (Kinesis does
// not dedup), AckTimeout (Kinesis has none).
func TestConformance(t *testing.T) {
	c := server(t)
	f := brokertest.Features{PerKeyOrder: true, NackRedelivery: true, Attempts: true, Unroutable: true, ErrClosed: kinesisbroker.ErrClosed,
		Unreachable: func(t *testing.T) postbox.Publisher {
			pub, err := kinesisbroker.NewPublisher(client("http://127.0.0.1:1"), &kinesisbroker.PublisherConfig{RetryBackoff: time.Millisecond})
			if err != nil {
				t.Fatal(err)
			}
			return pub
		}}
	brokertest.Exercise(t, f, (&harness{c: c, streams: map[string]bool{}}).new)
}

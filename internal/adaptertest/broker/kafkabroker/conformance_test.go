package kafkabroker_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/postbox-go/postbox"
	"github.com/postbox-go/postbox/broker"
	"github.com/postbox-go/postbox/broker/brokertest"
	kafkabroker "github.com/postbox-go/postbox/broker/kafkabroker"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
)

// partitions is how many partitions the tests' topics have: more than one, so that per-key order and
// per-partition handling are tested across partitions.
const partitions = 4

// cluster starts an in-process Kafka cluster (franz-go's kfake) that lives as long as the test.
func cluster(t *testing.T, opts ...kfake.Opt) []string {
	t.Helper()
	c, err := kfake.NewCluster(append([]kfake.Opt{kfake.NumBrokers(3)}, opts...)...)
	if err != nil {
		t.Fatalf("start the in-process Kafka cluster: %v", err)
	}
	t.Cleanup(c.Close)
	return c.ListenAddrs()
}

// client returns a franz-go client for brokers, closed at the end of the test.
func client(t *testing.T, brokers []string, opts ...kgo.Opt) *kgo.Client {
	t.Helper()
	cl, err := kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers(brokers...)}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cl.Close)
	return cl
}

func ensureTopic(t *testing.T, cl *kgo.Client, name string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := kafkabroker.EnsureTopic(ctx, cl, kafkabroker.TopicConfig{Name: name, Partitions: partitions}); err != nil {
		t.Fatal(err)
	}
}

// harness makes a topic and a group per topic, a publisher per test and a subscriber per call.
type harness struct {
	brokers []string
	prefix  string
	mu      sync.Mutex
	admin   *kgo.Client
	pub     *kafkabroker.Publisher
	topics  map[string]bool
}

func (h *harness) new(t *testing.T, topic string) (postbox.Publisher, broker.Subscriber) {
	t.Helper()
	h.mu.Lock()
	defer h.mu.Unlock()
	if !h.topics[topic] {
		h.topics[topic] = true
		ensureTopic(t, h.admin, h.prefix+topic)
	}
	sub, err := kafkabroker.NewSubscriber(&kafkabroker.SubscriberConfig{Brokers: h.brokers, Group: "conformance-" + topic,
		Topics: []string{topic}, TopicPrefix: h.prefix, Concurrency: 3, CommitInterval: 100 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	return h.pub, sub
}

func newHarness(t *testing.T, prefix string) *harness {
	brokers := cluster(t)
	cl := client(t, brokers)
	pub, err := kafkabroker.NewPublisher(cl, &kafkabroker.PublisherConfig{TopicPrefix: prefix, Source: "/conformance"})
	if err != nil {
		t.Fatal(err)
	}
	return &harness{brokers: brokers, prefix: prefix, admin: cl, pub: pub, topics: map[string]bool{}}
}

// unreachable returns a publisher whose client keeps trying a port where nothing listens.
func unreachable(t *testing.T) postbox.Publisher {
	cl := client(t, []string{"127.0.0.1:1"}, kgo.RecordDeliveryTimeout(2*time.Second))
	pub, err := kafkabroker.NewPublisher(cl, nil)
	if err != nil {
		t.Fatal(err)
	}
	return pub
}

func features() brokertest.Features {
	return brokertest.Features{PerKeyOrder: true, Redelivery: true, Unroutable: true, Attempts: true,
		Unreachable: unreachable, ErrClosed: kafkabroker.ErrClosed}
}

func TestConformance(t *testing.T) {
	brokertest.Exercise(t, features(), newHarness(t, "").new)
}

func TestConformanceTopicPrefix(t *testing.T) {
	brokertest.Exercise(t, features(), newHarness(t, "kafkabroker.test.").new)
}

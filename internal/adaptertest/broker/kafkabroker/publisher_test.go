package kafkabroker_test

import (
	"bytes"
	"context"
	"crypto/rand"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/postbox-go/postbox"
	"github.com/postbox-go/postbox/broker/brokertest"
	kafkabroker "github.com/postbox-go/postbox/broker/kafkabroker"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// readAll reads the first n records of topic from every partition, without a group.
func readAll(t *testing.T, brokers []string, topic string, n int) []*kgo.Record {
	t.Helper()
	cl := client(t, brokers, kgo.ConsumeTopics(topic), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var out []*kgo.Record
	for len(out) < n {
		fs := cl.PollFetches(ctx)
		if err := ctx.Err(); err != nil {
			t.Fatalf("read %d of %d records from %s", len(out), n, topic)
		}
		fs.EachError(func(topic string, p int32, err error) { t.Logf("fetch %s/%d: %v", topic, p, err) })
		out = append(out, fs.Records()...)
	}
	return out
}

// stored returns how many records topic holds, over all partitions.
func stored(t *testing.T, cl *kgo.Client, topic string) int64 {
	t.Helper()
	ends, err := kadm.NewClient(cl).ListEndOffsets(context.Background(), topic)
	if err != nil {
		t.Fatal(err)
	}
	var n int64
	ends.Each(func(o kadm.ListedOffset) { n += o.Offset })
	return n
}

func header(r *kgo.Record, name string) (string, bool) {
	for _, h := range r.Headers {
		if h.Key == name {
			return string(h.Value), true
		}
	}
	return "", false
}

func TestRecordLayout(t *testing.T) {
	brokers := cluster(t)
	cl := client(t, brokers)
	topic := brokertest.Topic()
	ensureTopic(t, cl, topic)
	pub, err := kafkabroker.NewPublisher(cl, &kafkabroker.PublisherConfig{Source: "urn:test:layout"})
	if err != nil {
		t.Fatal(err)
	}
	recs := append(brokertest.Records(topic, 40, 8), brokertest.Records(topic, 4, 0)...) // the last four without a key
	if err := pub.Publish(context.Background(), recs); err != nil {
		t.Fatal(err)
	}
	byID := map[string]postbox.Record{}
	for _, r := range recs {
		byID[r.ID] = r
	}
	partitionOf := map[string]int32{}
	for _, r := range readAll(t, brokers, topic, len(recs)) {
		id, _ := header(r, "ce_id")
		want, ok := byID[id]
		if !ok {
			t.Fatalf("record at %d/%d has ce_id %q, not a published message ID", r.Partition, r.Offset, id)
		}
		for name, v := range map[string]string{"ce_specversion": "1.0", "ce_type": want.Type, "ce_source": "urn:test:layout",
			"ce_time": want.CreatedAt.UTC().Format(time.RFC3339Nano), "traceparent": want.Headers["traceparent"]} {
			if got, _ := header(r, name); got != v {
				t.Errorf("message %s: header %s = %q, want %q", id, name, got, v)
			}
		}
		if !bytes.Equal(r.Value, want.Payload) {
			t.Errorf("message %s: value %q, want the payload %q", id, r.Value, want.Payload)
		}
		if want.Key == "" {
			if r.Key != nil {
				t.Errorf("message %s without a key has record key %q, want null", id, r.Key)
			}
			if _, ok := header(r, "ce_partitionkey"); ok {
				t.Errorf("message %s without a key has a ce_partitionkey header", id)
			}
			continue
		}
		if string(r.Key) != want.Key {
			t.Errorf("message %s: record key %q, want the message key %q", id, r.Key, want.Key)
		}
		if pk, _ := header(r, "ce_partitionkey"); pk != want.Key {
			t.Errorf("message %s: ce_partitionkey %q, want %q", id, pk, want.Key)
		}
		if p, seen := partitionOf[want.Key]; seen && p != r.Partition {
			t.Errorf("key %q went to partitions %d and %d; one key must stay in one partition", want.Key, p, r.Partition)
		}
		partitionOf[want.Key] = r.Partition
	}
	used := map[int32]bool{}
	for _, p := range partitionOf {
		used[p] = true
	}
	if len(used) < 2 {
		t.Errorf("8 keys all went to partition(s) %v; keys should spread over the %d partitions", used, partitions)
	}
}

// TestIdempotentProducerDedupsItsOwnRetries makes the broker store a batch but answer REQUEST_TIMED_OUT, so the
// client sends the batch again. The idempotent producer lets the broker drop the copy; a producer without
// idempotence, given the same fault, stores the record twice (which shows that the fault causes a retry).
func TestIdempotentProducerDedupsItsOwnRetries(t *testing.T) {
	c, err := kfake.NewCluster(kfake.NumBrokers(1))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	cl := client(t, c.ListenAddrs())

	produceOnce := func(t *testing.T, produce func(topic string) error) int64 {
		topic := brokertest.Topic()
		ensureTopic(t, cl, topic)
		h := c.Fault(kfake.Fault{Keys: []kmsg.Key{kmsg.Produce}, Topic: topic, Err: kerr.RequestTimedOut})
		if err := produce(topic); err != nil {
			t.Fatal(err)
		}
		if h.Hits() != 1 {
			t.Fatalf("the fault answered %d produce requests, want 1", h.Hits())
		}
		return stored(t, cl, topic)
	}

	pub, err := kafkabroker.NewPublisher(cl, nil)
	if err != nil {
		t.Fatal(err)
	}
	if n := produceOnce(t, func(topic string) error {
		return pub.Publish(context.Background(), brokertest.Records(topic, 1, 1))
	}); n != 1 {
		t.Errorf("the idempotent publisher's retry stored %d records, want 1", n)
	}

	plain := client(t, c.ListenAddrs(), kgo.DisableIdempotentWrite())
	if n := produceOnce(t, func(topic string) error {
		return plain.ProduceSync(context.Background(), &kgo.Record{Topic: topic, Value: []byte("x")}).FirstErr()
	}); n != 2 {
		t.Errorf("a producer without idempotence stored %d records after a retried batch; want 2, or the fault caused no retry", n)
	}
}

// TestPublishAgainIsDeliveredAgain: Kafka keeps no record of message IDs, so a message published by two Publish
// calls is stored twice, with the same ce_id for the consumer's inbox.
func TestPublishAgainIsDeliveredAgain(t *testing.T) {
	brokers := cluster(t)
	cl := client(t, brokers)
	topic := brokertest.Topic()
	ensureTopic(t, cl, topic)
	pub, _ := kafkabroker.NewPublisher(cl, nil)
	recs := brokertest.Records(topic, 1, 1)
	for range 2 {
		if err := pub.Publish(context.Background(), recs); err != nil {
			t.Fatal(err)
		}
	}
	for _, r := range readAll(t, brokers, topic, 2) {
		if id, _ := header(r, "ce_id"); id != recs[0].ID {
			t.Fatalf("record ce_id %q, want %s", id, recs[0].ID)
		}
	}
}

func TestPublishRefusesWhatNoRetryFixes(t *testing.T) {
	brokers := cluster(t)
	cl := client(t, brokers, kgo.ProducerBatchMaxBytes(4096))
	topic := brokertest.Topic()
	ensureTopic(t, cl, topic)
	pub, err := kafkabroker.NewPublisher(cl, nil)
	if err != nil {
		t.Fatal(err)
	}
	recs := brokertest.Records(topic, 5, 1)
	recs[1].Topic = "has space"
	recs[2].Headers = map[string]string{"ce_dataschema": "x"} // would be read back as an attribute
	recs[3].Payload = bytes.Repeat([]byte("x"), 8192)         // over the producer's batch limit
	brokertest.CheckRefused(t, pub.Publish(context.Background(), recs),
		[]string{"", "not a Kafka topic name", "ce_dataschema", "ProducerBatchMaxBytes", ""})
}

// TestBatchOverTopicLimitIsRetried: the broker refuses a whole batch over the topic's max.message.bytes, so the
// messages in it may be small; they fail retryably, with a hint about the producer's limit.
func TestBatchOverTopicLimitIsRetried(t *testing.T) {
	brokers := cluster(t)
	cl := client(t, brokers)
	topic := brokertest.Topic()
	err := kafkabroker.EnsureTopic(context.Background(), cl, kafkabroker.TopicConfig{Name: topic, Partitions: 1,
		Configs: map[string]string{"max.message.bytes": "2048"}})
	if err != nil {
		t.Fatal(err)
	}
	pub, _ := kafkabroker.NewPublisher(cl, nil)
	recs := brokertest.Records(topic, 1, 1)
	recs[0].Payload = make([]byte, 4096)
	_, _ = rand.Read(recs[0].Payload) // incompressible
	err = pub.Publish(context.Background(), recs)
	if err == nil || postbox.IsPermanent(err) || !errors.Is(err, kerr.MessageTooLarge) || !strings.Contains(err.Error(), "max.message.bytes") {
		t.Fatalf("Publish of a batch over the topic's limit = %v; want a retryable MESSAGE_TOO_LARGE error naming max.message.bytes", err)
	}
}

func TestPublisherConfigErrors(t *testing.T) {
	brokers := cluster(t)
	for name, c := range map[string]*kgo.Client{
		"nil":                       nil,
		"DisableIdempotentWrite":    client(t, brokers, kgo.DisableIdempotentWrite()),
		"TransactionalID":           client(t, brokers, kgo.TransactionalID("x")),
		"DefaultProduceTopicAlways": client(t, brokers, kgo.DefaultProduceTopic("x"), kgo.DefaultProduceTopicAlways()),
	} {
		if _, err := kafkabroker.NewPublisher(c, nil); !errors.Is(err, postbox.ErrInvalidConfig) {
			t.Errorf("NewPublisher with a %s client = %v, want ErrInvalidConfig", name, err)
		}
	}
	if _, err := kafkabroker.NewPublisher(client(t, brokers), &kafkabroker.PublisherConfig{TopicPrefix: "bad/"}); !errors.Is(err, postbox.ErrInvalidConfig) {
		t.Errorf("NewPublisher with TopicPrefix %q = %v", "bad/", err)
	}
}

func TestEnsureTopic(t *testing.T) {
	cl := client(t, cluster(t))
	ctx := context.Background()
	topic := brokertest.Topic()
	for range 2 { // the second call finds the topic
		if err := kafkabroker.EnsureTopic(ctx, cl, kafkabroker.TopicConfig{Name: topic, Partitions: 3}); err != nil {
			t.Fatal(err)
		}
	}
	details, err := kadm.NewClient(cl).ListTopics(ctx, topic)
	if err != nil {
		t.Fatal(err)
	}
	if n := len(details[topic].Partitions); n != 3 {
		t.Fatalf("topic has %d partitions, want 3", n)
	}
	for _, bad := range []kafkabroker.TopicConfig{{}, {Name: "a b"}, {Name: strings.Repeat("x", 250)}, {Name: "ok", Partitions: -1}} {
		if err := kafkabroker.EnsureTopic(ctx, cl, bad); err == nil {
			t.Errorf("EnsureTopic(%+v) succeeded", bad)
		}
	}
	if err := kafkabroker.EnsureTopic(ctx, nil, kafkabroker.TopicConfig{Name: "x"}); err == nil {
		t.Error("EnsureTopic without a client succeeded")
	}
}

package sqsbroker_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"
	"github.com/postbox-go/postbox"
	"github.com/postbox-go/postbox/broker"
	"github.com/postbox-go/postbox/broker/brokertest"
	"github.com/postbox-go/postbox/broker/sqsbroker"
)

func publisher(t *testing.T, c *sqs.Client, cfg *sqsbroker.PublisherConfig) *sqsbroker.Publisher {
	t.Helper()
	pub, err := sqsbroker.NewPublisher(c, cfg)
	if err != nil {
		t.Fatal(err)
	}
	return pub
}

// receiveRaw receives n messages from url with SQS's own call, deleting each, within a deadline.
func receiveRaw(t *testing.T, c *sqs.Client, url string, n int) []types.Message {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	var got []types.Message
	for len(got) < n {
		out, err := c.ReceiveMessage(ctx, &sqs.ReceiveMessageInput{QueueUrl: aws.String(url), MaxNumberOfMessages: 10, WaitTimeSeconds: 1,
			MessageAttributeNames: []string{"All"}, MessageSystemAttributeNames: []types.MessageSystemAttributeName{types.MessageSystemAttributeNameAll}})
		if err != nil {
			t.Fatalf("received %d of %d messages: %v", len(got), n, err)
		}
		for _, m := range out.Messages {
			got = append(got, m)
			if _, err := c.DeleteMessage(ctx, &sqs.DeleteMessageInput{QueueUrl: aws.String(url), ReceiptHandle: m.ReceiptHandle}); err != nil {
				t.Fatal(err)
			}
		}
	}
	return got
}

// TestAttributesBeyondTen: a message with more headers than SQS's 10 message attributes keeps 9 as attributes
// of their own and packs the rest into postbox-headers; the subscriber gives back every header.
func TestAttributesBeyondTen(t *testing.T) {
	c := server(t)
	topic := brokertest.Topic()
	url := ensureQueue(t, c, topic, nil)
	rec := brokertest.Records(topic, 1, 1)[0]
	rec.Headers["x-one"], rec.Headers["x-two"], rec.Headers["x-three"] = "1", "2", "3"
	rec.Headers["not allowed:name"] = "packed because of its name"
	if err := publisher(t, c, nil).Publish(context.Background(), []postbox.Record{rec}); err != nil {
		t.Fatal(err)
	}
	m := receiveRaw(t, c, url, 1)[0]
	if len(m.MessageAttributes) != sqsbroker.MaxAttributes {
		t.Errorf("the message has %d attributes; want %d", len(m.MessageAttributes), sqsbroker.MaxAttributes)
	}
	for _, want := range []string{"ce-id", "ce-type", "ce-partitionkey", "content-type", "traceparent", sqsbroker.AttrHeaders} {
		if _, ok := m.MessageAttributes[want]; !ok {
			t.Errorf("attribute %s missing; the message has %v", want, keys(m.MessageAttributes))
		}
	}
	packed := aws.ToString(m.MessageAttributes[sqsbroker.AttrHeaders].StringValue)
	if !strings.Contains(packed, `"not allowed:name":"packed because of its name"`) {
		t.Errorf("postbox-headers is %s; want the header whose name SQS refuses in it", packed)
	}

	// Through the subscriber, every header comes back.
	if err := publisher(t, c, nil).Publish(context.Background(), []postbox.Record{rec}); err != nil {
		t.Fatal(err)
	}
	d := receiveOne(t, c, url, topic)
	for k, v := range rec.Headers {
		if d.Message.Headers[k] != v {
			t.Errorf("header %q is %q after the round trip; want %q", k, d.Message.Headers[k], v)
		}
	}
	if d.Message.Key != rec.Key || d.Message.ID != rec.ID {
		t.Errorf("key %q, ID %s; want %q, %s", d.Message.Key, d.Message.ID, rec.Key, rec.ID)
	}
}

// receiveOne receives one message through a Subscriber and acks it.
func receiveOne(t *testing.T, c *sqs.Client, url, topic string) *broker.Delivery {
	t.Helper()
	sub, err := sqsbroker.NewSubscriber(c, &sqsbroker.SubscriberConfig{QueueURL: url, Topic: topic, WaitTime: time.Second, Logger: quietLogger()})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	got := make(chan *broker.Delivery, 1)
	done := make(chan error, 1)
	go func() {
		done <- sub.Receive(ctx, func(ctx context.Context, d *broker.Delivery) {
			_ = d.Ack(ctx)
			select {
			case got <- d:
			default:
			}
			cancel()
		})
	}()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	select {
	case d := <-got:
		return d
	default:
		t.Fatal("no message received within 20s")
		return nil
	}
}

func keys[V any](m map[string]V) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	return out
}

// TestFIFOGroups: on a FIFO queue the key is the MessageGroupId, a key SQS does not take as a group ID becomes
// its SHA-256, and messages without a key go to the default group; the message ID is the
// MessageDeduplicationId.
func TestFIFOGroups(t *testing.T) {
	c := server(t)
	topic := brokertest.Topic()
	url := ensureQueue(t, c, topic+".fifo", nil)
	recs := brokertest.Records(topic, 3, 0)
	recs[0].Key = "order-1"
	recs[1].Key = "clé ü" // not printable ASCII
	pub := publisher(t, c, &sqsbroker.PublisherConfig{QueueSuffix: ".fifo", DefaultGroup: "no-key"})
	if err := pub.Publish(context.Background(), recs); err != nil {
		t.Fatal(err)
	}
	want := map[string]string{recs[0].ID: "order-1", recs[2].ID: "no-key"}
	for _, m := range receiveRaw(t, c, url, 3) {
		id := aws.ToString(m.MessageAttributes["ce-id"].StringValue)
		if d := m.Attributes["MessageDeduplicationId"]; d != id {
			t.Errorf("message %s: MessageDeduplicationId %q; want the message ID", id, d)
		}
		g := m.Attributes["MessageGroupId"]
		if id == recs[1].ID {
			if !strings.HasPrefix(g, "sha256-") || len(g) != len("sha256-")+64 {
				t.Errorf("key %q: MessageGroupId %q; want sha256- and 64 hex digits", recs[1].Key, g)
			}
			continue
		}
		if g != want[id] {
			t.Errorf("message %s: MessageGroupId %q; want %q", id, g, want[id])
		}
	}
}

// TestFIFODuplicateDropped: the same message sent twice within the dedup window (a relay retrying a batch whose
// answer it lost) is stored once by the server.
func TestFIFODuplicateDropped(t *testing.T) {
	c := server(t)
	topic := brokertest.Topic()
	url := ensureQueue(t, c, topic+".fifo", nil)
	recs := brokertest.Records(topic, 2, 1)
	pub := publisher(t, c, &sqsbroker.PublisherConfig{QueueSuffix: ".fifo"})
	for range 2 {
		if err := pub.Publish(context.Background(), recs[:1]); err != nil {
			t.Fatal(err)
		}
	}
	if err := pub.Publish(context.Background(), recs[1:]); err != nil { // a marker after the repeat
		t.Fatal(err)
	}
	got := receiveRaw(t, c, url, 2)
	out, err := c.ReceiveMessage(context.Background(), &sqs.ReceiveMessageInput{QueueUrl: aws.String(url), WaitTimeSeconds: 1, MessageAttributeNames: []string{"All"}})
	if err != nil {
		t.Fatal(err)
	}
	got = append(got, out.Messages...)
	var ids []string
	for _, m := range got {
		ids = append(ids, aws.ToString(m.MessageAttributes["ce-id"].StringValue))
	}
	if len(ids) != 2 || ids[0] != recs[0].ID || ids[1] != recs[1].ID {
		t.Errorf("the queue held %v; want %s once, then %s", ids, recs[0].ID, recs[1].ID)
	}
}

// TestOversizedIsPermanent: a message over MaxMessageBytes fails as permanent without being sent, and the rest
// of the batch goes through.
func TestOversizedIsPermanent(t *testing.T) {
	c := server(t)
	topic := brokertest.Topic()
	url := ensureQueue(t, c, topic, nil)
	recs := brokertest.Records(topic, 2, 0)
	recs[0].Payload = []byte(strings.Repeat("x", sqsbroker.DefaultMaxMessageBytes))
	err := publisher(t, c, nil).Publish(context.Background(), recs)
	var be *postbox.BatchError
	if !errors.As(err, &be) || !postbox.IsPermanent(be.Errs[0]) || be.Errs[1] != nil {
		t.Fatalf("Publish: %v; want a BatchError, the first message permanent, the second published", err)
	}
	if !strings.Contains(be.Errs[0].Error(), "MaxMessageBytes") {
		t.Errorf("the error %q does not name the setting", be.Errs[0])
	}
	if m := receiveRaw(t, c, url, 1)[0]; aws.ToString(m.MessageAttributes["ce-id"].StringValue) != recs[1].ID {
		t.Errorf("received %v; want %s", m.MessageAttributes["ce-id"], recs[1].ID)
	}
}

// TestMissingQueue: a topic without a queue fails its messages with an error that says to create the queue.
func TestMissingQueue(t *testing.T) {
	c := server(t)
	recs := brokertest.Records(brokertest.Topic(), 1, 0)
	err := publisher(t, c, nil).Publish(context.Background(), recs)
	var be *postbox.BatchError
	if !errors.As(err, &be) || be.Errs[0] == nil || postbox.IsPermanent(be.Errs[0]) {
		t.Fatalf("Publish: %v; want a retryable per-message error", err)
	}
	if !strings.Contains(be.Errs[0].Error(), "create it") {
		t.Errorf("the error %q does not say to create the queue", be.Errs[0])
	}
}

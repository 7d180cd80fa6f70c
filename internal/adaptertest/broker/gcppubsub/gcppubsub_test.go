package gcppubsub_test

import (
	"bytes"
	"context"
	"errors"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"cloud.google.com/go/pubsub/v2"
	"cloud.google.com/go/pubsub/v2/apiv1/pubsubpb"
	"cloud.google.com/go/pubsub/v2/pstest"
	"github.com/postbox-go/postbox"
	"github.com/postbox-go/postbox/broker"
	"github.com/postbox-go/postbox/broker/brokertest"
	"github.com/postbox-go/postbox/broker/gcppubsub"
	"github.com/postbox-go/postbox/internal/testenv"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

func ensureTopic(t *testing.T, c *pubsub.Client, topic string) {
	t.Helper()
	if _, err := gcppubsub.EnsureTopic(context.Background(), c, topic); err != nil {
		t.Fatal(err)
	}
}

func ensureSub(t *testing.T, c *pubsub.Client, sub *pubsubpb.Subscription) {
	t.Helper()
	if _, err := gcppubsub.EnsureSubscription(context.Background(), c, sub); err != nil {
		t.Fatal(err)
	}
}

func TestMessageLayout(t *testing.T) {
	srv, c := server(t)
	topic := brokertest.Topic()
	ensureTopic(t, c, topic)
	pub := publisher(t, c, &gcppubsub.PublisherConfig{Source: "urn:test:layout"})
	recs := append(brokertest.Records(topic, 12, 3), brokertest.Records(topic, 2, 0)...) // the last two without a key
	if err := pub.Publish(context.Background(), recs); err != nil {
		t.Fatal(err)
	}
	byID := map[string]*pstest.Message{}
	for _, m := range srv.Messages() {
		byID[m.Attributes["ce-id"]] = m
	}
	for _, r := range recs {
		m := byID[r.ID]
		if m == nil {
			t.Fatalf("no stored message has ce-id %s", r.ID)
		}
		for name, v := range map[string]string{"ce-specversion": "1.0", "ce-type": r.Type, "ce-source": "urn:test:layout",
			"ce-time": r.CreatedAt.UTC().Format(time.RFC3339Nano), "traceparent": r.Headers["traceparent"],
			"X-Tenant": "acme"} {
			if got := m.Attributes[name]; got != v {
				t.Errorf("message %s: attribute %s = %q, want %q", r.ID, name, got, v)
			}
		}
		if m.OrderingKey != r.Key || m.Attributes["ce-partitionkey"] != r.Key {
			t.Errorf("message %s: ordering key %q and ce-partitionkey %q, want the message key %q", r.ID, m.OrderingKey,
				m.Attributes["ce-partitionkey"], r.Key)
		}
		if !bytes.Equal(m.Data, r.Payload) || m.Topic != "projects/"+project+"/topics/"+topic {
			t.Errorf("message %s: data %q on %s, want %q on topic %s", r.ID, m.Data, m.Topic, r.Payload, topic)
		}
	}
}

// TestPublishAgainIsStoredTwice: Pub/Sub does not dedup publishes, so a message published by two Publish calls is
// stored twice, with the same ce-id for the consumer's inbox.
func TestPublishAgainIsStoredTwice(t *testing.T) {
	srv, c := server(t)
	topic := brokertest.Topic()
	ensureTopic(t, c, topic)
	pub := publisher(t, c, nil)
	recs := brokertest.Records(topic, 1, 1)
	for range 2 {
		if err := pub.Publish(context.Background(), recs); err != nil {
			t.Fatal(err)
		}
	}
	msgs := srv.Messages()
	if len(msgs) != 2 || msgs[0].Attributes["ce-id"] != recs[0].ID || msgs[1].Attributes["ce-id"] != recs[0].ID {
		t.Fatalf("stored %d messages, want 2 with ce-id %s", len(msgs), recs[0].ID)
	}
}

// failFirst is a pstest reactor that fails the first n publish requests with code.
type failFirst struct {
	n    atomic.Int32
	code codes.Code
}

func (f *failFirst) React(any) (bool, any, error) {
	if f.n.Add(-1) >= 0 {
		return true, nil, status.Error(f.code, "failing on purpose")
	}
	return false, nil, nil
}

// TestFailedPublishResumesItsKey: after a failed publish the Pub/Sub client refuses the key's later messages
// until ResumePublish; Publish resumes it, so the relay's retry succeeds.
func TestFailedPublishResumesItsKey(t *testing.T) {
	fail := &failFirst{code: codes.PermissionDenied} // an error the client does not retry by itself
	fail.n.Store(1)
	srv, c := server(t, pstest.ServerReactorOption{FuncName: "Publish", Reactor: fail})
	topic := brokertest.Topic()
	ensureTopic(t, c, topic)
	pub := publisher(t, c, nil)
	recs := brokertest.Records(topic, 3, 1)
	err := pub.Publish(context.Background(), recs)
	var be *postbox.BatchError
	if !errors.As(err, &be) || postbox.IsPermanent(err) {
		t.Fatalf("Publish during the failure = %v, want a retryable BatchError", err)
	}
	for i, e := range be.Errs {
		if e == nil {
			t.Fatalf("record %d of a key whose publish failed was reported published", i)
		}
	}
	if err := pub.Publish(context.Background(), recs); err != nil {
		t.Fatalf("Publish after the failure: %v; the key should have been resumed", err)
	}
	if n := len(srv.Messages()); n != len(recs) {
		t.Fatalf("stored %d messages, want %d", n, len(recs))
	}
}

func TestPublishRefusesWhatNoRetryFixes(t *testing.T) {
	_, c := server(t)
	topic := brokertest.Topic()
	ensureTopic(t, c, topic)
	pub := publisher(t, c, nil)
	recs := brokertest.Records(topic, 7, 1)
	recs[1].Topic = "has space"
	recs[2].Topic = "goog-topic"
	recs[3].Headers = map[string]string{"ce-dataschema": "x"}
	recs[4].Headers = map[string]string{"goog-x": "y"}
	recs[5].Headers = map[string]string{"big": strings.Repeat("v", 2000)}
	brokertest.CheckRefused(t, pub.Publish(context.Background(), recs),
		[]string{"", "not a Pub/Sub ID", "reserves", "ce-dataschema", "reserves", "1024", ""})

	big := brokertest.Records(topic, 1, 1)
	big[0].Payload = make([]byte, 11<<20) // over Pub/Sub's 10 MB
	if err := pub.Publish(context.Background(), big); !postbox.IsPermanent(err) || !errors.Is(err, pubsub.ErrOversizedMessage) {
		t.Errorf("Publish of an 11 MB message = %v, want a permanent ErrOversizedMessage", err)
	}
}

func TestInvalidArgumentIsPermanent(t *testing.T) {
	_, c := server(t, pstest.WithErrorInjection("Publish", codes.InvalidArgument, "refused"))
	topic := brokertest.Topic()
	ensureTopic(t, c, topic)
	err := publisher(t, c, nil).Publish(context.Background(), brokertest.Records(topic, 1, 0))
	if !postbox.IsPermanent(err) || !strings.Contains(err.Error(), "refused") {
		t.Fatalf("Publish refused with INVALID_ARGUMENT = %v, want a permanent error", err)
	}
}

// receiveUntil runs Receive until done returns true for a delivery, then stops it.
func receiveUntil(t *testing.T, sub broker.Subscriber, handle broker.DeliveryHandler, done func(*broker.Delivery) bool) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	err := sub.Receive(ctx, func(ctx context.Context, d *broker.Delivery) {
		handle(ctx, d)
		if done(d) {
			cancel()
		}
	})
	if err != nil {
		t.Fatalf("Receive: %v", err)
	}
	if context.Cause(ctx) == context.DeadlineExceeded {
		t.Fatal("Receive ran 30s without the awaited delivery")
	}
}

// TestRejectAcksForeignAndRejected: a message that is not a Postbox CloudEvent and a rejected message are acked,
// so Pub/Sub drops them.
func TestRejectAcksForeignAndRejected(t *testing.T) {
	srv, c := server(t)
	topic := brokertest.Topic()
	ensureTopic(t, c, topic)
	ensureSub(t, c, &pubsubpb.Subscription{Name: "s-" + topic, Topic: topic})
	srv.Publish("projects/"+project+"/topics/"+topic, []byte("plain"), map[string]string{"a": "b"})
	recs := brokertest.Records(topic, 2, 0)
	if err := publisher(t, c, nil).Publish(context.Background(), recs); err != nil {
		t.Fatal(err)
	}
	sub, _ := gcppubsub.NewSubscriber(c, &gcppubsub.SubscriberConfig{Subscription: "s-" + topic, Topic: topic, Logger: quietLogger()})
	handle := func(ctx context.Context, d *broker.Delivery) {
		if d.Message.ID == recs[0].ID {
			_ = d.Reject(ctx)
			return
		}
		_ = d.Ack(ctx)
	}
	// Pub/Sub delivers the three in any order, so Receive runs until the server has every ack, not until the
	// handler has seen the two Postbox messages: the foreign one may still be in flight then.
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- sub.Receive(ctx, handle) }()
	testenv.Eventually(t, "every message acked once", func() bool {
		ms := srv.Messages()
		for _, m := range ms {
			if m.Acks != 1 {
				return false
			}
		}
		return len(ms) == 3
	})
	cancel()
	if err := <-done; err != nil {
		t.Fatalf("Receive: %v", err)
	}
	for _, m := range srv.Messages() {
		if m.Deliveries != 1 {
			t.Errorf("message %s (ce-id %q) was delivered %d times, want once", m.ID, m.Attributes["ce-id"], m.Deliveries)
		}
	}
}

// TestNackRejectedDeadLetters: with NackRejected, a rejected message is nacked until the subscription's
// dead-letter policy moves it to the dead-letter topic.
func TestNackRejectedDeadLetters(t *testing.T) {
	_, c := server(t)
	topic := brokertest.Topic()
	ensureTopic(t, c, topic)
	ensureTopic(t, c, topic+"-dead")
	ensureSub(t, c, &pubsubpb.Subscription{Name: "dead-" + topic, Topic: topic + "-dead"})
	ensureSub(t, c, &pubsubpb.Subscription{Name: "s-" + topic, Topic: topic,
		DeadLetterPolicy: &pubsubpb.DeadLetterPolicy{DeadLetterTopic: topic + "-dead", MaxDeliveryAttempts: 5}})
	recs := brokertest.Records(topic, 1, 1)
	if err := publisher(t, c, nil).Publish(context.Background(), recs); err != nil {
		t.Fatal(err)
	}
	sub, _ := gcppubsub.NewSubscriber(c, &gcppubsub.SubscriberConfig{Subscription: "s-" + topic, Topic: topic, NackRejected: true})
	handle := func(ctx context.Context, d *broker.Delivery) { _ = d.Reject(ctx) }
	attempts := 0
	receiveUntil(t, sub, handle, func(d *broker.Delivery) bool {
		attempts = d.Attempt
		return attempts == 5
	})
	dead, _ := gcppubsub.NewSubscriber(c, &gcppubsub.SubscriberConfig{Subscription: "dead-" + topic, Topic: topic + "-dead"})
	var got string
	receiveUntil(t, dead, func(ctx context.Context, d *broker.Delivery) { got = d.Message.ID; _ = d.Ack(ctx) },
		func(*broker.Delivery) bool { return true })
	if got != recs[0].ID {
		t.Fatalf("dead-letter topic delivered %s, want %s", got, recs[0].ID)
	}
}

func TestReceiveFailsWithoutSubscription(t *testing.T) {
	_, c := server(t)
	sub, err := gcppubsub.NewSubscriber(c, &gcppubsub.SubscriberConfig{Subscription: "missing", Topic: "t"})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	err = sub.Receive(ctx, func(context.Context, *broker.Delivery) {})
	if status.Code(errors.Unwrap(err)) != codes.NotFound || ctx.Err() != nil {
		t.Fatalf("Receive from a missing subscription = %v; want NOT_FOUND before the context ends", err)
	}
}

func TestEnsureSubscription(t *testing.T) {
	_, c := server(t)
	ctx := context.Background()
	topic := brokertest.Topic()
	ensureTopic(t, c, topic)
	ensureTopic(t, c, topic) // exists: returned as it is
	for range 2 {
		got, err := gcppubsub.EnsureSubscription(ctx, c, &pubsubpb.Subscription{Name: "s-" + topic, Topic: topic})
		if err != nil {
			t.Fatal(err)
		}
		if !got.EnableMessageOrdering || got.RetryPolicy.GetMinimumBackoff().AsDuration() != gcppubsub.DefaultMinimumBackoff ||
			got.RetryPolicy.GetMaximumBackoff().AsDuration() != gcppubsub.DefaultMaximumBackoff {
			t.Fatalf("subscription %+v; want message ordering and the default retry policy", got)
		}
	}
	_, err := c.SubscriptionAdminClient.CreateSubscription(ctx, &pubsubpb.Subscription{
		Name: "projects/" + project + "/subscriptions/unordered-" + topic, Topic: "projects/" + project + "/topics/" + topic})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := gcppubsub.EnsureSubscription(ctx, c, &pubsubpb.Subscription{Name: "unordered-" + topic, Topic: topic}); err == nil ||
		!strings.Contains(err.Error(), "ordering") {
		t.Fatalf("EnsureSubscription on an unordered subscription = %v, want an error about ordering", err)
	}
	for _, bad := range []*pubsubpb.Subscription{nil, {Name: "s"}, {Name: "ab", Topic: topic}, {Name: "s-x", Topic: "projects/p/queues/x"}} {
		if _, err := gcppubsub.EnsureSubscription(ctx, c, bad); err == nil {
			t.Errorf("EnsureSubscription(%v) succeeded", bad)
		}
	}
	for _, bad := range []string{"", "1abc", "goog-x", "a b c"} {
		if _, err := gcppubsub.EnsureTopic(ctx, c, bad); err == nil {
			t.Errorf("EnsureTopic(%q) succeeded", bad)
		}
	}
}

func TestConfigErrors(t *testing.T) {
	_, c := server(t)
	if _, err := gcppubsub.NewPublisher(nil, nil); !errors.Is(err, postbox.ErrInvalidConfig) {
		t.Errorf("NewPublisher(nil) = %v", err)
	}
	hedged := pubsub.DefaultPublishSettings
	hedged.HedgingSettings = &pubsub.HedgingSettings{}
	if _, err := gcppubsub.NewPublisher(c, &gcppubsub.PublisherConfig{Settings: &hedged}); !errors.Is(err, postbox.ErrInvalidConfig) {
		t.Errorf("NewPublisher with hedging = %v", err)
	}
	if _, err := gcppubsub.NewPublisher(c, &gcppubsub.PublisherConfig{TopicPrefix: "1-"}); !errors.Is(err, postbox.ErrInvalidConfig) {
		t.Errorf("NewPublisher with a prefix starting with a digit = %v", err)
	}
	if _, err := gcppubsub.NewSubscriber(nil, &gcppubsub.SubscriberConfig{Subscription: "sub", Topic: "t"}); !errors.Is(err, postbox.ErrInvalidConfig) {
		t.Errorf("NewSubscriber(nil) = %v", err)
	}
	for _, cfg := range []gcppubsub.SubscriberConfig{
		{Topic: "t"}, {Subscription: "sub"}, {Subscription: "a b", Topic: "t"},
		{Subscription: "sub", Topic: "t", Concurrency: -1}, {Subscription: "sub", Topic: "t", MaxExtension: -time.Second},
	} {
		if _, err := gcppubsub.NewSubscriber(c, &cfg); !errors.Is(err, postbox.ErrInvalidConfig) {
			t.Errorf("NewSubscriber(%+v) = %v, want ErrInvalidConfig", cfg, err)
		}
	}
}

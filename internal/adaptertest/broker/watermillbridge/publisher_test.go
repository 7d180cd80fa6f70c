package watermillbridge_test

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"sync"
	"testing"
	"time"

	"github.com/ThreeDotsLabs/watermill"
	"github.com/ThreeDotsLabs/watermill/message"
	"github.com/ThreeDotsLabs/watermill/pubsub/gochannel"
	"github.com/postbox-go/postbox"
	"github.com/postbox-go/postbox/broker/brokertest"
	watermillbridge "github.com/postbox-go/postbox/broker/watermillbridge"
)

// goChannel returns a GoChannel whose Publish returns once the subscribers acked, so messages arrive in publish
// order, closed at the end of the test.
func goChannel(t *testing.T) *gochannel.GoChannel {
	gc := gochannel.NewGoChannel(gochannel.Config{BlockPublishUntilSubscriberAck: true}, watermill.NopLogger{})
	t.Cleanup(func() { _ = gc.Close() })
	return gc
}

// collect subscribes to topic and acks and keeps every message until the test ends.
type collector struct {
	mu   sync.Mutex
	msgs []*message.Message
	more chan struct{}
}

func collect(t *testing.T, sub message.Subscriber, topic string) *collector {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	ch, err := sub.Subscribe(ctx, topic)
	if err != nil {
		cancel()
		t.Fatal(err)
	}
	c := &collector{more: make(chan struct{})}
	done := make(chan struct{})
	go func() {
		defer close(done)
		for msg := range ch {
			c.mu.Lock()
			c.msgs = append(c.msgs, msg)
			close(c.more)
			c.more = make(chan struct{})
			c.mu.Unlock()
			msg.Ack()
		}
	}()
	t.Cleanup(func() { cancel(); <-done })
	return c
}

// wait returns the messages once there are n, failing the test after 30 seconds.
func (c *collector) wait(t *testing.T, n int) []*message.Message {
	t.Helper()
	deadline := time.After(30 * time.Second)
	for {
		c.mu.Lock()
		msgs, more := append([]*message.Message(nil), c.msgs...), c.more
		c.mu.Unlock()
		if len(msgs) >= n {
			return msgs
		}
		select {
		case <-more:
		case <-deadline:
			t.Fatalf("received %d of %d messages", len(msgs), n)
		}
	}
}

func TestPublishThroughGoChannel(t *testing.T) {
	gc := goChannel(t)
	topic := brokertest.Topic()
	got := collect(t, gc, topic)
	pub, err := watermillbridge.NewPublisher(gc, &watermillbridge.PublisherConfig{Concurrency: 4})
	if err != nil {
		t.Fatal(err)
	}
	recs := brokertest.Records(topic, 60, 5)
	for i := 0; i < len(recs); i += 20 {
		if err := pub.Publish(context.Background(), recs[i:i+20]); err != nil {
			t.Fatal(err)
		}
	}
	var m watermillbridge.Mapping
	byKey := map[string][]string{}
	for _, msg := range got.wait(t, len(recs)) {
		d, err := m.Delivered(msg)
		if err != nil {
			t.Fatal(err)
		}
		if msg.UUID != d.ID {
			t.Errorf("UUID %q, ce_id %q; want both the message ID", msg.UUID, d.ID)
		}
		byKey[d.Key] = append(byKey[d.Key], d.ID)
		var want postbox.Record
		for _, r := range recs {
			if r.ID == d.ID {
				want = r
			}
		}
		if d.Type != want.Type || d.Key != want.Key || string(d.Payload) != string(want.Payload) || !maps.Equal(d.Headers, want.Headers) {
			t.Errorf("message %s arrived as %+v, want %+v", d.ID, d, want.Message)
		}
	}
	for key, ids := range byKey {
		var want []string
		for _, r := range recs {
			if r.Key == key {
				want = append(want, r.ID)
			}
		}
		if fmt.Sprint(ids) != fmt.Sprint(want) {
			t.Errorf("key %q arrived out of order at Concurrency 4:\n got %v\nwant %v", key, ids, want)
		}
	}
}

// byTopic is a watermill publisher that sends each topic to its own GoChannel.
type byTopic map[string]message.Publisher

func (b byTopic) Publish(topic string, msgs ...*message.Message) error {
	return b[topic].Publish(topic, msgs...)
}
func (b byTopic) Close() error { return nil }

func TestPerMessageResults(t *testing.T) {
	up, down := goChannel(t), goChannel(t)
	_ = down.Close() // its Publish fails from now on
	good, bad := brokertest.Topic(), brokertest.Topic()
	got := collect(t, up, good)
	recs := brokertest.Records(good, 6, 0)
	recs[0].Key, recs[1].Key, recs[2].Key = "a", "b", "b"
	recs[1].Topic = bad                               // fails in watermill
	recs[3].Key = "c"                                 // fine
	recs[4].Headers = map[string]string{"ce_id": "x"} // cannot be mapped
	pub, err := watermillbridge.NewPublisher(byTopic{good: up, bad: down}, nil)
	if err != nil {
		t.Fatal(err)
	}
	brokertest.CheckBatch(t, pub.Publish(context.Background(), recs),
		[]brokertest.Outcome{{}, {Err: "closed"}, {Err: "same key"}, {}, {Err: "ce_id", Permanent: true}, {}})
	ids := map[string]bool{}
	for _, msg := range got.wait(t, 3) {
		ids[msg.UUID] = true
	}
	if len(ids) != 3 || !ids[recs[0].ID] || !ids[recs[3].ID] || !ids[recs[5].ID] {
		t.Fatalf("published %v, want records 0, 3 and 5", ids)
	}
}

func TestPublishCancelled(t *testing.T) {
	pub, err := watermillbridge.NewPublisher(goChannel(t), nil)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	recs := brokertest.Records(brokertest.Topic(), 3, 1)
	err = pub.Publish(ctx, recs)
	var be *postbox.BatchError
	if !errors.As(err, &be) || postbox.IsPermanent(err) {
		t.Fatalf("Publish with a cancelled context = %v, want a retryable BatchError", err)
	}
	for i, e := range be.Errs {
		if !errors.Is(e, context.Canceled) {
			t.Errorf("record %d: %v, want context.Canceled", i, e)
		}
	}
	if err := pub.Publish(context.Background(), nil); err != nil {
		t.Fatalf("Publish of an empty batch: %v", err)
	}
}

func TestPublisherConfigErrors(t *testing.T) {
	if _, err := watermillbridge.NewPublisher(nil, nil); !errors.Is(err, postbox.ErrInvalidConfig) {
		t.Errorf("NewPublisher(nil) = %v", err)
	}
	if _, err := watermillbridge.NewPublisher(goChannel(t), &watermillbridge.PublisherConfig{Concurrency: -1}); !errors.Is(err, postbox.ErrInvalidConfig) {
		t.Errorf("NewPublisher with negative Concurrency = %v", err)
	}
}

// TestPublishAfterClose: Close stops the publisher, not the watermill publisher it sends through.
func TestPublishAfterClose(t *testing.T) {
	gc := goChannel(t)
	pub, err := watermillbridge.NewPublisher(gc, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := pub.Close(); err != nil {
		t.Fatal(err)
	}
	if err := pub.Publish(context.Background(), brokertest.Records("t", 1, 0)); !errors.Is(err, watermillbridge.ErrClosed) || postbox.IsPermanent(err) {
		t.Errorf("Publish after Close = %v, want a retryable ErrClosed", err)
	}
	if err := gc.Publish("t", message.NewMessage("1", nil)); err != nil {
		t.Errorf("the watermill publisher was closed with the bridge: %v", err)
	}
}

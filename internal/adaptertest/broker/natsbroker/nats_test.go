package natsbroker_test

import (
	"bytes"
	"context"
	"errors"
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

func stream(t *testing.T, js jetstream.JetStream, cfg jetstream.StreamConfig) {
	t.Helper()
	if _, err := natsbroker.EnsureStream(context.Background(), js, cfg); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = js.DeleteStream(context.Background(), cfg.Name) })
}

func TestPublishRefusesWhatNoRetryFixes(t *testing.T) {
	js := connect(t, runEmbedded(t))
	topic := brokertest.Topic()
	stream(t, js, jetstream.StreamConfig{Name: "PERM", Subjects: []string{topic}, MaxMsgSize: 1024})
	pub, err := natsbroker.NewPublisher(js, nil)
	if err != nil {
		t.Fatal(err)
	}
	recs := brokertest.Records(topic, 5, 1)
	recs[1].Topic = "has space"
	recs[2].Headers = map[string]string{"Nats-Rollup": "all"} // would let a producer purge the stream
	recs[3].Payload = bytes.Repeat([]byte("x"), 2048)         // over the stream's MaxMsgSize
	brokertest.CheckRefused(t, pub.Publish(context.Background(), recs), []string{"", "whitespace", "Nats-Rollup", "maximum", ""})
}

func TestKeyInSubjectLetsConsumersFilterByKey(t *testing.T) {
	js := connect(t, runEmbedded(t))
	ctx := context.Background()
	topic := "orders." + brokertest.Topic()
	stream(t, js, jetstream.StreamConfig{Name: "BYKEY", Subjects: []string{natsbroker.TopicFilter(topic, true)}})
	pub, _ := natsbroker.NewPublisher(js, &natsbroker.PublisherConfig{KeyInSubject: true})
	recs := brokertest.Records(topic, 20, 4) // keys key-0, clé-ü-1, key-2, key-3
	if err := pub.Publish(ctx, recs); err != nil {
		t.Fatal(err)
	}
	cons, err := natsbroker.EnsureConsumer(ctx, js, "BYKEY", jetstream.ConsumerConfig{Durable: "one-key",
		FilterSubject: natsbroker.Subject(topic, "clé-ü-1", true)})
	if err != nil {
		t.Fatal(err)
	}
	if got := cons.CachedInfo().Config.FilterSubject; got != topic+".cl%C3%A9-%C3%BC-1" {
		t.Fatalf("filter subject %q", got)
	}
	sub, _ := natsbroker.NewSubscriber(cons, &natsbroker.SubscriberConfig{KeyInSubject: true})
	var want []string
	for _, r := range recs {
		if r.Key == "clé-ü-1" {
			want = append(want, r.ID)
		}
	}
	got := brokertest.ReceiveN(t, sub, len(want), nil)
	for i, d := range got {
		m := d.Message
		if m.ID != want[i] || m.Topic != topic || m.Key != "clé-ü-1" {
			t.Fatalf("delivery %d: %s topic %q key %q; want %s on %q with key clé-ü-1", i, m.ID, m.Topic, m.Key, want[i], topic)
		}
	}
}

func TestForeignMessagesAreTerminated(t *testing.T) {
	js := connect(t, runEmbedded(t))
	ctx := context.Background()
	topic := brokertest.Topic()
	stream(t, js, jetstream.StreamConfig{Name: "FOREIGN", Subjects: []string{topic}})
	if _, err := js.Publish(ctx, topic, []byte("plain, not a CloudEvent")); err != nil {
		t.Fatal(err)
	}
	pub, _ := natsbroker.NewPublisher(js, nil)
	recs := brokertest.Records(topic, 1, 1)
	if err := pub.Publish(ctx, recs); err != nil {
		t.Fatal(err)
	}
	cons, err := natsbroker.EnsureConsumer(ctx, js, "FOREIGN", jetstream.ConsumerConfig{Durable: "c"})
	if err != nil {
		t.Fatal(err)
	}
	sub, _ := natsbroker.NewSubscriber(cons, &natsbroker.SubscriberConfig{Logger: quietLogger()})
	if got := brokertest.ReceiveN(t, sub, 1, nil); got[0].Message.ID != recs[0].ID {
		t.Fatalf("handler got %+v, want only the Postbox message", got[0].Message)
	}
	info, err := cons.Info(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if info.NumAckPending != 0 || info.NumPending != 0 {
		t.Fatalf("consumer has %d messages awaiting ack and %d pending; the foreign message should be terminated",
			info.NumAckPending, info.NumPending)
	}
}

func TestReceiveReturnsWhenConsumerDeleted(t *testing.T) {
	js := connect(t, runEmbedded(t))
	ctx := context.Background()
	topic := brokertest.Topic()
	stream(t, js, jetstream.StreamConfig{Name: "GONE", Subjects: []string{topic}})
	cons, err := natsbroker.EnsureConsumer(ctx, js, "GONE", jetstream.ConsumerConfig{Durable: "c"})
	if err != nil {
		t.Fatal(err)
	}
	sub, _ := natsbroker.NewSubscriber(cons, &natsbroker.SubscriberConfig{PullExpiry: time.Second})
	pub, _ := natsbroker.NewPublisher(js, nil)
	if err := pub.Publish(ctx, brokertest.Records(topic, 1, 1)); err != nil {
		t.Fatal(err)
	}
	rctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	started := make(chan struct{})
	var once sync.Once
	done := make(chan error, 1)
	go func() {
		done <- sub.Receive(rctx, func(ctx context.Context, d *broker.Delivery) {
			_ = d.Ack(ctx) // before the consumer goes: an ack to a deleted consumer waits for ctx
			once.Do(func() { close(started) })
		})
	}()
	<-started
	if err := sub.Receive(rctx, func(context.Context, *broker.Delivery) {}); err == nil || !strings.Contains(err.Error(), "already running") {
		t.Fatalf("second concurrent Receive = %v, want an error saying it is already running", err)
	}
	if err := js.DeleteConsumer(ctx, "GONE", "c"); err != nil {
		t.Fatal(err)
	}
	if err := <-done; err == nil || !errors.Is(err, jetstream.ErrConsumerDeleted) && !errors.Is(err, jetstream.ErrConsumerNotFound) {
		t.Fatalf("Receive = %v after its consumer was deleted; want an error before the context ends", err)
	}
}

func TestConfigErrors(t *testing.T) {
	js := connect(t, runEmbedded(t))
	ctx := context.Background()
	if _, err := natsbroker.NewPublisher(nil, nil); !errors.Is(err, postbox.ErrInvalidConfig) {
		t.Errorf("NewPublisher(nil) = %v", err)
	}
	if _, err := natsbroker.NewSubscriber(nil, nil); !errors.Is(err, postbox.ErrInvalidConfig) {
		t.Errorf("NewSubscriber(nil) = %v", err)
	}
	if _, err := natsbroker.EnsureStream(ctx, js, jetstream.StreamConfig{Subjects: []string{"x"}}); err == nil {
		t.Error("EnsureStream accepted a stream without a name")
	}
	stream(t, js, jetstream.StreamConfig{Name: "CFG", Subjects: []string{"cfg"}})
	if _, err := natsbroker.EnsureConsumer(ctx, js, "CFG", jetstream.ConsumerConfig{}); err == nil || !strings.Contains(err.Error(), "Durable") {
		t.Errorf("EnsureConsumer without Durable = %v", err)
	}
	if _, err := natsbroker.EnsureConsumer(ctx, js, "CFG", jetstream.ConsumerConfig{Durable: "x", AckPolicy: jetstream.AckNonePolicy}); err == nil {
		t.Error("EnsureConsumer accepted AckNonePolicy")
	}
	cons, err := js.CreateOrUpdateConsumer(ctx, "CFG", jetstream.ConsumerConfig{Durable: "none", AckPolicy: jetstream.AckNonePolicy})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := natsbroker.NewSubscriber(cons, nil); !errors.Is(err, postbox.ErrInvalidConfig) || !strings.Contains(err.Error(), "AckExplicitPolicy") {
		t.Errorf("NewSubscriber on an AckNone consumer = %v", err)
	}
	if _, err := natsbroker.NewSubscriber(cons, &natsbroker.SubscriberConfig{Concurrency: -1}); !errors.Is(err, postbox.ErrInvalidConfig) {
		t.Errorf("NewSubscriber with negative Concurrency = %v", err)
	}
}

func TestEmbedded(t *testing.T) {
	if _, _, err := embedded.Run(context.Background(), ""); err == nil {
		t.Fatal("Run without a directory succeeded")
	}
	dir := t.TempDir()
	url, shutdown, err := embedded.Run(context.Background(), dir)
	if err != nil {
		t.Fatal(err)
	}
	nc, err := nats.Connect(url, nats.NoReconnect())
	if err != nil {
		shutdown()
		t.Fatal(err)
	}
	js, _ := jetstream.New(nc)
	_, err = natsbroker.EnsureStream(context.Background(), js, jetstream.StreamConfig{Name: "KEEP", Subjects: []string{"keep"}})
	if err != nil {
		t.Fatalf("JetStream on the embedded server: %v", err)
	}
	nc.Close()
	shutdown()
	if nc, err := nats.Connect(url, nats.NoReconnect()); err == nil {
		nc.Close()
		t.Fatal("connected to the embedded server after shutdown")
	}

	// Streams persist in dir across runs.
	url, shutdown, err = embedded.Run(context.Background(), dir)
	if err != nil {
		t.Fatal(err)
	}
	defer shutdown()
	js = connect(t, url)
	if _, err := js.Stream(context.Background(), "KEEP"); err != nil {
		t.Fatalf("stream made before a restart on the same directory: %v", err)
	}
}

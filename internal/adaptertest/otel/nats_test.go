package postboxotel_test

import (
	"context"
	"database/sql"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/postbox-go/postbox"
	"github.com/postbox-go/postbox/broker"
	natsbroker "github.com/postbox-go/postbox/broker/natsbroker"
	"github.com/postbox-go/postbox/broker/natsbroker/embedded"
	postboxotel "github.com/postbox-go/postbox/otel"
)

// TestTraceContextThroughNATS: the producer's span context travels through the outbox, the relay and a NATS
// JetStream server to the consumer, whose process span links to it.
func TestTraceContextThroughNATS(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	url, stop, err := embedded.Run(ctx, t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	defer stop()
	nc, err := nats.Connect(url)
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := natsbroker.EnsureStream(ctx, js, jetstream.StreamConfig{Name: "T", Subjects: []string{"orders"}}); err != nil {
		t.Fatal(err)
	}
	cons, err := natsbroker.EnsureConsumer(ctx, js, "T", jetstream.ConsumerConfig{Durable: "billing", AckPolicy: jetstream.AckExplicitPolicy})
	if err != nil {
		t.Fatal(err)
	}

	spans := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(spans))
	defer tp.Shutdown(context.Background())
	c := newClient(t, &postbox.Config{OnEnqueue: postboxotel.InjectTraceContext(nil)})
	pctx, producer := tp.Tracer("shop").Start(ctx, "place order")
	err = c.InTx(pctx, func(ctx context.Context, tx *sql.Tx) error {
		_, err := c.Enqueue(ctx, tx, postbox.Message{Topic: "orders", Key: "o-1", Type: "order.created", Payload: []byte(`{}`)})
		return err
	})
	producer.End()
	if err != nil {
		t.Fatal(err)
	}
	pub, err := natsbroker.NewPublisher(js, nil)
	if err != nil {
		t.Fatal(err)
	}
	relay, err := postbox.NewRelay(c, postboxotel.WrapPublisher(pub, tp, "nats"), nil)
	if err != nil {
		t.Fatal(err)
	}
	if n, err := relay.RunOnce(ctx); n != 1 || err != nil {
		t.Fatalf("RunOnce = %d, %v", n, err)
	}

	sub, err := natsbroker.NewSubscriber(cons, nil)
	if err != nil {
		t.Fatal(err)
	}
	rctx, stopReceive := context.WithCancel(ctx)
	received := make(chan postbox.Message, 1)
	done := make(chan error, 1)
	go func() {
		// The consumer processes through its inbox, inside the process span.
		billing, err := postbox.NewConsumer(c, "billing", nil)
		if err != nil {
			done <- err
			return
		}
		h := postboxotel.WrapHandler(tp, "billing", func(ctx context.Context, tx *sql.Tx, m postbox.Message) ([]postbox.Message, error) {
			received <- m
			return nil, nil
		})
		done <- broker.Consume(rctx, sub, billing, h, nil)
	}()
	select {
	case <-received:
	case <-ctx.Done():
		t.Fatal("nothing received from NATS")
	}
	stopReceive()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	want := producer.SpanContext()
	for _, s := range spans.Ended() {
		if s.Name() != "process orders" {
			continue
		}
		for _, l := range s.Links() {
			if l.SpanContext.TraceID() == want.TraceID() && l.SpanContext.SpanID() == want.SpanID() {
				return
			}
		}
		t.Fatalf("process span links %v; want the producer span %v", s.Links(), want)
	}
	t.Fatal("no process span ended")
}

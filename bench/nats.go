package bench

import (
	"context"
	"errors"
	"fmt"
	"runtime/debug"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/postbox-go/postbox"
	natsbroker "github.com/postbox-go/postbox/broker/natsbroker"
)

// benchRelayNATS drains the backlog through the NATS JetStream adapter, which publishes asynchronously and waits
// for every ack, against the same adapter publishing the same messages straight from memory in batches of the
// same size: the broker's own limit for this publisher.
func benchRelayNATS[TTx any](ctx context.Context, t *target[TTx], o Options) (Result, error) {
	nc, err := nats.Connect(o.NATSURL, nats.Name("postbox-bench"))
	if err != nil {
		return Result{}, fmt.Errorf("NATS is not reachable at %s (start nats-server -js, or pass --broker): %w", o.NATSURL, err)
	}
	defer nc.Close()
	js, err := jetstream.New(nc, jetstream.WithPublishAsyncMaxPending(4*o.BatchSize),
		jetstream.WithPublishAsyncTimeout(30*time.Second))
	if err != nil {
		return Result{}, err
	}
	natsStream := o.natsStream()
	if err := js.DeleteStream(ctx, natsStream); err != nil && !errors.Is(err, jetstream.ErrStreamNotFound) {
		return Result{}, err
	}
	stream, err := js.CreateStream(ctx, jetstream.StreamConfig{Name: natsStream, Subjects: []string{o.Topic},
		Storage: jetstream.FileStorage})
	if err != nil {
		return Result{}, fmt.Errorf("create JetStream stream (is JetStream enabled?): %w", err)
	}
	defer js.DeleteStream(context.WithoutCancel(ctx), natsStream)
	pub, err := natsbroker.NewPublisher(js, nil)
	if err != nil {
		return Result{}, err
	}

	d, err := prepareDrain(ctx, t, o, 4, "bench_nats", "bench_nats_raw", pub)
	if err != nil {
		return Result{}, err
	}
	defer d.close()
	relay := d.relay
	direct := newDirect(ctx, pub, o)
	o.Logger.Info("relaying to JetStream and publishing to it directly, in turns", "events", o.Events)
	debug.FreeOSMemory()
	total := int64(o.Events)
	rates, err := interleave(o.Turns, total,
		timed(func(share int64, last bool) (int64, error) { return relayShare(ctx, relay, share, total, last) }),
		direct.publish)
	if err != nil {
		return Result{}, err
	}
	info, err := stream.Info(ctx)
	if err != nil {
		return Result{}, err
	}
	res := newResult(rates[0], rates[1])
	res.Extra["stream_msgs"] = float64(info.State.Msgs)
	res.Extra["batch_size"] = float64(o.BatchSize)
	res.Extra["workers"] = float64(o.workers(false))
	return res, nil
}

// direct publishes fresh copies of the backlog's messages through the publisher, without an outbox, in batches
// of the relay's size from as many goroutines as the relay has workers.
type direct struct {
	ctx  context.Context
	pub  postbox.Publisher
	o    Options
	sent int64
}

func newDirect(ctx context.Context, pub postbox.Publisher, o Options) *direct {
	return &direct{ctx: ctx, pub: pub, o: o}
}

// publish sends share more messages, or all that are left when last, and returns how many it sent and how long
// sending them took; building them is not timed.
func (d *direct) publish(share int64, last bool) (int64, time.Duration, error) {
	n := min(share, int64(d.o.Events)-d.sent)
	if last {
		n = int64(d.o.Events) - d.sent
	}
	recs := make([]postbox.Record, n)
	for i := range recs {
		m := d.o.message(int(d.sent) + i)
		m.ID = postbox.NewID()
		recs[i] = postbox.Record{Message: m, CreatedAt: time.Now()}
	}
	d.sent += n
	start := time.Now()
	batches := make(chan []postbox.Record, len(recs)/d.o.BatchSize+1)
	for i := 0; i < len(recs); i += d.o.BatchSize {
		batches <- recs[i:min(i+d.o.BatchSize, len(recs))]
	}
	close(batches)
	err := inParallel(d.o.workers(false), func() error {
		for b := range batches {
			if err := d.pub.Publish(d.ctx, b); err != nil {
				return err
			}
		}
		return nil
	})
	return n, time.Since(start), err
}

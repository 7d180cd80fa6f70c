package natsbroker

import (
	"context"
	"fmt"
	"log/slog"
	"strings"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/postbox-go/postbox"
	"github.com/postbox-go/postbox/broker"
	"github.com/postbox-go/postbox/broker/internal/adapterkit"
)

// Defaults for SubscriberConfig.
const (
	DefaultConcurrency = 8
	DefaultPrefetch    = 64
)

// SubscriberConfig configures a Subscriber. The zero value is valid.
type SubscriberConfig struct {
	// Concurrency is how many handler calls may run at once. Messages with the same key always go to the same
	// one of them, in stream order, so per-key order holds at any concurrency; messages without a key are
	// spread over all. Default: DefaultConcurrency.
	Concurrency int
	// Prefetch is how many messages the client pulls ahead of the handlers. Their ack timers run while they
	// wait, so keep Prefetch × handler time well under the consumer's AckWait. Default: DefaultPrefetch.
	Prefetch int
	// PullExpiry is how long each pull request waits on the server before the client renews it. Receive notices
	// a deleted consumer at the latest when a renewal fails. Default: the client's 30 seconds.
	PullExpiry time.Duration
	// KeyInSubject must match the publishers' PublisherConfig.KeyInSubject: with it, the topic is the subject
	// without its last token.
	KeyInSubject bool
	// Logger receives messages that are not Postbox CloudEvents (they are terminated) and transient consumer
	// errors. Default: slog.Default().
	Logger *slog.Logger
}

// Subscriber receives messages from a JetStream pull consumer with explicit acks. It implements
// broker.Subscriber.
type Subscriber struct {
	cons    jetstream.Consumer
	cfg     SubscriberConfig
	ce      broker.CloudEvents
	log     *slog.Logger
	running adapterkit.Running
}

// WithDefaults returns a copy of c with every zero field set to its default. A nil c gives the defaults.
func (c *SubscriberConfig) WithDefaults() SubscriberConfig {
	out := adapterkit.Copy(c)
	adapterkit.Default(&out.Concurrency, DefaultConcurrency)
	adapterkit.Default(&out.Prefetch, DefaultPrefetch)
	adapterkit.Default(&out.Logger, slog.Default())
	return out
}

func (c SubscriberConfig) validate() error {
	if c.Concurrency < 0 || c.Prefetch < 0 || c.PullExpiry < 0 {
		return fmt.Errorf("%w: natsbroker.NewSubscriber: Concurrency %d, Prefetch %d and PullExpiry %v must not be negative (0 means the default)",
			postbox.ErrInvalidConfig, c.Concurrency, c.Prefetch, c.PullExpiry)
	}
	return nil
}

// NewSubscriber returns a subscriber on cons, a pull consumer with AckPolicy explicit (see EnsureConsumer). It
// does no I/O. cfg may be nil.
func NewSubscriber(cons jetstream.Consumer, cfg *SubscriberConfig) (*Subscriber, error) {
	if cons == nil {
		return nil, fmt.Errorf("%w: natsbroker.NewSubscriber needs a consumer; make one with EnsureConsumer or js.Consumer", postbox.ErrInvalidConfig)
	}
	c := cfg.WithDefaults()
	if err := c.validate(); err != nil {
		return nil, err
	}
	if info := cons.CachedInfo(); info != nil && info.Config.AckPolicy != jetstream.AckExplicitPolicy {
		return nil, fmt.Errorf("%w: natsbroker.NewSubscriber: consumer %s has AckPolicy %v; it must be AckExplicitPolicy so that messages are acked after their transaction commits",
			postbox.ErrInvalidConfig, info.Name, info.Config.AckPolicy)
	}
	return &Subscriber{cons: cons, cfg: c, ce: broker.CloudEvents{Prefix: broker.PrefixNATS}, log: c.Logger}, nil
}

// Receive pulls messages and calls handle for each until ctx is cancelled (see broker.Subscriber). On the way
// out it stops pulling, nacks the messages it had prefetched so other subscribers get them at once, waits for
// the running handlers and returns nil. It returns an error when the consumer is deleted or the connection is
// closed.
func (s *Subscriber) Receive(ctx context.Context, handle broker.DeliveryHandler) error {
	done, err := s.running.Start(ctx, "natsbroker", handle, "")
	if done == nil {
		return err // refused, or ctx already ended
	}
	defer done()
	opts := []jetstream.PullMessagesOpt{jetstream.PullMaxMessages(s.cfg.Prefetch)}
	if s.cfg.PullExpiry > 0 {
		opts = append(opts, jetstream.PullExpiry(s.cfg.PullExpiry))
	}
	it, err := s.cons.Messages(opts...)
	if err != nil {
		return fmt.Errorf("natsbroker: pull from consumer: %w", err)
	}

	lanes := broker.NewLanes(s.cfg.Concurrency, 0, func(d *broker.Delivery) { broker.Dispatch(ctx, d, handle) })
	defer lanes.Close()

	for {
		msg, err := it.Next(jetstream.NextContext(ctx))
		if err != nil {
			if ctx.Err() != nil {
				s.drain(ctx, it)
				return nil
			}
			it.Stop()
			return fmt.Errorf("natsbroker: receive: %w", err)
		}
		d, ok := s.delivery(ctx, msg)
		if !ok {
			continue
		}
		select {
		case lanes.For(d.Message.Key) <- d:
		case <-ctx.Done():
			_ = msg.Nak()
			s.drain(ctx, it)
			return nil
		}
	}
}

// drain stops pulling and nacks what was prefetched, so those messages go to other subscribers now rather than
// after AckWait.
func (s *Subscriber) drain(ctx context.Context, it jetstream.MessagesContext) {
	it.Drain()
	dctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), broker.DefaultSettleTimeout)
	defer cancel()
	for {
		msg, err := it.Next(jetstream.NextContext(dctx))
		if err != nil {
			if dctx.Err() != nil {
				it.Stop()
			}
			return
		}
		_ = msg.Nak() // on failure AckWait brings it back
	}
}

// delivery decodes msg, terminating it if it is not a Postbox message.
func (s *Subscriber) delivery(ctx context.Context, msg jetstream.Msg) (*broker.Delivery, bool) {
	h := make(map[string]string, len(msg.Headers()))
	for k, v := range msg.Headers() {
		if len(v) > 0 && k != jetstream.MsgIDHeader {
			h[k] = v[0]
		}
	}
	e, err := s.ce.Decode(h, msg.Data())
	if err != nil {
		s.log.ErrorContext(ctx, "natsbroker: terminating a message that is not a Postbox CloudEvent",
			"subject", msg.Subject(), "err", err)
		_ = msg.TermWithReason("not a Postbox CloudEvent: " + err.Error())
		return nil, false
	}
	e.Message.Topic = msg.Subject()
	if s.cfg.KeyInSubject {
		if i := strings.LastIndexByte(e.Message.Topic, '.'); i > 0 {
			e.Message.Topic = e.Message.Topic[:i]
		}
	}
	attempt := 0
	if md, err := msg.Metadata(); err == nil {
		attempt = int(md.NumDelivered)
	}
	return broker.NewDelivery(e, attempt, acker{msg}), true
}

// acker settles one JetStream message.
type acker struct{ msg jetstream.Msg }

// Ack waits for the server to confirm the ack, so a nil error means the message will not come again.
func (a acker) Ack(ctx context.Context) error { return a.msg.DoubleAck(ctx) }

func (a acker) Nack(_ context.Context, delay time.Duration) error {
	if delay > 0 {
		return a.msg.NakWithDelay(delay)
	}
	return a.msg.Nak()
}

// Reject terminates the message: JetStream never delivers it again to this consumer.
func (a acker) Reject(context.Context) error { return a.msg.Term() }

var _ broker.Rejecter = acker{}

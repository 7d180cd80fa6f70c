package gcppubsub

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	"cloud.google.com/go/pubsub/v2"
	"github.com/postbox-go/postbox"
	"github.com/postbox-go/postbox/broker"
	"github.com/postbox-go/postbox/broker/internal/adapterkit"
)

// DefaultConcurrency is SubscriberConfig.Concurrency's default.
const DefaultConcurrency = 8

// SubscriberConfig configures a Subscriber. Subscription and Topic are required.
type SubscriberConfig struct {
	// Subscription is the subscription ID or full name. Make it with EnsureSubscription, so that it has message
	// ordering.
	Subscription string
	// Topic is the Postbox topic of the subscription's messages (its Pub/Sub topic without the publishers'
	// TopicPrefix). Pub/Sub messages do not name their topic, so delivered messages get this one.
	Topic string
	// Concurrency is how many handler calls may run at once (the Pub/Sub client's MaxOutstandingMessages).
	// Messages with the same ordering key are handled one at a time, in order. Default: DefaultConcurrency.
	Concurrency int
	// MaxExtension is how long the Pub/Sub client keeps extending the ack deadline of a message whose handler
	// has not settled it; after that Pub/Sub delivers it again. It is the ack timeout of a hung handler.
	// Default: the client's 60 minutes.
	MaxExtension time.Duration
	// NackRejected makes Reject nack instead of ack, so that a subscription with a dead-letter policy moves a
	// rejected message (and a message that is not a Postbox CloudEvent) to its dead-letter topic once
	// MaxDeliveryAttempts is reached. Default: false, Reject acks: the message is dropped and logged.
	NackRejected bool
	// Logger receives messages that are not Postbox CloudEvents. Default: slog.Default().
	Logger *slog.Logger
}

// Subscriber receives messages from a Pub/Sub subscription with the client's streaming pull. It implements
// broker.Subscriber.
type Subscriber struct {
	c       *pubsub.Client
	cfg     SubscriberConfig
	ce      broker.CloudEvents
	log     *slog.Logger
	running adapterkit.Running
}

// WithDefaults returns a copy of c with every zero field set to its default. A nil c gives the defaults.
func (c *SubscriberConfig) WithDefaults() SubscriberConfig {
	out := adapterkit.Copy(c)
	adapterkit.Default(&out.Concurrency, DefaultConcurrency)
	adapterkit.Default(&out.Logger, slog.Default())
	return out
}

func (c SubscriberConfig) validate(project string) error {
	if c.Subscription == "" || c.Topic == "" {
		return fmt.Errorf("%w: gcppubsub.NewSubscriber needs the Subscription and the Postbox Topic its messages carry",
			postbox.ErrInvalidConfig)
	}
	if _, err := subscriptionName(project, c.Subscription); err != nil {
		return fmt.Errorf("%w: gcppubsub.NewSubscriber: Subscription: %v", postbox.ErrInvalidConfig, err)
	}
	if c.Concurrency < 0 || c.MaxExtension < 0 {
		return fmt.Errorf("%w: gcppubsub.NewSubscriber: Concurrency %d and MaxExtension %v must not be negative (0 means the default)",
			postbox.ErrInvalidConfig, c.Concurrency, c.MaxExtension)
	}
	return nil
}

// NewSubscriber returns a subscriber on c configured by cfg, which needs at least a Subscription and a Topic.
// It does no I/O.
func NewSubscriber(c *pubsub.Client, cfg *SubscriberConfig) (*Subscriber, error) {
	if c == nil {
		return nil, fmt.Errorf("%w: gcppubsub.NewSubscriber needs a client; make one with pubsub.NewClient", postbox.ErrInvalidConfig)
	}
	conf := cfg.WithDefaults()
	if err := conf.validate(c.Project()); err != nil {
		return nil, err
	}
	return &Subscriber{c: c, cfg: conf, ce: broker.CloudEvents{Prefix: Prefix}, log: conf.Logger}, nil
}

// Receive pulls messages and calls handle for each until ctx is cancelled (see broker.Subscriber). On the way
// out the Pub/Sub client nacks the messages it had pulled ahead and waits for the running handlers. It returns
// an error when Pub/Sub refuses the pull for good (the subscription does not exist, permission denied).
func (s *Subscriber) Receive(ctx context.Context, handle broker.DeliveryHandler) error {
	done, err := s.running.Start(ctx, "gcppubsub", handle, "")
	if done == nil {
		return err // refused, or ctx already ended
	}
	defer done()
	sub := s.c.Subscriber(s.cfg.Subscription)
	sub.ReceiveSettings.MaxOutstandingMessages = s.cfg.Concurrency
	if s.cfg.MaxExtension > 0 {
		sub.ReceiveSettings.MaxExtension = s.cfg.MaxExtension
	}
	err = sub.Receive(ctx, func(ctx context.Context, m *pubsub.Message) {
		if d, ok := s.delivery(ctx, m); ok {
			broker.Dispatch(ctx, d, handle)
		}
	})
	if err != nil {
		return fmt.Errorf("gcppubsub: receive from %s: %w", s.cfg.Subscription, err)
	}
	return nil
}

// delivery decodes m, settling it as rejected if it is not a Postbox message.
func (s *Subscriber) delivery(ctx context.Context, m *pubsub.Message) (*broker.Delivery, bool) {
	e, err := s.ce.Decode(m.Attributes, m.Data)
	if err != nil {
		how := "acking (dropping)"
		if s.cfg.NackRejected {
			how = "nacking"
		}
		s.log.ErrorContext(ctx, "gcppubsub: "+how+" a message that is not a Postbox CloudEvent",
			"subscription", s.cfg.Subscription, "pubsub_id", m.ID, "err", err)
		if s.cfg.NackRejected {
			m.Nack()
		} else {
			m.Ack()
		}
		return nil, false
	}
	if e.Message.Key == "" {
		e.Message.Key = m.OrderingKey // a CloudEvents producer that keeps the key only in the ordering key
	}
	e.Message.Topic = s.cfg.Topic
	attempt := 0
	if m.DeliveryAttempt != nil {
		attempt = *m.DeliveryAttempt
	}
	var a broker.Acker = rejecter{acker{m}}
	if s.cfg.NackRejected {
		a = acker{m}
	}
	return broker.NewDelivery(e, attempt, a), true
}

// acker settles one Pub/Sub message, waiting for the result, which with exactly-once delivery is the service's
// confirmation.
type acker struct{ m *pubsub.Message }

// Ack acks the message. On a subscription with exactly-once delivery a nil error means Pub/Sub will not deliver
// it again; otherwise the ack is sent in the background and may be lost.
func (a acker) Ack(ctx context.Context) error { return result(ctx, a.m.AckWithResult()) }

// Nack asks Pub/Sub to deliver the message again. Pub/Sub cannot delay one message: the subscription's retry
// policy sets the backoff (see EnsureSubscription), so delay is not used.
func (a acker) Nack(ctx context.Context, _ time.Duration) error {
	return result(ctx, a.m.NackWithResult())
}

// rejecter is an acker whose Reject acks: the message is dropped.
type rejecter struct{ acker }

// Reject acks the message so that it is never delivered again.
func (r rejecter) Reject(ctx context.Context) error { return r.Ack(ctx) }

var _ broker.Rejecter = rejecter{}

func result(ctx context.Context, r *pubsub.AckResult) error {
	st, err := r.Get(ctx)
	if err != nil {
		return err
	}
	if st != pubsub.AcknowledgeStatusSuccess {
		return fmt.Errorf("gcppubsub: acknowledgement status %v", st)
	}
	return nil
}

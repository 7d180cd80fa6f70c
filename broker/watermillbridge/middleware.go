package watermillbridge

import (
	"context"
	"errors"
	"fmt"

	"github.com/ThreeDotsLabs/watermill/message"
	"github.com/postbox-go/postbox"
	"github.com/postbox-go/postbox/broker"
)

// MiddlewareConfig configures the middleware NewMiddleware returns. The zero value is valid.
type MiddlewareConfig struct {
	// Mapping says how delivered messages are read (their ID, type and key) and how produced messages become
	// outbox messages. Default: the zero Mapping.
	Mapping Mapping
	// Topic is the outbox topic of the messages the handler produces. Default: the handler's publish topic (the
	// publishTopic of Router.AddHandler), which the router puts in each message's context. A handler added
	// without a publish topic (AddConsumerHandler) that produces messages needs Topic.
	Topic string
}

// WithDefaults returns a copy of c with every zero field set to its default. A nil c gives the defaults.
func (c *MiddlewareConfig) WithDefaults() MiddlewareConfig {
	if c == nil {
		return MiddlewareConfig{}
	}
	return *c
}

// NewMiddleware returns a watermill handler middleware that handles each message exactly once per consumer,
// with its effects and the messages it produces committed together. For each delivered message it runs
// consumer.ProcessFrom: it begins a transaction, claims the message's ID in consumer's inbox, runs the handler,
// enqueues the messages the handler returns into the outbox (instead of letting the router publish them), and
// commits; the relay publishes them after the commit. The handler finds the transaction with Tx and must do its
// database writes on it. The message's CloudEvents source (<prefix>source) is passed along, for consumers that
// scope their inbox by source.
//
// The outcome decides what the router sees. A message the inbox has seen before (Duplicate), or that the failure
// policy (postbox.ConsumerConfig.MaxFailures) gave up on (Failed), is acked without running the handler. A
// failure (Retry) rolls everything back and is returned, so the router nacks the message and it is delivered
// again. A message that can never be processed (Rejected: an invalid ID, over the consumer's caps, or a
// permanent error with no failure policy) returns its error marked postbox.Permanent: add middleware.PoisonQueue
// before this one to park such messages, since watermill has no reject and the router would nack them forever.
//
// Add it after middleware that retries (middleware.Retry), so that each attempt runs in a fresh transaction:
//
//	router.AddMiddleware(middleware.Recoverer, poison, middleware.Retry{MaxRetries: 3}.Middleware, inbox)
//
// cfg may be nil.
func NewMiddleware[TTx any](consumer *postbox.Consumer[TTx], cfg *MiddlewareConfig) (message.HandlerMiddleware, error) {
	if consumer == nil {
		return nil, fmt.Errorf("%w: watermillbridge.NewMiddleware needs a consumer; make one with postbox.NewConsumer(client, \"billing\", nil)",
			postbox.ErrInvalidConfig)
	}
	c := cfg.WithDefaults() // every value is valid
	return func(h message.HandlerFunc) message.HandlerFunc {
		return func(msg *message.Message) ([]*message.Message, error) {
			m, err := c.Mapping.Delivered(msg)
			if err != nil {
				return nil, postbox.Permanent(err)
			}
			topic := c.Topic
			if topic == "" {
				topic = message.PublishTopicFromCtx(msg.Context())
			}
			outer := msg.Context()
			source := msg.Metadata.Get(c.Mapping.prefix() + broker.AttrSource)
			_, err = consumer.ProcessFrom(outer, source, m, func(ctx context.Context, tx TTx, _ postbox.Message) ([]postbox.Message, error) {
				msg.SetContext(context.WithValue(ctx, txKey{}, tx))
				defer msg.SetContext(outer)
				produced, err := h(msg)
				if err != nil || len(produced) == 0 {
					return nil, err
				}
				return c.outbox(produced, topic)
			})
			// Processed, Duplicate and Failed return nil: the router acks. The produced messages are in the
			// outbox now, so the router must not publish them too.
			return nil, err
		}
	}, nil
}

// outbox converts the messages a handler produced. A message that cannot be converted is a Permanent error: the
// handler would produce it again on every delivery.
func (c MiddlewareConfig) outbox(produced []*message.Message, topic string) ([]postbox.Message, error) {
	if topic == "" {
		return nil, postbox.Permanent(errors.New("watermillbridge: the handler produced messages but has no publish topic; " +
			"set MiddlewareConfig.Topic, or add the handler with Router.AddHandler and a publish topic"))
	}
	out := make([]postbox.Message, len(produced))
	for i, p := range produced {
		m, err := c.Mapping.Produced(p, topic)
		if err != nil {
			return nil, postbox.Permanent(err)
		}
		out[i] = m
	}
	return out, nil
}

// Tx returns the transaction the middleware runs msg's handler in: a pgx.Tx with the pgxv5 driver, a *sql.Tx
// with databasesql. Do the handler's writes on it, so that they commit with the inbox claim and the produced
// messages. It reports false outside the middleware.
func Tx[TTx any](msg *message.Message) (TTx, bool) {
	tx, ok := msg.Context().Value(txKey{}).(TTx)
	return tx, ok
}

type txKey struct{}

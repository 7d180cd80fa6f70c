package natsbroker

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/postbox-go/postbox"
	"github.com/postbox-go/postbox/broker"
	"github.com/postbox-go/postbox/broker/internal/adapterkit"
)

// PublisherConfig configures a Publisher. The zero value is valid.
type PublisherConfig struct {
	// KeyInSubject publishes each message to topic + "." + KeyToken(key) instead of topic, so that streams and
	// consumers can select or limit messages by key. The stream must then cover TopicFilter(topic, true).
	// Default: false, the subject is the topic and the key travels only in the ce-partitionkey header.
	KeyInSubject bool
	// Source is the CloudEvents source attribute. Default: broker.DefaultSource ("postbox").
	Source string
	// Logger receives a debug line for each message that failed to publish. Default: slog.Default().
	Logger *slog.Logger
}

// ErrClosed is returned by Publish after Close.
var ErrClosed = adapterkit.ErrClosed("natsbroker")

// Publisher publishes batches to JetStream with asynchronous publishes, waiting for every publish ack. It
// implements postbox.Publisher and is safe for concurrent use.
type Publisher struct {
	js     jetstream.JetStream
	cfg    PublisherConfig
	ce     broker.CloudEvents
	log    *slog.Logger
	closed adapterkit.Closed
}

// WithDefaults returns a copy of c with every zero field set to its default. A nil c gives the defaults.
func (c *PublisherConfig) WithDefaults() PublisherConfig {
	out := adapterkit.Copy(c)
	adapterkit.Default(&out.Source, broker.DefaultSource)
	adapterkit.Default(&out.Logger, slog.Default())
	return out
}

// NewPublisher returns a publisher on js. It does no I/O. Create js with jetstream.WithPublishAsyncTimeout so
// that acks lost with a connection time out even when a caller's context has no deadline. cfg may be nil.
func NewPublisher(js jetstream.JetStream, cfg *PublisherConfig) (*Publisher, error) {
	if js == nil {
		return nil, fmt.Errorf("%w: natsbroker.NewPublisher needs a JetStream context; make one with jetstream.New(nc)", postbox.ErrInvalidConfig)
	}
	c := cfg.WithDefaults() // every value is valid
	return &Publisher{js: js, cfg: c, ce: broker.CloudEvents{Prefix: broker.PrefixNATS, Source: c.Source}, log: c.Logger}, nil
}

// Close makes Publish return ErrClosed from now on. It leaves the connection open: close it yourself once the
// relay has stopped.
func (p *Publisher) Close() error { return p.closed.Close() }

// Publish sends every record with an asynchronous publish, then waits for each publish ack. A record JetStream
// acknowledged as a duplicate (its ID seen within the stream's Duplicates window) counts as published. It returns
// nil when all were acknowledged, and otherwise a *postbox.BatchError. Records no retry can publish (a topic
// that is not a subject, a reserved header, a message over the size limit) fail with a postbox.Permanent error.
func (p *Publisher) Publish(ctx context.Context, batch []postbox.Record) error {
	if skip, err := p.closed.Skip(ErrClosed, len(batch)); skip {
		return err
	}
	errs := make([]error, len(batch))
	futures := make([]jetstream.PubAckFuture, len(batch))
	for i, msg := range adapterkit.Messages(ctx, "natsbroker", batch, errs, p.message) {
		rec := batch[i]
		f, err := p.js.PublishMsgAsync(msg, jetstream.WithMsgID(rec.ID))
		if err != nil {
			errs[i] = classify(rec, err)
			continue
		}
		futures[i] = f
	}
	for i, f := range futures {
		if f == nil {
			continue
		}
		select {
		case <-f.Ok():
		case err := <-f.Err():
			errs[i] = classify(batch[i], err)
		case <-ctx.Done():
			errs[i] = fmt.Errorf("natsbroker: message %s: no publish ack before the context ended (it may still be stored): %w",
				batch[i].ID, ctx.Err())
		}
	}
	return adapterkit.Result(ctx, p.log, errs)
}

// message builds the NATS message for rec.
func (p *Publisher) message(rec postbox.Record) (*nats.Msg, error) {
	if err := checkTopic(rec.Topic); err != nil {
		return nil, fmt.Errorf("natsbroker: message %s: %v", rec.ID, err)
	}
	for name := range rec.Headers {
		if len(name) >= 5 && strings.EqualFold(name[:5], "Nats-") {
			return nil, fmt.Errorf("natsbroker: message %s: header %q is reserved: JetStream acts on Nats- headers; rename it", rec.ID, name)
		}
	}
	h, body, err := p.ce.Encode(rec)
	if err != nil {
		return nil, err
	}
	msg := nats.NewMsg(Subject(rec.Topic, rec.Key, p.cfg.KeyInSubject))
	for k, v := range h {
		msg.Header.Set(k, v)
	}
	msg.Data = body
	return msg, nil
}

// classify wraps a publish error, marking as permanent the ones no retry can fix.
func classify(rec postbox.Record, err error) error {
	err = fmt.Errorf("natsbroker: publish message %s to %q: %w", rec.ID, rec.Topic, err)
	var js jetstream.JetStreamError
	switch {
	case errors.Is(err, nats.ErrMaxPayload), errors.Is(err, nats.ErrBadSubject):
		return postbox.Permanent(err)
	case errors.As(err, &js) && js.APIError() != nil && js.APIError().ErrorCode == jetstream.JSErrCodeStreamMessageExceedsMaximum:
		return postbox.Permanent(err)
	case errors.Is(err, jetstream.ErrNoStreamResponse), errors.Is(err, nats.ErrNoResponders):
		// JetStream's words for a subject no stream holds, which say nothing of streams: say what to do. It stays
		// retryable, since the stream may be created while the relay runs.
		return fmt.Errorf("%w; no JetStream stream holds subject %q: add it to a stream's subjects (EnsureStream, "+
			"or `nats stream add`), or give the postbox relay's broker URL ?stream=NAME&subjects=%s", err, rec.Topic, rec.Topic)
	}
	return err
}

package gcppubsub

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"

	"cloud.google.com/go/pubsub/v2"
	"github.com/postbox-go/postbox"
	"github.com/postbox-go/postbox/broker"
	"github.com/postbox-go/postbox/broker/internal/adapterkit"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// Prefix is the attribute-name prefix of the CloudEvents Pub/Sub binding.
const Prefix = "ce-"

// Limits Pub/Sub puts on a message's attributes and ordering key.
const (
	MaxAttributes         = 100
	MaxAttributeKeyLen    = 256
	MaxAttributeValueLen  = 1024
	MaxOrderingKeyLen     = 1024
	reservedAttributeHead = "goog"
)

// ErrClosed is wrapped by the error of messages published after Close.
var ErrClosed = adapterkit.ErrClosed("gcppubsub")

// PublisherConfig configures a Publisher. The zero value is valid.
type PublisherConfig struct {
	// TopicPrefix goes before each message's topic to make the Pub/Sub topic ID ("prod-" + "orders"). Default:
	// none, the topic ID is the message's topic.
	TopicPrefix string
	// Source is the CloudEvents source attribute. Default: broker.DefaultSource ("postbox").
	Source string
	// Settings configure each topic's Pub/Sub publisher: batching, the time limit of a publish (Timeout), flow
	// control, compression. Default: pubsub.DefaultPublishSettings. HedgingSettings must be nil: the Pub/Sub
	// client cannot hedge ordered publishes.
	Settings *pubsub.PublishSettings
	// Logger receives a debug line for each message that failed to publish. Default: slog.Default().
	Logger *slog.Logger
}

// Publisher publishes batches to Google Pub/Sub with ordering keys, through one Pub/Sub publisher per topic. It
// implements postbox.Publisher and is safe for concurrent use. Close it to stop the Pub/Sub publishers'
// goroutines.
type Publisher struct {
	c   *pubsub.Client
	cfg PublisherConfig
	ce  broker.CloudEvents
	log *slog.Logger

	mu     sync.Mutex
	topics map[string]*pubsub.Publisher
	closed bool
}

// WithDefaults returns a copy of c with every zero field set to its default. A nil c gives the defaults.
func (c *PublisherConfig) WithDefaults() PublisherConfig {
	out := adapterkit.Copy(c)
	adapterkit.Default(&out.Source, broker.DefaultSource)
	adapterkit.Default(&out.Logger, slog.Default())
	return out
}

func (c PublisherConfig) validate() error {
	if c.Settings != nil && c.Settings.HedgingSettings != nil {
		return fmt.Errorf("%w: gcppubsub.NewPublisher: Settings.HedgingSettings must be nil; the Pub/Sub client cannot hedge ordered publishes",
			postbox.ErrInvalidConfig)
	}
	if c.TopicPrefix != "" {
		if err := CheckTopicID(c.TopicPrefix + "xxx"); err != nil {
			return fmt.Errorf("%w: gcppubsub.NewPublisher: TopicPrefix: %v", postbox.ErrInvalidConfig, err)
		}
	}
	return nil
}

// NewPublisher returns a publisher on c. It does no I/O. cfg may be nil.
func NewPublisher(c *pubsub.Client, cfg *PublisherConfig) (*Publisher, error) {
	if c == nil {
		return nil, fmt.Errorf("%w: gcppubsub.NewPublisher needs a client; make one with pubsub.NewClient", postbox.ErrInvalidConfig)
	}
	conf := cfg.WithDefaults()
	if err := conf.validate(); err != nil {
		return nil, err
	}
	return &Publisher{c: c, cfg: conf, ce: broker.CloudEvents{Prefix: Prefix, Source: conf.Source}, log: conf.Logger,
		topics: map[string]*pubsub.Publisher{}}, nil
}

// Publish publishes every record asynchronously and waits for each publish result. It returns nil when Pub/Sub
// accepted all of them, and otherwise a *postbox.BatchError. Records no retry can publish (a topic that is not a
// Pub/Sub topic ID, attributes over Pub/Sub's limits, a message over its size limit) fail with a
// postbox.Permanent error.
//
// After a failed publish the Pub/Sub client refuses further messages with the same ordering key, so that none
// overtakes the failed one; Publish resumes those keys before it returns, so that the relay's retry goes
// through. When ctx ends first, Publish returns at once, failing the messages not yet answered: Pub/Sub may
// still accept them, so the relay's retry can duplicate them (the consumer's inbox drops the duplicates).
func (p *Publisher) Publish(ctx context.Context, batch []postbox.Record) error {
	if len(batch) == 0 {
		return nil
	}
	errs := make([]error, len(batch))
	results := make([]*pubsub.PublishResult, len(batch))
	topics := make([]*pubsub.Publisher, len(batch))
	for i, msg := range adapterkit.Messages(ctx, "gcppubsub", batch, errs, p.message) {
		rec := batch[i]
		t, err := p.topic(p.cfg.TopicPrefix + rec.Topic)
		if err != nil {
			errs[i] = fmt.Errorf("gcppubsub: message %s not published: %w", rec.ID, err)
			continue
		}
		topics[i] = t
		results[i] = t.Publish(ctx, msg)
	}
	for i, r := range results {
		if r == nil {
			continue
		}
		if _, err := r.Get(ctx); err != nil {
			if ctx.Err() != nil && errors.Is(err, ctx.Err()) {
				errs[i] = fmt.Errorf("gcppubsub: message %s: no publish result before the context ended (it may still be published): %w",
					batch[i].ID, err)
			} else {
				errs[i] = classify(batch[i], p.cfg.TopicPrefix, err)
			}
			if batch[i].Key != "" {
				topics[i].ResumePublish(batch[i].Key)
			}
		}
	}
	return adapterkit.Result(ctx, p.log, errs)
}

// Close stops the Pub/Sub publishers after they sent what they hold. It leaves the client open: close it
// yourself. Publish returns ErrClosed afterwards.
func (p *Publisher) Close() error {
	p.mu.Lock()
	p.closed = true
	topics := p.topics
	p.topics = map[string]*pubsub.Publisher{}
	p.mu.Unlock()
	var wg sync.WaitGroup
	for _, t := range topics {
		wg.Add(1)
		go func() {
			defer wg.Done()
			t.Stop()
		}()
	}
	wg.Wait()
	return nil
}

// topic returns the Pub/Sub publisher of the topic ID, making it on first use.
func (p *Publisher) topic(id string) (*pubsub.Publisher, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		return nil, ErrClosed
	}
	t := p.topics[id]
	if t == nil {
		t = p.c.Publisher(id)
		if p.cfg.Settings != nil {
			t.PublishSettings = *p.cfg.Settings
		}
		t.EnableMessageOrdering = true
		p.topics[id] = t
	}
	return t, nil
}

// message builds the Pub/Sub message for rec.
func (p *Publisher) message(rec postbox.Record) (*pubsub.Message, error) {
	if err := CheckTopicID(p.cfg.TopicPrefix + rec.Topic); err != nil {
		return nil, fmt.Errorf("gcppubsub: message %s: topic: %v", rec.ID, err)
	}
	if len(rec.Key) > MaxOrderingKeyLen {
		return nil, fmt.Errorf("gcppubsub: message %s: key is %d bytes; a Pub/Sub ordering key has at most %d", rec.ID, len(rec.Key), MaxOrderingKeyLen)
	}
	attrs, body, err := p.ce.Encode(rec)
	if err != nil {
		return nil, err
	}
	if len(attrs) > MaxAttributes {
		return nil, fmt.Errorf("gcppubsub: message %s has %d attributes with its CloudEvents attributes; Pub/Sub allows %d; drop some headers",
			rec.ID, len(attrs), MaxAttributes)
	}
	for k, v := range attrs {
		switch {
		case len(k) > MaxAttributeKeyLen:
			return nil, fmt.Errorf("gcppubsub: message %s: header name %q is %d bytes; Pub/Sub allows %d", rec.ID, k, len(k), MaxAttributeKeyLen)
		case len(v) > MaxAttributeValueLen:
			return nil, fmt.Errorf("gcppubsub: message %s: header %q is %d bytes; a Pub/Sub attribute value has at most %d; move it into the payload",
				rec.ID, k, len(v), MaxAttributeValueLen)
		case strings.HasPrefix(strings.ToLower(k), reservedAttributeHead):
			return nil, fmt.Errorf("gcppubsub: message %s: header %q starts with %q, which Pub/Sub reserves; rename it", rec.ID, k, reservedAttributeHead)
		}
	}
	return &pubsub.Message{Data: body, Attributes: attrs, OrderingKey: rec.Key}, nil
}

// classify wraps a publish error, marking as permanent the ones no retry can fix.
func classify(rec postbox.Record, prefix string, err error) error {
	err = fmt.Errorf("gcppubsub: publish message %s to %q: %w", rec.ID, prefix+rec.Topic, err)
	if errors.Is(err, pubsub.ErrOversizedMessage) {
		return postbox.Permanent(err)
	}
	var se interface{ GRPCStatus() *status.Status }
	if errors.As(err, &se) && se.GRPCStatus().Code() == codes.InvalidArgument {
		return postbox.Permanent(err)
	}
	return err
}

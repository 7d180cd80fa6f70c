package kafkabroker

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sort"

	"github.com/postbox-go/postbox"
	"github.com/postbox-go/postbox/broker"
	"github.com/postbox-go/postbox/broker/debezium"
	"github.com/postbox-go/postbox/broker/internal/adapterkit"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
)

// PublisherConfig configures a Publisher. The zero value is valid.
type PublisherConfig struct {
	// TopicPrefix goes before each message's topic to make the Kafka topic ("prod." + "orders"), so that
	// environments or tenants can share a cluster. Subscribers must use the same prefix. Default: none, the
	// Kafka topic is the message's topic.
	TopicPrefix string
	// Source is the CloudEvents source attribute. Default: broker.DefaultSource ("postbox").
	Source string
	// Debezium, when set, publishes each message as Debezium's Outbox Event Router would publish the outbox row
	// it stands for, instead of as a CloudEvent, so that consumers of a Debezium outbox read Postbox's records
	// unchanged: the message is the row (ID = id, Topic = aggregatetype, Key = aggregateid, Type = type,
	// Payload = payload, CreatedAt = timestamp, each header a column of its name) and the options are the
	// router's settings (see package debezium and docs/DEBEZIUM.md). No ce_ header is sent; the message ID
	// is in the "id" header. TopicPrefix still goes before the router's topic. Default: nil, CloudEvents.
	Debezium *debezium.Options
	// Logger receives a debug line for each message that failed to publish. Default: slog.Default().
	Logger *slog.Logger
}

// ErrClosed is returned by Publish after Close.
var ErrClosed = adapterkit.ErrClosed("kafkabroker")

// Publisher produces batches to Kafka through a franz-go client with its idempotent producer, waiting for the
// broker's ack of every record. It implements postbox.Publisher and is safe for concurrent use.
type Publisher struct {
	cl       *kgo.Client
	cfg      PublisherConfig
	ce       broker.CloudEvents
	log      *slog.Logger
	maxBatch func(topic string) int32 // the client's kgo.ProducerBatchMaxBytes
	dbz      *debezium.Router         // nil: CloudEvents
	closed   adapterkit.Closed
}

// WithDefaults returns a copy of c with every zero field set to its default. A nil c gives the defaults.
func (c *PublisherConfig) WithDefaults() PublisherConfig {
	out := adapterkit.Copy(c)
	if out.Debezium != nil {
		o := out.Debezium.WithDefaults()
		out.Debezium = &o
	}
	adapterkit.Default(&out.Source, broker.DefaultSource)
	adapterkit.Default(&out.Logger, slog.Default())
	return out
}

func (c PublisherConfig) validate() error {
	if c.TopicPrefix != "" {
		if err := CheckTopic(c.TopicPrefix); err != nil {
			return fmt.Errorf("%w: kafkabroker.NewPublisher: TopicPrefix: %v", postbox.ErrInvalidConfig, err)
		}
	}
	return nil
}

// NewPublisher returns a publisher on cl. It does no I/O. cfg may be nil.
//
// cl must keep franz-go's defaults that the delivery guarantees rest on: the idempotent producer (no
// kgo.DisableIdempotentWrite), no transactional ID (records produced outside a transaction fail), and no
// kgo.DefaultProduceTopicAlways (which would send every message to one topic). The defaults also wait for all
// in-sync replicas (kgo.RequiredAcks(kgo.AllISRAcks())) and retry without limit until the context passed to
// Publish ends; set kgo.RecordDeliveryTimeout to bound a record's time in the client as well.
func NewPublisher(cl *kgo.Client, cfg *PublisherConfig) (*Publisher, error) {
	if cl == nil {
		return nil, fmt.Errorf("%w: kafkabroker.NewPublisher needs a client; make one with kgo.NewClient(kgo.SeedBrokers(...))", postbox.ErrInvalidConfig)
	}
	if v, _ := cl.OptValue(kgo.DisableIdempotentWrite).(bool); v {
		return nil, fmt.Errorf("%w: kafkabroker: the client has kgo.DisableIdempotentWrite; remove it, the publisher relies on the idempotent producer so that the client's own retries never duplicate or reorder records",
			postbox.ErrInvalidConfig)
	}
	if _, set := txnID(cl); set {
		return nil, fmt.Errorf("%w: kafkabroker: the client has a transactional ID; use a client without kgo.TransactionalID, the publisher produces outside transactions",
			postbox.ErrInvalidConfig)
	}
	if v, _ := cl.OptValue(kgo.DefaultProduceTopicAlways).(bool); v {
		return nil, fmt.Errorf("%w: kafkabroker: the client has kgo.DefaultProduceTopicAlways, which would send every message to one topic; remove it (use TopicPrefix to map topics)",
			postbox.ErrInvalidConfig)
	}
	c := cfg.WithDefaults()
	if err := c.validate(); err != nil {
		return nil, err
	}
	maxBatch, _ := cl.OptValue(kgo.ProducerBatchMaxBytesFn).(func(string) int32)
	p := &Publisher{cl: cl, cfg: c, ce: broker.CloudEvents{Prefix: broker.PrefixKafka, Source: c.Source}, log: c.Logger,
		maxBatch: maxBatch}
	if c.Debezium != nil {
		r, err := newDebeziumRouter(*c.Debezium)
		if err != nil {
			return nil, fmt.Errorf("%w: kafkabroker.NewPublisher: Debezium: %v", postbox.ErrInvalidConfig, err)
		}
		p.dbz = r
	}
	return p, nil
}

// Close makes Publish return ErrClosed from now on. It leaves the client open: close it yourself once the
// relay has stopped.
func (p *Publisher) Close() error { return p.closed.Close() }

// txnID reports whether cl was given a transactional ID.
func txnID(cl *kgo.Client) (string, bool) {
	vs := cl.OptValues(kgo.TransactionalID)
	if len(vs) < 2 {
		return "", false
	}
	id, _ := vs[0].(string)
	set, _ := vs[1].(bool)
	return id, set
}

// result is the outcome of one produced record.
type result struct {
	i   int
	err error
}

// Publish produces every record asynchronously and waits for each record's promise. It returns nil when the
// broker acknowledged all of them, and otherwise a *postbox.BatchError. Records no retry can publish (a topic
// that is not a Kafka topic name, a header that would be read back as a CloudEvents attribute, a message larger
// on its own than the producer's kgo.ProducerBatchMaxBytes) fail with a postbox.Permanent error.
//
// When ctx ends first, Publish returns at once, failing the records not yet acknowledged: the client may still
// write them, so the relay's retry can duplicate them (the consumer's inbox drops the duplicates).
func (p *Publisher) Publish(ctx context.Context, batch []postbox.Record) error {
	if skip, err := p.closed.Skip(ErrClosed, len(batch)); skip {
		return err
	}
	errs := make([]error, len(batch))
	answered := make([]bool, len(batch))
	results := make(chan result, len(batch)) // promises must never block
	pending := 0
	for i, r := range adapterkit.Messages(ctx, "kafkabroker", batch, errs, p.record) {
		pending++
		p.cl.Produce(ctx, r, func(_ *kgo.Record, err error) { results <- result{i, err} })
	}
	take := func(res result) {
		answered[res.i] = true
		if res.err != nil {
			errs[res.i] = classify(batch[res.i], p.cfg.TopicPrefix, res.err)
		}
	}
	for pending > 0 && ctx.Err() == nil {
		select {
		case res := <-results:
			take(res)
			pending--
		case <-ctx.Done():
		}
	}
	for drained := false; pending > 0 && !drained; { // answers that came in with the cancellation
		select {
		case res := <-results:
			take(res)
			pending--
		default:
			drained = true
		}
	}
	for i, rec := range batch {
		if errs[i] == nil && !answered[i] {
			errs[i] = fmt.Errorf("kafkabroker: message %s: no ack before the context ended (it may still be written): %w", rec.ID, ctx.Err())
		}
	}
	return adapterkit.Result(ctx, p.log, errs)
}

// record builds the Kafka record for rec.
func (p *Publisher) record(rec postbox.Record) (*kgo.Record, error) {
	if p.dbz != nil {
		return p.debeziumRecord(rec)
	}
	topic := p.cfg.TopicPrefix + rec.Topic
	if err := CheckTopic(topic); err != nil {
		return nil, fmt.Errorf("kafkabroker: message %s: %v", rec.ID, err)
	}
	h, body, err := p.ce.Encode(rec)
	if err != nil {
		return nil, err
	}
	r := &kgo.Record{Topic: topic, Value: body, Headers: make([]kgo.RecordHeader, 0, len(h))}
	size := len(rec.Key) + len(body)
	if rec.Key != "" {
		r.Key = []byte(rec.Key)
	}
	for k, v := range h {
		r.Headers = append(r.Headers, kgo.RecordHeader{Key: k, Value: []byte(v)})
		size += len(k) + len(v)
	}
	if err := p.checkSize(rec, r, size); err != nil {
		return nil, err
	}
	// A stable header order makes records easy to compare in tools and tests.
	sort.Slice(r.Headers, func(i, j int) bool { return r.Headers[i].Key < r.Headers[j].Key })
	return r, nil
}

// checkSize refuses a record larger on its own than the producer's batch limit: no retry could publish it.
func (p *Publisher) checkSize(rec postbox.Record, r *kgo.Record, size int) error {
	if p.maxBatch != nil {
		if limit := int(p.maxBatch(r.Topic)); size > limit {
			return fmt.Errorf("kafkabroker: message %s is %d bytes with its key and headers; the producer's batch limit for %s is %d (kgo.ProducerBatchMaxBytes)",
				rec.ID, size, r.Topic, limit)
		}
	}
	return nil
}

// classify wraps a produce error, marking as permanent the ones no retry can fix.
//
// MESSAGE_TOO_LARGE stays retryable: the broker refuses a whole batch when it exceeds the topic's
// max.message.bytes, and the batch may hold small messages that a retry in another batch, or a fixed producer
// limit, would publish. A message that alone exceeds the producer's limit is refused as permanent before it is
// produced.
func classify(rec postbox.Record, prefix string, err error) error {
	switch {
	case errors.Is(err, kerr.MessageTooLarge), errors.Is(err, kerr.RecordListTooLarge):
		return fmt.Errorf("kafkabroker: produce message %s to %q: %w; set kgo.ProducerBatchMaxBytes on the client no higher than the topic's max.message.bytes",
			rec.ID, prefix+rec.Topic, err)
	case errors.Is(err, kerr.InvalidTopicException), errors.Is(err, kerr.InvalidRecord):
		return postbox.Permanent(fmt.Errorf("kafkabroker: produce message %s to %q: %w", rec.ID, prefix+rec.Topic, err))
	}
	return fmt.Errorf("kafkabroker: produce message %s to %q: %w", rec.ID, prefix+rec.Topic, err)
}

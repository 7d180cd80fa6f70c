package kafkabroker

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"time"

	"github.com/postbox-go/postbox"
	"github.com/postbox-go/postbox/broker"
	"github.com/postbox-go/postbox/broker/internal/adapterkit"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
)

// Defaults for SubscriberConfig.
const (
	DefaultConcurrency    = 8
	DefaultPrefetch       = 256
	DefaultCommitInterval = time.Second
)

// SubscriberConfig configures a Subscriber. Brokers, Group and Topics are required.
type SubscriberConfig struct {
	// Brokers are the seed brokers, as host:port.
	Brokers []string
	// Group is the consumer group. Subscribers with the same group share the topics' partitions; each
	// partition is consumed by one of them at a time.
	Group string
	// Topics are the Postbox topics to consume; TopicPrefix goes before each to make the Kafka topic.
	Topics []string
	// TopicPrefix must match the publishers' PublisherConfig.TopicPrefix. Delivered messages carry their topic
	// without it.
	TopicPrefix string
	// Concurrency is how many handler calls may run at once, each for a different partition: the messages of
	// one partition are always handled one at a time, in offset order. Default: DefaultConcurrency.
	Concurrency int
	// Prefetch is how many fetched records a partition may hold waiting for its handler before fetching from
	// that partition pauses. Default: DefaultPrefetch.
	Prefetch int
	// CommitInterval is how often settled offsets are committed. Offsets are also committed when partitions
	// are revoked and when Receive returns, so a shorter interval only narrows what a crash redelivers.
	// Default: DefaultCommitInterval.
	CommitInterval time.Duration
	// Options are further franz-go client options: TLS, SASL, a logger, session and rebalance timeouts, a
	// balancer, or kgo.ConsumeResetOffset to change where a new group starts (default: the start of each
	// partition, so no message published before the group first joined is missed). The subscriber sets the
	// seed brokers, the group, the topics, manual commits (kgo.DisableAutoCommit), kgo.BlockRebalanceOnPoll
	// and the partition callbacks itself; do not pass options that change those.
	Options []kgo.Opt
	// Logger receives records that are not Postbox CloudEvents (they are skipped), commit failures and
	// transient fetch errors. Default: slog.Default().
	Logger *slog.Logger
}

// Subscriber consumes topics as a member of a Kafka consumer group, committing a partition's offset only past
// messages whose handler settled them. It implements broker.Subscriber.
//
// Kafka has no per-message acknowledgement: a consumer commits a position in each partition. The subscriber
// therefore handles the messages of a partition one at a time, in offset order, and commits the offset after
// the last message that was acked or rejected. A nacked message is handled again by the same subscriber after
// the nack delay, before any later message of its partition, and the committed offset stays before it; if the
// subscriber stops or loses the partition meanwhile, the next owner starts from the committed offset and so
// receives the message again. Reject skips the message for good: its offset is committed like an ack's (it
// stays in the log for replay by offset).
type Subscriber struct {
	cfg     SubscriberConfig
	ce      broker.CloudEvents
	log     *slog.Logger
	running adapterkit.Running
}

// WithDefaults returns a copy of c with every zero field set to its default. A nil c gives the defaults.
func (c *SubscriberConfig) WithDefaults() SubscriberConfig {
	out := adapterkit.Copy(c)
	out.Topics = slices.Clone(out.Topics)
	out.Options = slices.Clone(out.Options)
	adapterkit.Default(&out.Concurrency, DefaultConcurrency)
	adapterkit.Default(&out.Prefetch, DefaultPrefetch)
	adapterkit.Default(&out.CommitInterval, DefaultCommitInterval)
	adapterkit.Default(&out.Logger, slog.Default())
	return out
}

func (c SubscriberConfig) validate() error {
	const who = "kafkabroker.NewSubscriber"
	switch {
	case len(c.Brokers) == 0:
		return fmt.Errorf("%w: %s: Brokers is empty; give the seed brokers as host:port", postbox.ErrInvalidConfig, who)
	case c.Group == "":
		return fmt.Errorf("%w: %s: Group is empty; name the consumer group, so that restarts and other instances share its committed offsets", postbox.ErrInvalidConfig, who)
	case len(c.Topics) == 0:
		return fmt.Errorf("%w: %s: Topics is empty; list the topics to consume", postbox.ErrInvalidConfig, who)
	case c.Concurrency < 0 || c.Prefetch < 0 || c.CommitInterval < 0:
		return fmt.Errorf("%w: %s: Concurrency %d, Prefetch %d and CommitInterval %v must not be negative (0 means the default)",
			postbox.ErrInvalidConfig, who, c.Concurrency, c.Prefetch, c.CommitInterval)
	}
	for _, t := range c.Topics {
		if err := CheckTopic(c.TopicPrefix + t); err != nil {
			return fmt.Errorf("%w: %s: Topics: %v", postbox.ErrInvalidConfig, who, err)
		}
	}
	return nil
}

// NewSubscriber returns a subscriber configured by cfg, which needs at least Brokers, a Group and Topics. It
// does no I/O: each Receive makes its own client, joins the group and leaves it on return.
func NewSubscriber(cfg *SubscriberConfig) (*Subscriber, error) {
	c := cfg.WithDefaults()
	if err := c.validate(); err != nil {
		return nil, err
	}
	return &Subscriber{cfg: c, ce: broker.CloudEvents{Prefix: broker.PrefixKafka}, log: c.Logger}, nil
}

// Receive joins the consumer group and calls handle for each message until ctx is cancelled (see
// broker.Subscriber and the Subscriber type). On the way out it stops fetching, waits for the running
// handlers, commits the offsets they settled and leaves the group, so that the partitions move to other
// members at once. It returns an error when the client cannot be made from the options, or when the cluster
// refuses this consumer (authentication or authorization failed, the client was closed).
func (s *Subscriber) Receive(ctx context.Context, handle broker.DeliveryHandler) error {
	done, err := s.running.Start(ctx, "kafkabroker", handle, "")
	if done == nil {
		return err // refused, or ctx already ended
	}
	defer done()
	r := newRun(ctx, s, handle)
	topics := make([]string, len(s.cfg.Topics))
	for i, t := range s.cfg.Topics {
		topics[i] = s.cfg.TopicPrefix + t
	}
	opts := append([]kgo.Opt{kgo.ConsumeResetOffset(kgo.NewOffset().AtStart())}, s.cfg.Options...)
	opts = append(opts,
		kgo.SeedBrokers(s.cfg.Brokers...),
		kgo.ConsumerGroup(s.cfg.Group),
		kgo.ConsumeTopics(topics...),
		kgo.DisableAutoCommit(),
		kgo.BlockRebalanceOnPoll(),
		kgo.OnPartitionsAssigned(r.assigned),
		kgo.OnPartitionsRevoked(r.revoked),
		kgo.OnPartitionsLost(r.lost),
	)
	cl, err := kgo.NewClient(opts...)
	if err != nil {
		return fmt.Errorf("kafkabroker: make the consumer client: %w", err)
	}
	r.cl = cl
	err = r.run()
	cl.AllowRebalance()
	cl.Close() // leaves the group; the revoke callback finds nothing left to do
	return err
}

// decode reads a Postbox message from rec.
func (s *Subscriber) decode(rec *kgo.Record) (broker.Event, error) {
	h := make(map[string]string, len(rec.Headers))
	for _, hd := range rec.Headers {
		if _, dup := h[hd.Key]; !dup {
			h[hd.Key] = string(hd.Value)
		}
	}
	e, err := s.ce.Decode(h, rec.Value)
	if err != nil {
		return broker.Event{}, err
	}
	if e.Message.Key == "" && len(rec.Key) > 0 {
		e.Message.Key = string(rec.Key) // a CloudEvents producer that keeps the partition key only in the record key
	}
	e.Message.Topic = strings.TrimPrefix(rec.Topic, s.cfg.TopicPrefix)
	return e, nil
}

// fatal reports whether a fetch error means the consumer cannot go on.
func fatal(err error) bool {
	return errors.Is(err, kgo.ErrClientClosed) ||
		errors.Is(err, kerr.SaslAuthenticationFailed) ||
		errors.Is(err, kerr.TopicAuthorizationFailed) ||
		errors.Is(err, kerr.GroupAuthorizationFailed) ||
		errors.Is(err, kerr.ClusterAuthorizationFailed) ||
		errors.Is(err, kerr.InvalidGroupID)
}

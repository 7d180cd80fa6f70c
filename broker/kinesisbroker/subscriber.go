package kinesisbroker

import (
	"context"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/kinesis"
	"github.com/aws/aws-sdk-go-v2/service/kinesis/types"
	"github.com/postbox-go/postbox"
	"github.com/postbox-go/postbox/broker"
	"github.com/postbox-go/postbox/broker/internal/adapterkit"
)

// DefaultPollInterval is SubscriberConfig.PollInterval's default: Kinesis serves at most five GetRecords calls a
// second per shard.
const DefaultPollInterval = 250 * time.Millisecond

// SubscriberConfig configures a Subscriber. StreamName and Topic are required.
type SubscriberConfig struct {
	// StreamName is the stream to read.
	StreamName string
	// Topic is the Postbox topic of the stream's messages.
	Topic string
	// StartAt is where each shard is first read from: records that arrived at or after it. Default: zero, the
	// oldest record the stream keeps (TRIM_HORIZON).
	StartAt time.Time
	// PollInterval is the wait after a GetRecords call that found nothing new. Default: DefaultPollInterval.
	PollInterval time.Duration
	// Logger receives records that are not Postbox CloudEvents and failed reads. Default: slog.Default().
	Logger *slog.Logger
}

// WithDefaults returns a copy of c with every zero field set to its default. A nil c gives the defaults.
func (c *SubscriberConfig) WithDefaults() SubscriberConfig {
	out := adapterkit.Copy(c)
	adapterkit.Default(&out.PollInterval, DefaultPollInterval)
	adapterkit.Default(&out.Logger, slog.Default())
	return out
}

func (c SubscriberConfig) validate() error {
	if c.StreamName == "" || c.Topic == "" {
		return fmt.Errorf("%w: kinesisbroker.NewSubscriber needs the StreamName and the Postbox Topic its records carry", postbox.ErrInvalidConfig)
	}
	if c.PollInterval < 0 {
		return fmt.Errorf("%w: kinesisbroker.NewSubscriber: PollInterval %v must not be negative", postbox.ErrInvalidConfig, c.PollInterval)
	}
	return nil
}

// Subscriber reads the shards of a stream with GetRecords, one goroutine per shard, and hands their records to
// the handler one at a time per shard, in order: a key's messages, which share a shard, come in publish order.
// Kinesis has no acknowledgement: Ack and Reject move the subscriber past the record, Nack hands the same record
// to the handler again after the delay, holding the shard back meanwhile. Delivery.Attempt counts the handler
// calls for the record in this subscriber.
//
// The position in each shard is kept in memory only: a Receive after the previous one returned goes on where it
// stopped, but a new Subscriber starts at StartAt again, and the consumer's inbox drops what it had processed.
// Several subscribers do not share the shards (each reads all of them), and resharding is not followed (the
// shards listed when Receive starts are read). For a checkpointed consumer group, use the Kinesis Client
// Library and Decode.
type Subscriber struct {
	c       *kinesis.Client
	cfg     SubscriberConfig
	log     *slog.Logger
	running adapterkit.Running

	mu  sync.Mutex
	pos map[string]string // shard ID → sequence number of the last record settled
}

// NewSubscriber returns a subscriber on c configured by cfg. It does no I/O.
func NewSubscriber(c *kinesis.Client, cfg *SubscriberConfig) (*Subscriber, error) {
	if c == nil {
		return nil, fmt.Errorf("%w: kinesisbroker.NewSubscriber needs a client; make one with kinesis.NewFromConfig", postbox.ErrInvalidConfig)
	}
	conf := cfg.WithDefaults()
	if err := conf.validate(); err != nil {
		return nil, err
	}
	return &Subscriber{c: c, cfg: conf, log: conf.Logger, pos: map[string]string{}}, nil
}

// Receive reads every shard of the stream and calls handle for each record until ctx is cancelled (see
// broker.Subscriber). It returns an error early when the stream does not exist or may not be read.
func (s *Subscriber) Receive(ctx context.Context, handle broker.DeliveryHandler) error {
	done, err := s.running.Start(ctx, "kinesisbroker", handle, "")
	if done == nil {
		return err
	}
	defer done()
	var shards []types.Shard
	for ctx.Err() == nil {
		var out *kinesis.ListShardsOutput
		out, err = s.c.ListShards(ctx, &kinesis.ListShardsInput{StreamName: aws.String(s.cfg.StreamName)})
		if err == nil {
			shards = out.Shards
			break
		}
		if err = classify(err, s.cfg.StreamName); !postbox.IsUnavailable(err) {
			return fmt.Errorf("kinesisbroker: list the shards of %s: %w", s.cfg.StreamName, err)
		}
		adapterkit.Sleep(ctx, s.cfg.PollInterval)
	}
	var wg sync.WaitGroup
	errc := make(chan error, len(shards))
	for _, sh := range shards {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := s.readShard(ctx, aws.ToString(sh.ShardId), handle); err != nil {
				errc <- err
			}
		}()
	}
	wg.Wait()
	close(errc)
	if ctx.Err() != nil {
		return nil
	}
	return <-errc
}

// readShard reads one shard until ctx ends.
func (s *Subscriber) readShard(ctx context.Context, shard string, handle broker.DeliveryHandler) error {
	var iter *string
	for ctx.Err() == nil {
		if iter == nil {
			it, err := s.iterator(ctx, shard)
			if err != nil {
				if ctx.Err() != nil {
					return nil
				}
				if err = classify(err, s.cfg.StreamName); !postbox.IsUnavailable(err) {
					return fmt.Errorf("kinesisbroker: shard iterator of %s %s: %w", s.cfg.StreamName, shard, err)
				}
				adapterkit.Sleep(ctx, s.cfg.PollInterval)
				continue
			}
			iter = it
		}
		out, err := s.c.GetRecords(ctx, &kinesis.GetRecordsInput{ShardIterator: iter, Limit: aws.Int32(100)})
		if err != nil {
			if ctx.Err() != nil {
				return nil
			}
			s.log.WarnContext(ctx, "kinesisbroker: GetRecords failed; reading again", "stream", s.cfg.StreamName, "shard", shard, "err", err)
			iter = nil // an expired iterator is made again from the position
			adapterkit.Sleep(ctx, s.cfg.PollInterval)
			continue
		}
		for _, r := range out.Records {
			if !s.deliver(ctx, shard, r, handle) {
				return nil
			}
		}
		if out.NextShardIterator == nil {
			return nil // a closed shard, read to its end
		}
		iter = out.NextShardIterator
		if len(out.Records) == 0 {
			adapterkit.Sleep(ctx, s.cfg.PollInterval)
		}
	}
	return nil
}

// iterator returns a shard iterator after the last record settled, or at StartAt.
func (s *Subscriber) iterator(ctx context.Context, shard string) (*string, error) {
	in := &kinesis.GetShardIteratorInput{StreamName: aws.String(s.cfg.StreamName), ShardId: aws.String(shard)}
	s.mu.Lock()
	seq := s.pos[shard]
	s.mu.Unlock()
	switch {
	case seq != "":
		in.ShardIteratorType, in.StartingSequenceNumber = types.ShardIteratorTypeAfterSequenceNumber, aws.String(seq)
	case !s.cfg.StartAt.IsZero():
		in.ShardIteratorType, in.Timestamp = types.ShardIteratorTypeAtTimestamp, aws.Time(s.cfg.StartAt)
	default:
		in.ShardIteratorType = types.ShardIteratorTypeTrimHorizon
	}
	out, err := s.c.GetShardIterator(ctx, in)
	if err != nil {
		return nil, err
	}
	return out.ShardIterator, nil
}

// deliver hands r to the handler until it is acked or rejected, and reports whether ctx is still going.
func (s *Subscriber) deliver(ctx context.Context, shard string, r types.Record, handle broker.DeliveryHandler) bool {
	e, err := Decode(r.Data)
	if err != nil {
		s.log.ErrorContext(ctx, "kinesisbroker: skipping a record that is not a Postbox CloudEvent", "stream", s.cfg.StreamName,
			"shard", shard, "sequence", aws.ToString(r.SequenceNumber), "err", err)
		s.settled(shard, r)
		return true
	}
	e.Message.Topic = s.cfg.Topic
	for attempt := 1; ; attempt++ {
		a := &acker{}
		broker.Dispatch(ctx, broker.NewDelivery(e, attempt, a), handle)
		done, delay := a.state()
		if done {
			s.settled(shard, r)
			return true
		}
		if ctx.Err() != nil || !adapterkit.Sleep(ctx, delay) {
			return false // read again by the next Receive
		}
	}
}

func (s *Subscriber) settled(shard string, r types.Record) {
	s.mu.Lock()
	s.pos[shard] = aws.ToString(r.SequenceNumber)
	s.mu.Unlock()
}

// acker records how the handler settled a record; the shard's goroutine reads it after the handler returned.
type acker struct {
	mu    sync.Mutex
	done  bool
	delay time.Duration
}

func (a *acker) state() (done bool, delay time.Duration) {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.done, a.delay
}

// Ack moves the subscriber past the record.
func (a *acker) Ack(context.Context) error {
	a.mu.Lock()
	a.done = true
	a.mu.Unlock()
	return nil
}

// Nack has the record handed to the handler again after delay; the shard waits meanwhile.
func (a *acker) Nack(_ context.Context, delay time.Duration) error {
	a.mu.Lock()
	a.delay = delay
	a.mu.Unlock()
	return nil
}

// Reject moves the subscriber past the record, like Ack: Kinesis cannot drop a record.
func (a *acker) Reject(ctx context.Context) error { return a.Ack(ctx) }

var _ broker.Rejecter = (*acker)(nil)

package redisstream

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"log/slog"
	"os"
	"slices"
	"time"

	"github.com/postbox-go/postbox"
	"github.com/postbox-go/postbox/broker"
	"github.com/postbox-go/postbox/broker/internal/adapterkit"
	"github.com/redis/go-redis/v9"
)

// Defaults for SubscriberConfig.
const (
	DefaultConcurrency = 8
	DefaultCount       = 64
	DefaultBlock       = time.Second
	DefaultClaimIdle   = 30 * time.Second
)

// SubscriberConfig configures a Subscriber. Group and Topics are required.
type SubscriberConfig struct {
	// Group is the consumer group to read as. Subscribers with one group share its messages; create the group on
	// each topic's stream first with EnsureGroup.
	Group string
	// Topics are the Postbox topics to read: the subscriber reads stream StreamPrefix + topic for each.
	Topics []string
	// StreamPrefix must match the publishers' PublisherConfig.StreamPrefix: the subscriber reads stream
	// StreamPrefix + topic and strips the prefix to set Message.Topic. Default: "".
	StreamPrefix string
	// Consumer names this subscriber within its group. Redis keeps the entries a consumer has read but not
	// acknowledged in its pending list until they are acknowledged or claimed by another consumer. Default: the
	// host name and a random suffix, unique to each Subscriber value.
	Consumer string
	// Concurrency is how many handler calls may run at once. Messages with the same key always go to the same
	// one of them, in stream order, so per-key order holds at any concurrency; messages without a key are
	// spread over all. Default: DefaultConcurrency.
	Concurrency int
	// Count is the COUNT of each XREADGROUP and XAUTOCLAIM: how many entries are fetched ahead of the handlers.
	// Their idle time runs while they wait, so keep Count × handler time well under ClaimIdle.
	// Default: DefaultCount.
	Count int64
	// Block is how long each XREADGROUP waits for new entries. It also bounds how long Receive takes to return
	// once its context is cancelled, since a blocked read is not interrupted. Default: DefaultBlock.
	Block time.Duration
	// ClaimIdle is how long an entry may stay delivered and unacknowledged before any consumer of the group
	// claims it (XAUTOCLAIM) and delivers it again: the ack timeout. A handler running longer than this has its
	// message delivered a second time, which the inbox absorbs. Default: DefaultClaimIdle.
	ClaimIdle time.Duration
	// ClaimInterval is how often the subscriber looks for entries idle for ClaimIdle. A Nack with no delay
	// triggers a look at once. Default: ClaimIdle / 4.
	ClaimInterval time.Duration
	// Logger receives entries that are not Postbox CloudEvents (they are acknowledged and dropped), entries lost
	// to trimming, and transient Redis errors. Default: slog.Default().
	Logger *slog.Logger
}

// Subscriber receives messages from Redis streams as one consumer of a consumer group, with XREADGROUP, and
// claims entries other consumers left idle with XAUTOCLAIM. It implements broker.Subscriber.
type Subscriber struct {
	rdb     redis.UniversalClient
	streams []string
	cfg     SubscriberConfig
	ce      broker.CloudEvents
	log     *slog.Logger
	running adapterkit.Running
}

// WithDefaults returns a copy of c with every zero field set to its default. A nil c gives the defaults.
func (c *SubscriberConfig) WithDefaults() SubscriberConfig {
	out := adapterkit.Copy(c)
	out.Topics = slices.Clone(out.Topics)
	adapterkit.Default(&out.Concurrency, DefaultConcurrency)
	adapterkit.Default(&out.Count, DefaultCount)
	adapterkit.Default(&out.Block, DefaultBlock)
	adapterkit.Default(&out.ClaimIdle, DefaultClaimIdle)
	adapterkit.Default(&out.ClaimInterval, max(out.ClaimIdle/4, time.Millisecond))
	adapterkit.Default(&out.Consumer, consumerName())
	adapterkit.Default(&out.Logger, slog.Default())
	return out
}

func (c SubscriberConfig) validate() error {
	const who = "redisstream.NewSubscriber"
	if c.Group == "" {
		return fmt.Errorf("%w: %s needs a consumer Group; subscribers with one group share its messages", postbox.ErrInvalidConfig, who)
	}
	if len(c.Topics) == 0 {
		return fmt.Errorf("%w: %s needs at least one topic in Topics", postbox.ErrInvalidConfig, who)
	}
	for i, t := range c.Topics {
		if t == "" {
			return fmt.Errorf("%w: %s: Topics[%d] is empty", postbox.ErrInvalidConfig, who, i)
		}
		if slices.Contains(c.Topics[:i], t) {
			return fmt.Errorf("%w: %s: topic %q is listed twice in Topics", postbox.ErrInvalidConfig, who, t)
		}
	}
	if c.Concurrency < 0 || c.Count < 0 || c.Block < 0 || c.ClaimIdle < 0 || c.ClaimInterval < 0 {
		return fmt.Errorf("%w: %s: Concurrency %d, Count %d, Block %v, ClaimIdle %v and ClaimInterval %v must not be negative (0 means the default)",
			postbox.ErrInvalidConfig, who, c.Concurrency, c.Count, c.Block, c.ClaimIdle, c.ClaimInterval)
	}
	for name, d := range map[string]time.Duration{"Block": c.Block, "ClaimIdle": c.ClaimIdle, "ClaimInterval": c.ClaimInterval} {
		if d > 0 && d < time.Millisecond {
			return fmt.Errorf("%w: %s: %s %v is under a millisecond, the resolution of Redis stream timeouts",
				postbox.ErrInvalidConfig, who, name, d)
		}
	}
	return nil
}

// NewSubscriber returns a subscriber on rdb configured by cfg, which needs at least a Group and Topics. It
// does no I/O.
//
// Redis Cluster serves a multi-stream XREADGROUP only when all the streams are in one slot: give them a common
// hash tag through StreamPrefix, or make one Subscriber per topic.
func NewSubscriber(rdb redis.UniversalClient, cfg *SubscriberConfig) (*Subscriber, error) {
	if rdb == nil {
		return nil, fmt.Errorf("%w: redisstream.NewSubscriber needs a Redis client, such as redis.NewClient(&redis.Options{Addr: \"localhost:6379\"})",
			postbox.ErrInvalidConfig)
	}
	c := cfg.WithDefaults()
	if err := c.validate(); err != nil {
		return nil, err
	}
	s := &Subscriber{rdb: rdb, cfg: c, ce: broker.CloudEvents{Prefix: Prefix}, log: c.Logger}
	for _, t := range c.Topics {
		s.streams = append(s.streams, c.StreamPrefix+t)
	}
	return s, nil
}

// Consumer returns the subscriber's consumer name within its group.
func (s *Subscriber) Consumer() string { return s.cfg.Consumer }

// consumerName returns the host name with a random suffix.
func consumerName() string {
	host, err := os.Hostname()
	if err != nil || host == "" {
		host = "postbox"
	}
	b := make([]byte, 6)
	_, _ = rand.Read(b)
	return host + "-" + hex.EncodeToString(b)
}

// Receive reads entries and calls handle for each until ctx is cancelled (see broker.Subscriber). Two loops feed
// the handlers: XREADGROUP for new entries and XAUTOCLAIM for entries left idle for ClaimIdle by any consumer of
// the group, this one included. On the way out it releases the entries it fetched but did not hand out, so other
// consumers claim them at once, waits for the running handlers, and deletes its consumer from the group if
// nothing is pending for it. It returns an error when a group or stream is missing (deleted, or never made with
// EnsureGroup) or Redis refuses the credentials or the command.
func (s *Subscriber) Receive(ctx context.Context, handle broker.DeliveryHandler) error {
	done, err := s.running.Start(ctx, "redisstream", handle, "")
	if done == nil {
		return err // refused, or ctx already ended
	}
	defer done()
	r := newRun(s, handle)
	err = r.run(ctx)
	s.forget()
	return err
}

// forget deletes the consumer from each group when nothing is pending for it, so that consumers with generated
// names do not pile up in XINFO CONSUMERS. The check and the delete are one script, because deleting a consumer
// drops its pending entries, which no one could then claim.
func (s *Subscriber) forget() {
	ctx, cancel := context.WithTimeout(context.Background(), broker.DefaultSettleTimeout)
	defer cancel()
	for _, stream := range s.streams {
		_ = forgetScript.Run(ctx, s.rdb, []string{stream}, s.cfg.Group, s.cfg.Consumer).Err() // best effort
	}
}

var forgetScript = redis.NewScript(`
if #redis.call('XPENDING', KEYS[1], ARGV[1], '-', '+', 1, ARGV[2]) == 0 then
	return redis.call('XGROUP', 'DELCONSUMER', KEYS[1], ARGV[1], ARGV[2])
end
return -1`)

// fatal reports whether err means Receive cannot go on: retrying would fail the same way until someone acts.
func fatal(err error) bool {
	for _, p := range []string{"NOGROUP", "NOAUTH", "WRONGPASS", "NOPERM", "CROSSSLOT", "WRONGTYPE"} {
		if redis.HasErrorPrefix(err, p) {
			return true
		}
	}
	return false
}

// acker settles one stream entry.
type acker struct {
	r      *run
	stream string
	id     string
}

// Ack removes the entry from the group's pending list (XACK). An entry no longer pending (acknowledged after
// another delivery, or trimmed) is not delivered again either, so that is no error.
func (a *acker) Ack(ctx context.Context) error {
	return a.r.s.rdb.XAck(ctx, a.stream, a.r.s.cfg.Group, a.id).Err()
}

// Nack leaves the entry pending and sets its idle time so that XAUTOCLAIM claims it after delay (at once for 0),
// by this or any consumer of the group. Delays beyond ClaimIdle count as ClaimIdle.
func (a *acker) Nack(ctx context.Context, delay time.Duration) error {
	if err := a.r.release(ctx, a.stream, []string{a.id}, delay); err != nil {
		return err
	}
	if delay == 0 {
		a.r.poke()
	}
	return nil
}

// Reject acknowledges the entry so that it is never delivered again. Redis has no dead-letter stream; the
// entry stays in the stream (until trimmed) for inspection with XRANGE.
func (a *acker) Reject(ctx context.Context) error { return a.Ack(ctx) }

var _ broker.Rejecter = (*acker)(nil)

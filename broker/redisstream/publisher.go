package redisstream

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"time"

	"github.com/postbox-go/postbox"
	"github.com/postbox-go/postbox/broker"
	"github.com/postbox-go/postbox/broker/internal/adapterkit"
	"github.com/redis/go-redis/v9"
)

// ErrNoStream is wrapped by the error of a message published with RequireStream to a stream that does not exist.
var ErrNoStream = errors.New("redisstream: the stream does not exist")

// PublisherConfig configures a Publisher. The zero value is valid.
type PublisherConfig struct {
	// StreamPrefix goes before the topic to name the stream a message is added to: topic "orders" goes to
	// stream StreamPrefix + "orders". Subscribers must use the same prefix. On Redis Cluster, a prefix with a hash
	// tag ("{billing}") puts all the streams in one slot, which a Subscriber reading several topics needs.
	// Default: "", the stream is named after the topic.
	StreamPrefix string
	// MaxLen trims each stream to about this many entries on every XADD (MAXLEN ~, which trims whole radix-tree
	// nodes and so keeps a few more). Trimming bounds memory, but an entry trimmed before a consumer group read
	// and acknowledged it is lost to that group: size MaxLen for the longest consumer outage you must survive.
	// Default: 0, no trimming; the stream grows until trimmed by other means.
	MaxLen int64
	// MaxAge trims entries older than about this on every XADD (MINID ~ with an ID built from the publisher's
	// clock), the time-based form of MaxLen with the same trade-off. It cannot be combined with MaxLen.
	// Default: 0, no trimming.
	MaxAge time.Duration
	// RequireStream publishes with NOMKSTREAM: a message whose stream does not exist fails (wrapping ErrNoStream,
	// retryable) instead of creating a stream that no consumer group reads. Create streams with EnsureGroup.
	// Default: false, XADD creates the stream.
	RequireStream bool
	// Source is the CloudEvents source attribute. Default: broker.DefaultSource ("postbox").
	Source string
	// Logger receives a debug line for each message that failed to publish. Default: slog.Default().
	Logger *slog.Logger
}

// ErrClosed is returned by Publish after Close.
var ErrClosed = adapterkit.ErrClosed("redisstream")

// Publisher adds messages to Redis streams with XADD, one pipeline per batch. It implements postbox.Publisher and
// is safe for concurrent use.
type Publisher struct {
	rdb    redis.Cmdable
	cfg    PublisherConfig
	ce     broker.CloudEvents
	log    *slog.Logger
	now    func() time.Time
	closed adapterkit.Closed
}

// WithDefaults returns a copy of c with every zero field set to its default. A nil c gives the defaults.
func (c *PublisherConfig) WithDefaults() PublisherConfig {
	out := adapterkit.Copy(c)
	adapterkit.Default(&out.Source, broker.DefaultSource)
	adapterkit.Default(&out.Logger, slog.Default())
	return out
}

func (c PublisherConfig) validate() error {
	const who = "redisstream.NewPublisher"
	switch {
	case c.MaxLen < 0 || c.MaxAge < 0:
		return fmt.Errorf("%w: %s: MaxLen %d and MaxAge %v must not be negative (0 turns trimming off)",
			postbox.ErrInvalidConfig, who, c.MaxLen, c.MaxAge)
	case c.MaxLen > 0 && c.MaxAge > 0:
		return fmt.Errorf("%w: %s: set MaxLen or MaxAge, not both: XADD trims by one strategy at a time",
			postbox.ErrInvalidConfig, who)
	case c.MaxAge > 0 && c.MaxAge < time.Millisecond:
		return fmt.Errorf("%w: %s: MaxAge %v is under the millisecond resolution of stream IDs",
			postbox.ErrInvalidConfig, who, c.MaxAge)
	}
	return nil
}

// NewPublisher returns a publisher on rdb (a *redis.Client, *redis.ClusterClient or *redis.Ring). It does no
// I/O. Create the client with ContextTimeoutEnabled so that the relay's PublishTimeout bounds each pipeline, not
// only the client's ReadTimeout. cfg may be nil.
func NewPublisher(rdb redis.Cmdable, cfg *PublisherConfig) (*Publisher, error) {
	if rdb == nil {
		return nil, fmt.Errorf("%w: redisstream.NewPublisher needs a Redis client, such as redis.NewClient(&redis.Options{Addr: \"localhost:6379\"})",
			postbox.ErrInvalidConfig)
	}
	c := cfg.WithDefaults()
	if err := c.validate(); err != nil {
		return nil, err
	}
	return &Publisher{rdb: rdb, cfg: c, ce: broker.CloudEvents{Prefix: Prefix, Source: c.Source}, log: c.Logger, now: time.Now}, nil
}

// Close makes Publish return ErrClosed from now on. It leaves the client open: close it yourself once the relay
// has stopped.
func (p *Publisher) Close() error { return p.closed.Close() }

// Publish adds every record to its stream in one pipeline and returns nil when Redis stored them all, and
// otherwise a *postbox.BatchError with each record's result. Redis does not deduplicate: a record published
// twice is stored twice, and the consumers' inbox drops the second (see the package documentation). Records no
// retry can publish (no topic, a header that would be read back as a CloudEvents attribute, a key holding
// something other than a stream) fail with a postbox.Permanent error.
func (p *Publisher) Publish(ctx context.Context, batch []postbox.Record) error {
	if skip, err := p.closed.Skip(ErrClosed, len(batch)); skip {
		return err
	}
	errs := make([]error, len(batch))
	if err := ctx.Err(); err != nil {
		for i := range errs {
			errs[i] = fmt.Errorf("redisstream: message %s not published: %w", batch[i].ID, err)
		}
		return &postbox.BatchError{Errs: errs}
	}
	minID := ""
	if p.cfg.MaxAge > 0 {
		minID = strconv.FormatInt(p.now().Add(-p.cfg.MaxAge).UnixMilli(), 10)
	}
	pipe := p.rdb.Pipeline()
	cmds := make([]*redis.StringCmd, len(batch))
	for i, rec := range batch {
		args, err := p.args(rec, minID)
		if err != nil {
			errs[i] = postbox.Permanent(err)
			continue
		}
		cmds[i] = pipe.XAdd(ctx, args)
	}
	var execErr error
	if pipe.Len() > 0 {
		_, execErr = pipe.Exec(ctx) // each command carries its own result, except as below
	}
	for i, cmd := range cmds {
		if cmd != nil {
			err := cmd.Err()
			if err == nil && cmd.Val() == "" {
				// A connection that fails before the pipeline is sent (Redis refusing the password, for one)
				// leaves the commands without an error: an XADD that returned no entry ID stored nothing.
				err = execErr
				if err == nil {
					err = errors.New("XADD returned no entry ID")
				}
			}
			if err != nil {
				errs[i] = p.classify(batch[i], err)
			}
		}
	}
	return adapterkit.Result(ctx, p.log, errs)
}

// args builds the XADD of rec.
func (p *Publisher) args(rec postbox.Record, minID string) (*redis.XAddArgs, error) {
	if rec.Topic == "" {
		return nil, fmt.Errorf("redisstream: message %s has no topic, so no stream to go to", rec.ID)
	}
	values, err := fields(p.ce, rec)
	if err != nil {
		return nil, fmt.Errorf("redisstream: %w", err)
	}
	a := &redis.XAddArgs{Stream: p.cfg.StreamPrefix + rec.Topic, NoMkStream: p.cfg.RequireStream, Values: values}
	switch {
	case p.cfg.MaxLen > 0:
		a.MaxLen, a.Approx = p.cfg.MaxLen, true
	case minID != "":
		a.MinID, a.Approx = minID, true
	}
	return a, nil
}

// classify wraps an XADD error, marking as permanent the ones no retry can fix.
func (p *Publisher) classify(rec postbox.Record, err error) error {
	stream := p.cfg.StreamPrefix + rec.Topic
	switch {
	case errors.Is(err, redis.Nil): // NOMKSTREAM and no stream
		return fmt.Errorf("redisstream: message %s: %w: %q; create it with EnsureGroup, or turn RequireStream off", rec.ID, ErrNoStream, stream)
	case redis.HasErrorPrefix(err, "WRONGTYPE"):
		return postbox.Permanent(fmt.Errorf("redisstream: message %s: key %q holds something other than a stream; "+
			"rename the topic or set a StreamPrefix: %w", rec.ID, stream, err))
	}
	return fmt.Errorf("redisstream: XADD message %s to stream %q: %w", rec.ID, stream, err)
}

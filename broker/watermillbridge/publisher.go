package watermillbridge

import (
	"context"
	"fmt"
	"hash/maphash"
	"log/slog"
	"sync"

	"github.com/ThreeDotsLabs/watermill/message"
	"github.com/postbox-go/postbox"
	"github.com/postbox-go/postbox/broker/internal/adapterkit"
)

// PublisherConfig configures a Publisher. The zero value is valid.
type PublisherConfig struct {
	// Mapping says how records become watermill messages. Default: the zero Mapping.
	Mapping Mapping
	// Concurrency is how many watermill Publish calls a batch may have running at once. Messages with the same
	// key are published one at a time in batch order whatever the concurrency, and when one fails the later
	// messages of its key in the batch are not published, so per-key order holds. Default: 1, one call at a
	// time in batch order.
	Concurrency int
	// Logger receives a debug line for each message that failed to publish. Default: slog.Default().
	Logger *slog.Logger
}

// ErrClosed is returned by Publish after Close.
var ErrClosed = adapterkit.ErrClosed("watermillbridge")

// Publisher publishes Postbox records through any watermill message.Publisher, one message per Publish call so
// that each record gets its own result. It implements postbox.Publisher and is safe for concurrent use, as
// watermill requires of publishers.
type Publisher struct {
	pub    message.Publisher
	cfg    PublisherConfig
	log    *slog.Logger
	seed   maphash.Seed
	closed adapterkit.Closed
}

// WithDefaults returns a copy of c with every zero field set to its default. A nil c gives the defaults.
func (c *PublisherConfig) WithDefaults() PublisherConfig {
	out := adapterkit.Copy(c)
	adapterkit.Default(&out.Concurrency, 1)
	adapterkit.Default(&out.Logger, slog.Default())
	return out
}

func (c PublisherConfig) validate() error {
	if c.Concurrency < 0 {
		return fmt.Errorf("%w: watermillbridge.NewPublisher: Concurrency %d must not be negative (0 means 1)", postbox.ErrInvalidConfig, c.Concurrency)
	}
	return nil
}

// NewPublisher returns a Postbox publisher that sends through pub. It does no I/O. The Publisher does not own
// pub: close pub yourself once the relay has stopped. cfg may be nil.
func NewPublisher(pub message.Publisher, cfg *PublisherConfig) (*Publisher, error) {
	if pub == nil {
		return nil, fmt.Errorf("%w: watermillbridge.NewPublisher needs a watermill message.Publisher", postbox.ErrInvalidConfig)
	}
	c := cfg.WithDefaults()
	if err := c.validate(); err != nil {
		return nil, err
	}
	return &Publisher{pub: pub, cfg: c, log: c.Logger, seed: maphash.MakeSeed()}, nil
}

// Close makes Publish return ErrClosed from now on. It leaves the watermill publisher open: close it yourself
// once the relay has stopped.
func (p *Publisher) Close() error { return p.closed.Close() }

// Publish publishes each record to its topic with its own watermill Publish call, the message's context set to
// ctx (watermill publishers that honour a message's context then stop at ctx's deadline). It returns nil when
// every call succeeded and a *postbox.BatchError otherwise. Records not started when ctx ends fail with ctx's
// error; a call already running is waited for, since watermill cannot interrupt it. Records that cannot become a
// watermill message (see Mapping.Message) fail with a postbox.Permanent error; watermill's own errors are all
// retried.
func (p *Publisher) Publish(ctx context.Context, batch []postbox.Record) error {
	if skip, err := p.closed.Skip(ErrClosed, len(batch)); skip {
		return err
	}
	errs := make([]error, len(batch))
	lanes := p.lanes(batch)
	if len(lanes) == 1 {
		p.publishLane(ctx, batch, lanes[0], errs)
	} else {
		var wg sync.WaitGroup
		for _, lane := range lanes {
			wg.Go(func() { p.publishLane(ctx, batch, lane, errs) })
		}
		wg.Wait()
	}
	return adapterkit.Result(ctx, p.log, errs)
}

// lanes splits the batch's indexes into at most Concurrency lanes, each key's records in one lane in batch
// order, and keyless records spread round robin.
func (p *Publisher) lanes(batch []postbox.Record) [][]int {
	n := min(p.cfg.Concurrency, len(batch))
	lanes := make([][]int, n)
	next := 0
	for i, rec := range batch {
		l := next
		if rec.Key != "" {
			l = int(maphash.String(p.seed, rec.Key) % uint64(n))
		} else {
			next = (next + 1) % n
		}
		lanes[l] = append(lanes[l], i)
	}
	out := lanes[:0]
	for _, l := range lanes {
		if len(l) > 0 {
			out = append(out, l)
		}
	}
	return out
}

// publishLane publishes the records at idx in order, writing each result to errs.
func (p *Publisher) publishLane(ctx context.Context, batch []postbox.Record, idx []int, errs []error) {
	failedKeys := map[string]string{} // key → ID of the record that failed
	for _, i := range idx {
		rec := batch[i]
		if err := ctx.Err(); err != nil {
			errs[i] = fmt.Errorf("watermillbridge: message %s not published: %w", rec.ID, err)
			continue
		}
		if id, failed := failedKeys[rec.Key]; failed && rec.Key != "" {
			errs[i] = fmt.Errorf("watermillbridge: message %s not published: message %s with the same key failed before it", rec.ID, id)
			continue
		}
		errs[i] = p.publish(ctx, rec)
		if errs[i] != nil {
			failedKeys[rec.Key] = rec.ID
		}
	}
}

func (p *Publisher) publish(ctx context.Context, rec postbox.Record) error {
	msg, err := p.cfg.Mapping.Message(rec)
	if err != nil {
		return postbox.Permanent(err) // the error names the message
	}
	msg.SetContext(ctx)
	if err := p.pub.Publish(rec.Topic, msg); err != nil {
		return fmt.Errorf("watermillbridge: publish message %s to %q: %w", rec.ID, rec.Topic, err)
	}
	return nil
}

package sqsbroker

import (
	"context"
	"fmt"
	"log/slog"
	"strconv"
	"strings"
	"sync"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"
	"github.com/postbox-go/postbox"
	"github.com/postbox-go/postbox/broker"
	"github.com/postbox-go/postbox/broker/internal/adapterkit"
)

// ErrClosed is wrapped by the error of messages published after Close.
var ErrClosed = adapterkit.ErrClosed("sqsbroker")

// PublisherConfig configures a Publisher. The zero value is valid: each message goes to the queue named after its
// topic.
type PublisherConfig struct {
	// QueueURL, when set, is the URL of the one queue every message goes to, whatever its topic. Default: none;
	// the queue is named after the topic (see QueuePrefix and QueueSuffix) and its URL looked up with GetQueueUrl.
	QueueURL string
	// QueuePrefix goes before each message's topic to make its queue's name ("prod-" + "orders"). Default: none.
	QueuePrefix string
	// QueueSuffix goes after it; ".fifo" sends every topic to a FIFO queue ("orders" + ".fifo"). Default: none.
	QueueSuffix string
	// DefaultGroup is the MessageGroupId of messages without a key on a FIFO queue. Default: DefaultGroup
	// ("postbox"): all of them in one group, in publish order.
	DefaultGroup string
	// MaxMessageBytes is the largest message (body and attributes) and the largest SendMessageBatch call the
	// publisher sends. A larger message fails as permanent. Raise it, up to MaxMessageBytesLimit, only when every
	// queue's MaximumMessageSize is at least as large. Default: DefaultMaxMessageBytes (256 KiB).
	MaxMessageBytes int
	// Source is the CloudEvents source attribute. Default: broker.DefaultSource ("postbox").
	Source string
	// Logger receives a debug line for each message that failed to publish. Default: slog.Default().
	Logger *slog.Logger
}

// WithDefaults returns a copy of c with every zero field set to its default. A nil c gives the defaults.
func (c *PublisherConfig) WithDefaults() PublisherConfig {
	out := adapterkit.Copy(c)
	adapterkit.Default(&out.DefaultGroup, DefaultGroup)
	adapterkit.Default(&out.MaxMessageBytes, DefaultMaxMessageBytes)
	adapterkit.Default(&out.Source, broker.DefaultSource)
	adapterkit.Default(&out.Logger, slog.Default())
	return out
}

func (c PublisherConfig) validate() error {
	if c.MaxMessageBytes < 1024 || c.MaxMessageBytes > MaxMessageBytesLimit {
		return fmt.Errorf("%w: sqsbroker.NewPublisher: MaxMessageBytes is %d; SQS takes 1024 to %d (0 means %d)",
			postbox.ErrInvalidConfig, c.MaxMessageBytes, MaxMessageBytesLimit, DefaultMaxMessageBytes)
	}
	if !validGroupID(c.DefaultGroup) {
		return fmt.Errorf("%w: sqsbroker.NewPublisher: DefaultGroup %q is not a MessageGroupId: write 1 to %d letters, digits or ASCII punctuation",
			postbox.ErrInvalidConfig, c.DefaultGroup, MaxGroupIDLen)
	}
	if c.QueueURL != "" && (c.QueuePrefix != "" || c.QueueSuffix != "") {
		return fmt.Errorf("%w: sqsbroker.NewPublisher: QueueURL names the one queue of every message; QueuePrefix and QueueSuffix make a queue name per topic: set one or the other",
			postbox.ErrInvalidConfig)
	}
	if c.QueueURL == "" && (c.QueuePrefix != "" || c.QueueSuffix != "") {
		if err := CheckQueueName(c.QueuePrefix + "x" + c.QueueSuffix); err != nil {
			return fmt.Errorf("%w: sqsbroker.NewPublisher: QueuePrefix and QueueSuffix: %v", postbox.ErrInvalidConfig, err)
		}
	}
	return nil
}

// Publisher publishes batches to SQS queues with SendMessageBatch. It implements postbox.Publisher and is safe
// for concurrent use.
type Publisher struct {
	c      *sqs.Client
	cfg    PublisherConfig
	ce     broker.CloudEvents
	log    *slog.Logger
	closed adapterkit.Closed

	mu   sync.Mutex
	urls map[string]string // queue name → URL
}

// NewPublisher returns a publisher on c, an SQS client made with sqs.NewFromConfig (region, credentials and
// endpoint come from its aws.Config). It does no I/O. cfg may be nil.
func NewPublisher(c *sqs.Client, cfg *PublisherConfig) (*Publisher, error) {
	if c == nil {
		return nil, fmt.Errorf("%w: sqsbroker.NewPublisher needs a client; make one with sqs.NewFromConfig", postbox.ErrInvalidConfig)
	}
	conf := cfg.WithDefaults()
	if err := conf.validate(); err != nil {
		return nil, err
	}
	return &Publisher{c: c, cfg: conf, ce: broker.CloudEvents{Prefix: Prefix, Source: conf.Source}, log: conf.Logger,
		urls: map[string]string{}}, nil
}

// Close marks the publisher closed; Publish returns ErrClosed afterwards. The client stays usable.
func (p *Publisher) Close() error { return p.closed.Close() }

// entry is a record on its way to a queue.
type entry struct {
	i    int // index in the batch
	msg  wireMessage
	grp  string // MessageGroupId on a FIFO queue
	fifo bool
}

// Publish sends the batch's messages to their queues, up to MaxBatchEntries and MaxMessageBytes per
// SendMessageBatch call, queue after queue, and returns nil when SQS accepted all of them, and otherwise a
// *postbox.BatchError. On a FIFO queue the message's key is its MessageGroupId and its ID its
// MessageDeduplicationId, so SQS drops a repeat sent within its five-minute dedup window; once a message of a
// group failed, the later ones of that group in the batch fail too without being sent, so that none overtakes
// it. Messages no retry can send (over MaxMessageBytes, refused by SQS as the sender's fault) fail as
// postbox.Permanent; throttling and SQS's server errors as postbox.Unavailable.
func (p *Publisher) Publish(ctx context.Context, batch []postbox.Record) error {
	if skip, err := p.closed.Skip(ErrClosed, len(batch)); skip {
		return err
	}
	errs := make([]error, len(batch))
	var order []string // queue URLs in first-seen order
	queues := map[string][]entry{}
	for i, m := range adapterkit.Messages(ctx, "sqsbroker", batch, errs, p.message) {
		url, err := p.queueURL(ctx, batch[i].Topic)
		if err != nil {
			errs[i] = fmt.Errorf("sqsbroker: message %s not published: %w", batch[i].ID, err)
			continue
		}
		e := entry{i: i, msg: m, fifo: isFIFO(url)}
		if e.fifo {
			e.grp = groupID(batch[i].Key, p.cfg.DefaultGroup)
		}
		if _, ok := queues[url]; !ok {
			order = append(order, url)
		}
		queues[url] = append(queues[url], e)
	}
	for _, url := range order {
		p.send(ctx, url, queues[url], batch, errs)
	}
	return adapterkit.Result(ctx, p.log, errs)
}

// send sends the entries to the queue at url in calls of up to MaxBatchEntries and MaxMessageBytes.
func (p *Publisher) send(ctx context.Context, url string, es []entry, batch []postbox.Record, errs []error) {
	failed := map[string]bool{} // FIFO groups with a failed message
	for len(es) > 0 {
		var call []entry
		size := 0
		for len(es) > 0 && len(call) < MaxBatchEntries && size+es[0].msg.size <= p.cfg.MaxMessageBytes {
			e := es[0]
			es = es[1:]
			if e.fifo && failed[e.grp] {
				errs[e.i] = fmt.Errorf("sqsbroker: message %s not sent: an earlier message of its key failed in this batch", batch[e.i].ID)
				continue
			}
			size += e.msg.size
			call = append(call, e)
		}
		if len(call) == 0 {
			continue
		}
		in := &sqs.SendMessageBatchInput{QueueUrl: aws.String(url), Entries: make([]types.SendMessageBatchRequestEntry, len(call))}
		for j, e := range call {
			in.Entries[j] = types.SendMessageBatchRequestEntry{Id: aws.String(strconv.Itoa(j)), MessageBody: aws.String(e.msg.body),
				MessageAttributes: e.msg.attrs}
			if e.fifo {
				in.Entries[j].MessageGroupId = aws.String(e.grp)
				in.Entries[j].MessageDeduplicationId = aws.String(batch[e.i].ID)
			}
		}
		if err := ctx.Err(); err != nil {
			for _, e := range call {
				errs[e.i] = fmt.Errorf("sqsbroker: message %s not published: %w", batch[e.i].ID, err)
			}
			continue
		}
		out, err := p.c.SendMessageBatch(ctx, in)
		if err != nil {
			err = classify(err, "sqs:SendMessage", url)
			for _, e := range call {
				errs[e.i] = fmt.Errorf("sqsbroker: send message %s: %w", batch[e.i].ID, err)
				failed[e.grp] = e.fifo
			}
			continue
		}
		for _, f := range out.Failed {
			j, err := strconv.Atoi(aws.ToString(f.Id))
			if err != nil || j < 0 || j >= len(call) {
				continue
			}
			e := call[j]
			errs[e.i] = entryError(batch[e.i].ID, url, f)
			if e.fifo {
				failed[e.grp] = true
			}
		}
		if len(out.Successful)+len(out.Failed) < len(call) {
			seen := make([]bool, len(call))
			for _, s := range out.Successful {
				if j, err := strconv.Atoi(aws.ToString(s.Id)); err == nil && j >= 0 && j < len(call) {
					seen[j] = true
				}
			}
			for j, e := range call {
				if !seen[j] && errs[e.i] == nil {
					errs[e.i] = fmt.Errorf("sqsbroker: message %s: SQS answered neither success nor failure for it", batch[e.i].ID)
				}
			}
		}
	}
}

// message builds the SQS message for rec, refusing what SQS would refuse for good.
func (p *Publisher) message(rec postbox.Record) (wireMessage, error) {
	m, err := encode(p.ce, rec)
	if err != nil {
		return wireMessage{}, err
	}
	if m.size > p.cfg.MaxMessageBytes {
		return wireMessage{}, fmt.Errorf("sqsbroker: message %s is %d bytes with its attributes; the limit is %d (PublisherConfig.MaxMessageBytes); store the payload elsewhere and send a reference",
			rec.ID, m.size, p.cfg.MaxMessageBytes)
	}
	if p.cfg.QueueURL == "" {
		if err := CheckQueueName(p.cfg.QueuePrefix + rec.Topic + p.cfg.QueueSuffix); err != nil {
			return wireMessage{}, fmt.Errorf("sqsbroker: message %s: topic %q: %v; set PublisherConfig.QueueURL to send every topic to one queue",
				rec.ID, rec.Topic, err)
		}
	}
	return m, nil
}

// queueURL returns the URL of topic's queue, looking it up once.
func (p *Publisher) queueURL(ctx context.Context, topic string) (string, error) {
	if p.cfg.QueueURL != "" {
		return p.cfg.QueueURL, nil
	}
	name := p.cfg.QueuePrefix + topic + p.cfg.QueueSuffix
	p.mu.Lock()
	url, ok := p.urls[name]
	p.mu.Unlock()
	if ok {
		return url, nil
	}
	out, err := p.c.GetQueueUrl(ctx, &sqs.GetQueueUrlInput{QueueName: aws.String(name)})
	if err != nil {
		return "", fmt.Errorf("look up queue %q: %w", name, classify(err, "sqs:GetQueueUrl", name))
	}
	url = aws.ToString(out.QueueUrl)
	p.mu.Lock()
	p.urls[name] = url
	p.mu.Unlock()
	return url, nil
}

// isFIFO reports whether the queue at url is a FIFO queue: SQS requires their names to end in ".fifo".
func isFIFO(url string) bool { return strings.HasSuffix(url, ".fifo") }

// CheckQueueName returns an error unless name is a valid SQS queue name: 1 to 80 letters, digits, '-' and '_',
// with ".fifo" at the end of a FIFO queue's name (counted in the 80).
func CheckQueueName(name string) error {
	base := strings.TrimSuffix(name, ".fifo")
	if len(name) > 80 || base == "" {
		return fmt.Errorf("queue name %q is %d characters; SQS allows 1 to 80", name, len(name))
	}
	for i := 0; i < len(base); i++ {
		c := base[i]
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '-' || c == '_') {
			return fmt.Errorf("queue name %q holds %q; SQS allows only letters, digits, '-' and '_' (and .fifo at the end)", name, c)
		}
	}
	return nil
}

// entryError is the error of one message SendMessageBatch refused.
func entryError(id, url string, f types.BatchResultErrorEntry) error {
	err := fmt.Errorf("sqsbroker: SQS refused message %s for %s: %s: %s", id, url, aws.ToString(f.Code), aws.ToString(f.Message))
	switch {
	case throttled(aws.ToString(f.Code)):
		return postbox.Unavailable(err)
	case f.SenderFault:
		return postbox.Permanent(err)
	}
	return err
}

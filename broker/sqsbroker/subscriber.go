package sqsbroker

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"
	"github.com/postbox-go/postbox"
	"github.com/postbox-go/postbox/broker"
	"github.com/postbox-go/postbox/broker/internal/adapterkit"
)

// Defaults of SubscriberConfig.
const (
	// DefaultWaitTime is how long a ReceiveMessage call waits for messages (long polling), SQS's maximum.
	DefaultWaitTime = 20 * time.Second
	// DefaultErrorBackoff is how long Receive waits after a failed ReceiveMessage before it tries again.
	DefaultErrorBackoff = time.Second
	// maxVisibility is SQS's longest visibility timeout: 12 hours.
	maxVisibility = 12 * time.Hour
)

// SubscriberConfig configures a Subscriber. QueueURL and Topic are required.
type SubscriberConfig struct {
	// QueueURL is the URL of the queue to receive from.
	QueueURL string
	// Topic is the Postbox topic of the queue's messages: SQS messages do not carry it, so delivered messages get
	// this one.
	Topic string
	// VisibilityTimeout is how long a received message stays hidden from other receivers; a handler that has not
	// settled it by then sees it delivered again (to any subscriber of the queue). It is the ack timeout: set it
	// above the longest run of your handler. The subscriber does not extend it. Default: the queue's own
	// (30 seconds unless the queue says otherwise).
	VisibilityTimeout time.Duration
	// WaitTime is how long one ReceiveMessage call waits for messages, up to 20 seconds. Default:
	// DefaultWaitTime.
	WaitTime time.Duration
	// ErrorBackoff is how long Receive waits after a failed ReceiveMessage. Default: DefaultErrorBackoff.
	ErrorBackoff time.Duration
	// Logger receives messages that are not Postbox CloudEvents and failed receives. Default: slog.Default().
	Logger *slog.Logger
}

// WithDefaults returns a copy of c with every zero field set to its default. A nil c gives the defaults.
func (c *SubscriberConfig) WithDefaults() SubscriberConfig {
	out := adapterkit.Copy(c)
	adapterkit.Default(&out.WaitTime, DefaultWaitTime)
	adapterkit.Default(&out.ErrorBackoff, DefaultErrorBackoff)
	adapterkit.Default(&out.Logger, slog.Default())
	return out
}

func (c SubscriberConfig) validate() error {
	if c.QueueURL == "" || c.Topic == "" {
		return fmt.Errorf("%w: sqsbroker.NewSubscriber needs the QueueURL and the Postbox Topic its messages carry", postbox.ErrInvalidConfig)
	}
	if c.VisibilityTimeout < 0 || c.VisibilityTimeout > maxVisibility || (c.VisibilityTimeout > 0 && c.VisibilityTimeout < time.Second) {
		return fmt.Errorf("%w: sqsbroker.NewSubscriber: VisibilityTimeout %v: SQS takes whole seconds from 1s to 12h (0 means the queue's)",
			postbox.ErrInvalidConfig, c.VisibilityTimeout)
	}
	if c.WaitTime < 0 || c.WaitTime > 20*time.Second || c.ErrorBackoff < 0 {
		return fmt.Errorf("%w: sqsbroker.NewSubscriber: WaitTime %v must be 1s to 20s and ErrorBackoff %v not negative (0 means the default)",
			postbox.ErrInvalidConfig, c.WaitTime, c.ErrorBackoff)
	}
	return nil
}

// Subscriber receives messages from an SQS queue by long polling. It implements broker.Subscriber: Ack deletes
// the message, Nack sets its visibility timeout to the nack delay (so SQS delivers it again after about that
// long), Reject deletes it (logged). Delivery.Attempt is SQS's ApproximateReceiveCount.
//
// Each ReceiveMessage call takes up to ten messages; their handlers run in parallel, except that the messages
// of one key (one MessageGroupId on a FIFO queue) run one after the other in queue order. On a FIFO queue, once
// one of them is nacked, the later ones of its group in that call are made visible again unhandled, and SQS,
// which holds a group back while a message of it is in flight, delivers them after it: per-key order holds
// across nacks. The next ReceiveMessage call waits for every handler of the previous one.
type Subscriber struct {
	c       *sqs.Client
	cfg     SubscriberConfig
	ce      broker.CloudEvents
	log     *slog.Logger
	fifo    bool
	running adapterkit.Running
}

// NewSubscriber returns a subscriber on c configured by cfg, which needs at least a QueueURL and a Topic. It does
// no I/O.
func NewSubscriber(c *sqs.Client, cfg *SubscriberConfig) (*Subscriber, error) {
	if c == nil {
		return nil, fmt.Errorf("%w: sqsbroker.NewSubscriber needs a client; make one with sqs.NewFromConfig", postbox.ErrInvalidConfig)
	}
	conf := cfg.WithDefaults()
	if err := conf.validate(); err != nil {
		return nil, err
	}
	return &Subscriber{c: c, cfg: conf, ce: broker.CloudEvents{Prefix: Prefix}, log: conf.Logger, fifo: isFIFO(conf.QueueURL)}, nil
}

// Receive receives messages and calls handle for each until ctx is cancelled (see broker.Subscriber). Failed
// receives are logged and retried after ErrorBackoff; Receive returns an error early only when the queue does
// not exist or the credentials may not receive from it.
func (s *Subscriber) Receive(ctx context.Context, handle broker.DeliveryHandler) error {
	done, err := s.running.Start(ctx, "sqsbroker", handle, "")
	if done == nil {
		return err
	}
	defer done()
	in := &sqs.ReceiveMessageInput{
		QueueUrl:                    aws.String(s.cfg.QueueURL),
		MaxNumberOfMessages:         MaxBatchEntries,
		WaitTimeSeconds:             int32(s.cfg.WaitTime / time.Second),
		MessageAttributeNames:       []string{"All"},
		MessageSystemAttributeNames: []types.MessageSystemAttributeName{types.MessageSystemAttributeNameApproximateReceiveCount, types.MessageSystemAttributeNameMessageGroupId},
	}
	if s.cfg.VisibilityTimeout > 0 {
		in.VisibilityTimeout = int32(s.cfg.VisibilityTimeout / time.Second)
	}
	for ctx.Err() == nil {
		out, err := s.c.ReceiveMessage(ctx, in)
		if ctx.Err() != nil {
			if err == nil {
				s.release(out.Messages)
			}
			return nil
		}
		if err != nil {
			err = classify(err, "sqs:ReceiveMessage", s.cfg.QueueURL)
			if fatal(err) {
				return fmt.Errorf("sqsbroker: receive from %s: %w", s.cfg.QueueURL, err)
			}
			s.log.WarnContext(ctx, "sqsbroker: receive failed; trying again", "queue", s.cfg.QueueURL, "err", err)
			adapterkit.Sleep(ctx, s.cfg.ErrorBackoff)
			continue
		}
		s.handle(ctx, out.Messages, handle)
	}
	return nil
}

// handle runs the handlers of one ReceiveMessage call: the messages of one group in order, groups in parallel.
func (s *Subscriber) handle(ctx context.Context, msgs []types.Message, handle broker.DeliveryHandler) {
	var groups [][]types.Message
	index := map[string]int{}
	for _, m := range msgs {
		g, ok := m.Attributes[string(types.MessageSystemAttributeNameMessageGroupId)]
		if !ok {
			g = keyOf(m)
		}
		i, ok := index[g]
		if !ok || g == "" {
			i = len(groups)
			index[g] = i
			groups = append(groups, nil)
		}
		groups[i] = append(groups[i], m)
	}
	var wg sync.WaitGroup
	for _, g := range groups {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for j, m := range g {
				if ctx.Err() != nil {
					s.release(g[j:])
					return
				}
				a := &acker{s: s, handle: m.ReceiptHandle}
				d, ok := s.delivery(ctx, m, a)
				if !ok {
					continue
				}
				broker.Dispatch(ctx, d, handle)
				if a.nacked.Load() && s.fifo {
					s.release(g[j+1:]) // they come again after the nacked one
					return
				}
			}
		}()
	}
	wg.Wait()
}

// keyOf returns the Postbox key a message carries, for grouping messages of a standard queue.
func keyOf(m types.Message) string {
	if v, ok := m.MessageAttributes[Prefix+broker.AttrPartitionKey]; ok {
		return aws.ToString(v.StringValue)
	}
	return ""
}

// release makes messages visible again at once, without handling them.
func (s *Subscriber) release(msgs []types.Message) {
	if len(msgs) == 0 {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	in := &sqs.ChangeMessageVisibilityBatchInput{QueueUrl: aws.String(s.cfg.QueueURL)}
	for i, m := range msgs {
		in.Entries = append(in.Entries, types.ChangeMessageVisibilityBatchRequestEntry{Id: aws.String(strconv.Itoa(i)),
			ReceiptHandle: m.ReceiptHandle, VisibilityTimeout: 0})
	}
	if _, err := s.c.ChangeMessageVisibilityBatch(ctx, in); err != nil {
		s.log.Warn("sqsbroker: could not release unhandled messages; SQS delivers them again once their visibility timeout passes",
			"queue", s.cfg.QueueURL, "err", err)
	}
}

// delivery decodes m, deleting it if it is not a Postbox message.
func (s *Subscriber) delivery(ctx context.Context, m types.Message, a *acker) (*broker.Delivery, bool) {
	e, err := decode(s.ce, m.Body, m.MessageAttributes)
	if err != nil {
		s.log.ErrorContext(ctx, "sqsbroker: deleting a message that is not a Postbox CloudEvent",
			"queue", s.cfg.QueueURL, "sqs_id", aws.ToString(m.MessageId), "err", err)
		if err := a.Ack(ctx); err != nil {
			s.log.WarnContext(ctx, "sqsbroker: could not delete the message", "err", err)
		}
		return nil, false
	}
	e.Message.Topic = s.cfg.Topic
	attempt, _ := strconv.Atoi(m.Attributes[string(types.MessageSystemAttributeNameApproximateReceiveCount)])
	return broker.NewDelivery(e, attempt, a), true
}

// acker settles one received message.
type acker struct {
	s      *Subscriber
	handle *string
	nacked atomic.Bool
}

// Ack deletes the message.
func (a *acker) Ack(ctx context.Context) error {
	_, err := a.s.c.DeleteMessage(ctx, &sqs.DeleteMessageInput{QueueUrl: aws.String(a.s.cfg.QueueURL), ReceiptHandle: a.handle})
	if err != nil {
		return fmt.Errorf("sqsbroker: delete message: %w", classify(err, "sqs:DeleteMessage", a.s.cfg.QueueURL))
	}
	return nil
}

// Nack sets the message's visibility timeout to delay, rounded up to whole seconds and at most 12 hours, after
// which SQS delivers it again.
func (a *acker) Nack(ctx context.Context, delay time.Duration) error {
	a.nacked.Store(true)
	secs := int32((min(delay, maxVisibility) + time.Second - 1) / time.Second)
	_, err := a.s.c.ChangeMessageVisibility(ctx, &sqs.ChangeMessageVisibilityInput{QueueUrl: aws.String(a.s.cfg.QueueURL),
		ReceiptHandle: a.handle, VisibilityTimeout: secs})
	if err != nil {
		return fmt.Errorf("sqsbroker: change message visibility: %w", classify(err, "sqs:ChangeMessageVisibility", a.s.cfg.QueueURL))
	}
	return nil
}

// Reject deletes the message: it is never delivered again. (For a dead-letter queue, configure the queue's
// redrive policy and let the handler Nack instead.)
func (a *acker) Reject(ctx context.Context) error { return a.Ack(ctx) }

var _ broker.Rejecter = (*acker)(nil)

// fatal reports whether a receive error will not go away by retrying: the queue is missing or the credentials
// may not use it.
func fatal(err error) bool {
	return !postbox.IsUnavailable(err) && (errors.Is(err, errNoQueue) || errors.Is(err, errForbidden))
}

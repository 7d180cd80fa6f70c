package snsbroker

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"strings"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sns"
	"github.com/aws/aws-sdk-go-v2/service/sns/types"
	"github.com/aws/smithy-go"
	"github.com/postbox-go/postbox"
	"github.com/postbox-go/postbox/broker"
	"github.com/postbox-go/postbox/broker/internal/adapterkit"
	"github.com/postbox-go/postbox/broker/internal/awswire"
)

// Prefix is the message-attribute name prefix of the CloudEvents attributes (the HTTP binding's), as for
// broker/sqsbroker.
const Prefix = awswire.Prefix

// Limits SNS puts on a batch and a message.
const (
	// MaxBatchEntries is how many messages one PublishBatch call takes.
	MaxBatchEntries = 10
	// MaxMessageBytes is the largest message (body and attributes) and the largest PublishBatch call: 256 KiB.
	MaxMessageBytes = 256 * 1024
)

// DefaultGroup is the MessageGroupId of a message without a key on a FIFO topic.
const DefaultGroup = "postbox"

// ErrClosed is wrapped by the error of messages published after Close.
var ErrClosed = adapterkit.ErrClosed("snsbroker")

// PublisherConfig configures a Publisher. TopicARN or TopicARNPrefix is required.
type PublisherConfig struct {
	// TopicARN, when set, is the ARN of the one SNS topic every message goes to, whatever its Postbox topic.
	TopicARN string
	// TopicARNPrefix goes before each message's topic to make its SNS topic's ARN: "arn:aws:sns:REGION:ACCOUNT:"
	// with any name prefix after the last colon ("arn:aws:sns:eu-west-1:123456789012:prod-").
	TopicARNPrefix string
	// TopicSuffix goes after the topic; ".fifo" sends every topic to a FIFO topic. Default: none.
	TopicSuffix string
	// DefaultGroup is the MessageGroupId of messages without a key on a FIFO topic. Default: DefaultGroup
	// ("postbox").
	DefaultGroup string
	// BatchEntries is how many messages one PublishBatch call takes, 1 to MaxBatchEntries. Default:
	// MaxBatchEntries (10).
	BatchEntries int
	// Source is the CloudEvents source attribute. Default: broker.DefaultSource ("postbox").
	Source string
	// Logger receives a debug line for each message that failed to publish. Default: slog.Default().
	Logger *slog.Logger
}

// WithDefaults returns a copy of c with every zero field set to its default. A nil c gives the defaults.
func (c *PublisherConfig) WithDefaults() PublisherConfig {
	out := adapterkit.Copy(c)
	adapterkit.Default(&out.DefaultGroup, DefaultGroup)
	adapterkit.Default(&out.BatchEntries, MaxBatchEntries)
	adapterkit.Default(&out.Source, broker.DefaultSource)
	adapterkit.Default(&out.Logger, slog.Default())
	return out
}

func (c PublisherConfig) validate() error {
	switch {
	case c.BatchEntries < 1 || c.BatchEntries > MaxBatchEntries:
		return fmt.Errorf("%w: snsbroker.NewPublisher: BatchEntries is %d; SNS takes 1 to %d (0 means %d)",
			postbox.ErrInvalidConfig, c.BatchEntries, MaxBatchEntries, MaxBatchEntries)
	case (c.TopicARN == "") == (c.TopicARNPrefix == ""):
		return fmt.Errorf("%w: snsbroker.NewPublisher needs TopicARN (one SNS topic for every message) or TopicARNPrefix (arn:aws:sns:REGION:ACCOUNT: before each topic), not both",
			postbox.ErrInvalidConfig)
	case c.TopicARN != "" && c.TopicSuffix != "":
		return fmt.Errorf("%w: snsbroker.NewPublisher: TopicSuffix goes with TopicARNPrefix, not TopicARN", postbox.ErrInvalidConfig)
	case c.TopicARNPrefix != "" && (!strings.HasPrefix(c.TopicARNPrefix, "arn:") || strings.Count(c.TopicARNPrefix, ":") != 5):
		return fmt.Errorf("%w: snsbroker.NewPublisher: TopicARNPrefix %q is not of the form arn:aws:sns:REGION:ACCOUNT:[NAME-PREFIX]",
			postbox.ErrInvalidConfig, c.TopicARNPrefix)
	case !awswire.ValidGroupID(c.DefaultGroup):
		return fmt.Errorf("%w: snsbroker.NewPublisher: DefaultGroup %q is not a MessageGroupId: write 1 to %d letters, digits or ASCII punctuation",
			postbox.ErrInvalidConfig, c.DefaultGroup, awswire.MaxGroupIDLen)
	}
	return nil
}

// Publisher publishes batches to SNS topics with PublishBatch. It implements postbox.Publisher and is safe for
// concurrent use.
type Publisher struct {
	c      *sns.Client
	cfg    PublisherConfig
	ce     broker.CloudEvents
	log    *slog.Logger
	closed adapterkit.Closed
}

// NewPublisher returns a publisher on c, an SNS client made with sns.NewFromConfig. It does no I/O.
func NewPublisher(c *sns.Client, cfg *PublisherConfig) (*Publisher, error) {
	if c == nil {
		return nil, fmt.Errorf("%w: snsbroker.NewPublisher needs a client; make one with sns.NewFromConfig", postbox.ErrInvalidConfig)
	}
	conf := cfg.WithDefaults()
	if err := conf.validate(); err != nil {
		return nil, err
	}
	return &Publisher{c: c, cfg: conf, ce: broker.CloudEvents{Prefix: Prefix, Source: conf.Source}, log: conf.Logger}, nil
}

// Close marks the publisher closed; Publish returns ErrClosed afterwards. The client stays usable.
func (p *Publisher) Close() error { return p.closed.Close() }

type entry struct {
	i    int
	msg  awswire.Message
	grp  string
	fifo bool
}

// Publish sends the batch's messages to their topics, up to MaxBatchEntries and MaxMessageBytes per PublishBatch
// call, topic after topic, and returns nil when SNS accepted all of them, and otherwise a *postbox.BatchError. On
// a FIFO topic the key is the MessageGroupId and the message ID the MessageDeduplicationId; once a message of a
// group failed, the later ones of that group in the batch fail too without being sent. Messages over
// MaxMessageBytes and entries SNS refuses as the sender's fault fail as postbox.Permanent; throttling and SNS's
// server errors as postbox.Unavailable.
func (p *Publisher) Publish(ctx context.Context, batch []postbox.Record) error {
	if skip, err := p.closed.Skip(ErrClosed, len(batch)); skip {
		return err
	}
	errs := make([]error, len(batch))
	var order []string
	topics := map[string][]entry{}
	for i, m := range adapterkit.Messages(ctx, "snsbroker", batch, errs, p.message) {
		arn := p.cfg.TopicARN
		if arn == "" {
			arn = p.cfg.TopicARNPrefix + batch[i].Topic + p.cfg.TopicSuffix
		}
		e := entry{i: i, msg: m, fifo: strings.HasSuffix(arn, ".fifo")}
		if e.fifo {
			e.grp = awswire.GroupID(batch[i].Key, p.cfg.DefaultGroup)
		}
		if _, ok := topics[arn]; !ok {
			order = append(order, arn)
		}
		topics[arn] = append(topics[arn], e)
	}
	for _, arn := range order {
		p.send(ctx, arn, topics[arn], batch, errs)
	}
	return adapterkit.Result(ctx, p.log, errs)
}

func (p *Publisher) send(ctx context.Context, arn string, es []entry, batch []postbox.Record, errs []error) {
	failed := map[string]bool{}
	for len(es) > 0 {
		var call []entry
		size := 0
		for len(es) > 0 && len(call) < p.cfg.BatchEntries && size+es[0].msg.Size <= MaxMessageBytes {
			e := es[0]
			es = es[1:]
			if e.fifo && failed[e.grp] {
				errs[e.i] = fmt.Errorf("snsbroker: message %s not sent: an earlier message of its key failed in this batch", batch[e.i].ID)
				continue
			}
			size += e.msg.Size
			call = append(call, e)
		}
		if len(call) == 0 {
			continue
		}
		if err := ctx.Err(); err != nil {
			for _, e := range call {
				errs[e.i] = fmt.Errorf("snsbroker: message %s not published: %w", batch[e.i].ID, err)
			}
			continue
		}
		in := &sns.PublishBatchInput{TopicArn: aws.String(arn), PublishBatchRequestEntries: make([]types.PublishBatchRequestEntry, len(call))}
		for j, e := range call {
			attrs := make(map[string]types.MessageAttributeValue, len(e.msg.Attrs))
			for n, v := range e.msg.Attrs {
				attrs[n] = types.MessageAttributeValue{DataType: aws.String("String"), StringValue: aws.String(v)}
			}
			in.PublishBatchRequestEntries[j] = types.PublishBatchRequestEntry{Id: aws.String(strconv.Itoa(j)), Message: aws.String(e.msg.Body),
				MessageAttributes: attrs}
			if e.fifo {
				in.PublishBatchRequestEntries[j].MessageGroupId = aws.String(e.grp)
				in.PublishBatchRequestEntries[j].MessageDeduplicationId = aws.String(batch[e.i].ID)
			}
		}
		out, err := p.c.PublishBatch(ctx, in)
		if err != nil {
			err = classify(err, arn)
			for _, e := range call {
				errs[e.i] = fmt.Errorf("snsbroker: publish message %s: %w", batch[e.i].ID, err)
				failed[e.grp] = e.fifo
			}
			continue
		}
		answered := make([]bool, len(call))
		for _, s := range out.Successful {
			if j, err := strconv.Atoi(aws.ToString(s.Id)); err == nil && j >= 0 && j < len(call) {
				answered[j] = true
			}
		}
		for _, f := range out.Failed {
			j, err := strconv.Atoi(aws.ToString(f.Id))
			if err != nil || j < 0 || j >= len(call) {
				continue
			}
			answered[j] = true
			e := call[j]
			errs[e.i] = entryError(batch[e.i].ID, arn, f)
			if e.fifo {
				failed[e.grp] = true
			}
		}
		for j, e := range call {
			if !answered[j] {
				errs[e.i] = fmt.Errorf("snsbroker: message %s: SNS answered neither success nor failure for it", batch[e.i].ID)
			}
		}
	}
}

func (p *Publisher) message(rec postbox.Record) (awswire.Message, error) {
	m, err := awswire.Encode(p.ce, rec)
	if err != nil {
		return awswire.Message{}, fmt.Errorf("snsbroker: %w", err)
	}
	if m.Size > MaxMessageBytes {
		return awswire.Message{}, fmt.Errorf("snsbroker: message %s is %d bytes with its attributes; SNS takes at most %d; store the payload elsewhere and send a reference",
			rec.ID, m.Size, MaxMessageBytes)
	}
	return m, nil
}

// throttled reports whether an SNS error code says the request was throttled or SNS could not serve it.
func throttled(code string) bool {
	switch code {
	case "Throttled", "Throttling", "ThrottlingException", "KMSThrottling", "InternalError", "InternalFailure",
		"ServiceUnavailable", "RequestTimeout":
		return true
	}
	return false
}

// classify wraps an error of a whole SNS call: throttling and server errors are postbox.Unavailable, and errors
// a user fixes in AWS say what to do.
func classify(err error, arn string) error {
	var ae smithy.APIError
	if errors.As(err, &ae) {
		switch code := ae.ErrorCode(); {
		case throttled(code):
			return postbox.Unavailable(err)
		case code == "NotFound" || code == "ResourceNotFound":
			return fmt.Errorf("topic %s does not exist; create it (Postbox never creates topics), or check TopicARNPrefix and TopicSuffix: %w", arn, err)
		case code == "AuthorizationError" || code == "KMSAccessDenied":
			return fmt.Errorf("the credentials lack a permission: grant sns:Publish on %s (and kms:GenerateDataKey and kms:Decrypt on the key of an encrypted topic): %w", arn, err)
		case code == "InvalidClientTokenId" || code == "SignatureDoesNotMatch" || code == "ExpiredToken" || code == "InvalidSecurity":
			return fmt.Errorf("AWS refused the credentials (%s); check AWS_ACCESS_KEY_ID/AWS_SECRET_ACCESS_KEY, AWS_PROFILE or the role the default credential chain picks: %w", code, err)
		}
	}
	var he interface{ HTTPStatusCode() int }
	if errors.As(err, &he) && he.HTTPStatusCode() >= 500 {
		return postbox.Unavailable(err)
	}
	return err
}

func entryError(id, arn string, f types.BatchResultErrorEntry) error {
	err := fmt.Errorf("snsbroker: SNS refused message %s for %s: %s: %s", id, arn, aws.ToString(f.Code), aws.ToString(f.Message))
	switch {
	case throttled(aws.ToString(f.Code)):
		return postbox.Unavailable(err)
	case f.SenderFault:
		return postbox.Permanent(err)
	}
	return err
}

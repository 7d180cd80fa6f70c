package kinesisbroker

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/kinesis"
	"github.com/aws/aws-sdk-go-v2/service/kinesis/types"
	"github.com/aws/smithy-go"
	"github.com/postbox-go/postbox"
	"github.com/postbox-go/postbox/broker/internal/adapterkit"
)

// Limits Kinesis Data Streams puts on PutRecords.
const (
	// MaxRecordBytes is the largest record: data and partition key, 1 MiB.
	MaxRecordBytes = 1024 * 1024
	// MaxRequestBytes is the largest PutRecords request: data and partition keys of all its records, 5 MiB.
	MaxRequestBytes = 5 * 1024 * 1024
	// MaxRequestRecords is how many records one PutRecords call takes.
	MaxRequestRecords = 500
)

// Defaults of PublisherConfig.
const (
	// DefaultRetryAttempts is how many times Publish sends a record again that PutRecords failed for throttling or
	// an internal failure, before it reports the record as failed.
	DefaultRetryAttempts = 3
	// DefaultRetryBackoff is the wait before the first of those retries; it doubles for each next one.
	DefaultRetryBackoff = 100 * time.Millisecond
)

// ErrClosed is wrapped by the error of messages published after Close.
var ErrClosed = adapterkit.ErrClosed("kinesisbroker")

// PublisherConfig configures a Publisher. The zero value sends each message to the stream named after its topic.
type PublisherConfig struct {
	// StreamName, when set, is the one stream every message goes to, whatever its topic. Default: none, the
	// stream is StreamPrefix + topic.
	StreamName string
	// StreamPrefix goes before each message's topic to make its stream's name. Default: none.
	StreamPrefix string
	// RetryAttempts is how many times a record PutRecords failed for throttling or an internal failure is sent
	// again within one Publish. Default: DefaultRetryAttempts. Negative: none.
	RetryAttempts int
	// RetryBackoff is the wait before the first retry, doubling after. Default: DefaultRetryBackoff.
	RetryBackoff time.Duration
	// Source is the CloudEvents source attribute. Default: broker.DefaultSource ("postbox").
	Source string
	// Logger receives a debug line for each message that failed to publish. Default: slog.Default().
	Logger *slog.Logger
}

// WithDefaults returns a copy of c with every zero field set to its default. A nil c gives the defaults.
func (c *PublisherConfig) WithDefaults() PublisherConfig {
	out := adapterkit.Copy(c)
	adapterkit.Default(&out.RetryAttempts, DefaultRetryAttempts)
	adapterkit.Default(&out.RetryBackoff, DefaultRetryBackoff)
	adapterkit.Default(&out.Source, "postbox")
	adapterkit.Default(&out.Logger, slog.Default())
	return out
}

func (c PublisherConfig) validate() error {
	if c.StreamName != "" && c.StreamPrefix != "" {
		return fmt.Errorf("%w: kinesisbroker.NewPublisher: StreamName names the one stream of every message; StreamPrefix makes one per topic: set one or the other",
			postbox.ErrInvalidConfig)
	}
	if c.RetryBackoff < 0 {
		return fmt.Errorf("%w: kinesisbroker.NewPublisher: RetryBackoff %v must not be negative", postbox.ErrInvalidConfig, c.RetryBackoff)
	}
	return nil
}

// Publisher publishes batches to Kinesis Data Streams with PutRecords. It implements postbox.Publisher and is
// safe for concurrent use.
type Publisher struct {
	c      *kinesis.Client
	cfg    PublisherConfig
	log    *slog.Logger
	closed adapterkit.Closed
}

// NewPublisher returns a publisher on c, a Kinesis client made with kinesis.NewFromConfig. It does no I/O.
func NewPublisher(c *kinesis.Client, cfg *PublisherConfig) (*Publisher, error) {
	if c == nil {
		return nil, fmt.Errorf("%w: kinesisbroker.NewPublisher needs a client; make one with kinesis.NewFromConfig", postbox.ErrInvalidConfig)
	}
	conf := cfg.WithDefaults()
	if err := conf.validate(); err != nil {
		return nil, err
	}
	return &Publisher{c: c, cfg: conf, log: conf.Logger}, nil
}

// Close marks the publisher closed; Publish returns ErrClosed afterwards. The client stays usable.
func (p *Publisher) Close() error { return p.closed.Close() }

type record struct {
	i    int
	data []byte
	key  string // partition key
}

func (r record) size() int { return len(r.data) + len(r.key) }

// Publish puts the batch's records to their streams and returns nil when Kinesis took all of them, and
// otherwise a *postbox.BatchError. The partition key is the message key (the message ID for a message without
// one), so a key's messages go to one shard in order. To keep that order through partial failures, one
// PutRecords call carries at most one record per partition key, and within MaxRequestRecords and
// MaxRequestBytes; records Kinesis failed for throttling or an internal failure are sent again (RetryAttempts,
// RetryBackoff) before the next call, and once one fails for good, the later records of its key fail without
// being sent. A record over MaxRecordBytes fails as permanent; throttling that outlasts the retries and Kinesis's
// server errors as postbox.Unavailable.
func (p *Publisher) Publish(ctx context.Context, batch []postbox.Record) error {
	if skip, err := p.closed.Skip(ErrClosed, len(batch)); skip {
		return err
	}
	errs := make([]error, len(batch))
	var order []string
	streams := map[string][]record{}
	for i, data := range adapterkit.Messages(ctx, "kinesisbroker", batch, errs, p.data) {
		s := p.cfg.StreamName
		if s == "" {
			s = p.cfg.StreamPrefix + batch[i].Topic
		}
		if _, ok := streams[s]; !ok {
			order = append(order, s)
		}
		streams[s] = append(streams[s], record{i: i, data: data, key: partitionKey(batch[i])})
	}
	for _, s := range order {
		p.send(ctx, s, streams[s], batch, errs)
	}
	return adapterkit.Result(ctx, p.log, errs)
}

func (p *Publisher) data(rec postbox.Record) ([]byte, error) {
	data, err := Encode(rec, p.cfg.Source)
	if err != nil {
		return nil, err
	}
	if n := len(data) + len(partitionKey(rec)); n > MaxRecordBytes {
		return nil, fmt.Errorf("kinesisbroker: message %s is %d bytes as a Kinesis record; Kinesis takes at most %d; store the payload elsewhere and send a reference",
			rec.ID, n, MaxRecordBytes)
	}
	return data, nil
}

// send puts the records to stream in calls of at most one record per partition key.
func (p *Publisher) send(ctx context.Context, stream string, pending []record, batch []postbox.Record, errs []error) {
	failed := map[string]bool{}
	for len(pending) > 0 {
		var call, rest []record
		inCall := map[string]bool{}
		size := 0
		for _, r := range pending {
			switch {
			case failed[r.key]:
				errs[r.i] = fmt.Errorf("kinesisbroker: message %s not sent: an earlier message of its key failed in this batch", batch[r.i].ID)
			case inCall[r.key] || len(call) == MaxRequestRecords || size+r.size() > MaxRequestBytes:
				rest = append(rest, r)
				inCall[r.key] = true // its later records wait too
			default:
				inCall[r.key] = true
				size += r.size()
				call = append(call, r)
			}
		}
		pending = rest
		for _, r := range p.put(ctx, stream, call, batch, errs) {
			failed[r.key] = true
		}
	}
}

// put sends call, retrying what Kinesis failed for throttling or an internal failure, and returns the records
// that failed for good, with their errors set. Retrying the failed records alone keeps every key's order: a call
// holds one record per key.
func (p *Publisher) put(ctx context.Context, stream string, call []record, batch []postbox.Record, errs []error) []record {
	var gone []record // failed for good
	backoff := p.cfg.RetryBackoff
	for attempt := 0; len(call) > 0; attempt++ {
		if err := ctx.Err(); err != nil {
			for _, r := range call {
				errs[r.i] = fmt.Errorf("kinesisbroker: message %s not published: %w", batch[r.i].ID, err)
			}
			return append(gone, call...)
		}
		retry := attempt < p.cfg.RetryAttempts
		in := &kinesis.PutRecordsInput{StreamName: aws.String(stream), Records: make([]types.PutRecordsRequestEntry, len(call))}
		for j, r := range call {
			in.Records[j] = types.PutRecordsRequestEntry{Data: r.data, PartitionKey: aws.String(r.key)}
		}
		out, err := p.c.PutRecords(ctx, in)
		if err != nil {
			err = classify(err, stream)
			if retry && postbox.IsUnavailable(err) && adapterkit.Sleep(ctx, backoff) {
				backoff *= 2
				continue
			}
			for _, r := range call {
				errs[r.i] = fmt.Errorf("kinesisbroker: put message %s: %w", batch[r.i].ID, err)
			}
			return append(gone, call...)
		}
		var again []record
		for j, r := range call {
			if j >= len(out.Records) {
				errs[r.i] = fmt.Errorf("kinesisbroker: message %s: Kinesis answered no result for it", batch[r.i].ID)
				gone = append(gone, r)
				continue
			}
			code := aws.ToString(out.Records[j].ErrorCode)
			if code == "" {
				continue
			}
			err := fmt.Errorf("kinesisbroker: Kinesis refused message %s for stream %s: %s: %s", batch[r.i].ID, stream, code,
				aws.ToString(out.Records[j].ErrorMessage))
			if throttled(code) {
				if retry {
					again = append(again, r)
					continue
				}
				err = postbox.Unavailable(err)
			}
			errs[r.i] = err
			gone = append(gone, r)
		}
		if len(again) > 0 && !adapterkit.Sleep(ctx, backoff) {
			continue // the context ended: the loop's first check fails them
		}
		backoff *= 2
		call = again
	}
	return gone
}

// throttled reports whether a Kinesis error code says the request was throttled or Kinesis could not serve it.
func throttled(code string) bool {
	switch code {
	case "ProvisionedThroughputExceededException", "ThrottlingException", "LimitExceededException", "KMSThrottlingException",
		"InternalFailure", "InternalFailureException", "ServiceUnavailable", "ServiceUnavailableException":
		return true
	}
	return false
}

// classify wraps an error of a whole Kinesis call.
func classify(err error, stream string) error {
	var ae smithy.APIError
	if errors.As(err, &ae) {
		switch code := ae.ErrorCode(); {
		case throttled(code):
			return postbox.Unavailable(err)
		case code == "ResourceNotFoundException":
			return fmt.Errorf("stream %s does not exist in this account and region; create it (Postbox never creates streams), or check StreamPrefix: %w", stream, err)
		case code == "AccessDeniedException" || code == "KMSAccessDeniedException":
			return fmt.Errorf("the credentials lack a permission: grant kinesis:PutRecords on stream %s (and kms:GenerateDataKey on the key of an encrypted stream): %w", stream, err)
		case code == "UnrecognizedClientException" || code == "InvalidSignatureException" || code == "ExpiredTokenException":
			return fmt.Errorf("AWS refused the credentials (%s); check AWS_ACCESS_KEY_ID/AWS_SECRET_ACCESS_KEY, AWS_PROFILE or the role the default credential chain picks: %w", code, err)
		}
	}
	var he interface{ HTTPStatusCode() int }
	if errors.As(err, &he) && he.HTTPStatusCode() >= 500 {
		return postbox.Unavailable(err)
	}
	return err
}

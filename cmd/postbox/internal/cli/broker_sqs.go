package cli

import (
	"context"
	"net/url"
	"slices"
	"strconv"
	"strings"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"

	"github.com/postbox-go/postbox/broker/sqsbroker"
)

func init() { brokerSchemes["sqs"] = openSQS }

// sqsParams are the query parameters of an sqs:// URL.
var sqsParams = []string{"queue_prefix", "queue_suffix", "queue_url", "default_group", "max_message_bytes", "endpoint"}

// openSQS returns an Amazon SQS publisher for
//
//	sqs://[REGION][?queue_prefix=P&queue_suffix=.fifo&queue_url=URL&default_group=G&max_message_bytes=N&endpoint=URL]
//
// Each message goes to the queue named P + topic + suffix (".fifo" for FIFO queues: the key is the
// MessageGroupId, the message ID the MessageDeduplicationId), or to queue_url for every topic. The queues must
// exist. The region is REGION, else AWS_REGION or AWS_DEFAULT_REGION, else the shared config's. Credentials come
// from the SDK's default chain (AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY, AWS_PROFILE, SSO, the container or
// instance role). endpoint, else AWS_ENDPOINT_URL_SQS or AWS_ENDPOINT_URL, replaces SQS's endpoint (a VPC
// endpoint, an emulator).
func openSQS(ctx context.Context, raw string, rt *runtime, o brokerOptions) (*brokerConn, error) {
	fail := brokerFail(raw)
	u, err := url.Parse(raw)
	if err != nil {
		return fail("not a URL (%v); write sqs://REGION", scrubURLError(err))
	}
	if u.User != nil || (u.Path != "" && u.Path != "/") || strings.Contains(u.Host, ":") {
		return fail("write sqs://REGION (or sqs:// with AWS_REGION set), with the region as the host and nothing else before the query")
	}
	q := u.Query()
	for k := range q {
		if !slices.Contains(sqsParams, k) {
			return fail("unknown parameter %q; SQS URLs take %s", k, strings.Join(sqsParams, ", "))
		}
	}
	cfg := sqsbroker.PublisherConfig{QueuePrefix: q.Get("queue_prefix"), QueueSuffix: q.Get("queue_suffix"),
		QueueURL: q.Get("queue_url"), DefaultGroup: q.Get("default_group"), Source: o.source, Logger: rt.log}
	if v := q.Get("max_message_bytes"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n <= 0 {
			return fail("max_message_bytes=%q: write a number of bytes, at most %d", v, sqsbroker.MaxMessageBytesLimit)
		}
		cfg.MaxMessageBytes = n
	}
	awsCfg, endpoint, err := loadAWSConfig(ctx, u.Host, q.Get("endpoint"), "SQS", "sqs:SendMessage and sqs:GetQueueUrl on the queues", rt)
	if err != nil {
		return fail("%v", err)
	}
	c := sqs.NewFromConfig(awsCfg, func(o *sqs.Options) {
		if endpoint != "" {
			o.BaseEndpoint = aws.String(endpoint)
		}
	})
	pub, err := sqsbroker.NewPublisher(c, &cfg)
	if err != nil {
		return fail("%v", err)
	}
	return &brokerConn{
		name: RedactURL(raw),
		pub:  pub,
		// No ping: every SQS call that would prove the queues reachable needs a permission beyond sending.
		close: func(context.Context) error { return pub.Close() },
	}, nil
}

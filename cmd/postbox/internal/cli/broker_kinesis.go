package cli

import (
	"context"
	"net/url"
	"slices"
	"strings"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/kinesis"

	"github.com/postbox-go/postbox/broker/kinesisbroker"
)

func init() { brokerSchemes["kinesis"] = openKinesis }

// kinesisParams are the query parameters of a kinesis:// URL.
var kinesisParams = []string{"stream_prefix", "stream", "endpoint"}

// openKinesis returns an Amazon Kinesis Data Streams publisher for
//
//	kinesis://[REGION][?stream_prefix=P&stream=NAME&endpoint=URL]
//
// Each message is a record of stream P + topic (or of stream NAME for every topic), partitioned by its key. The
// streams must exist. Region, credentials and endpoint are found as for sqs:// (AWS_ENDPOINT_URL_KINESIS for the
// endpoint).
func openKinesis(ctx context.Context, raw string, rt *runtime, o brokerOptions) (*brokerConn, error) {
	fail := brokerFail(raw)
	u, err := url.Parse(raw)
	if err != nil {
		return fail("not a URL (%v); write kinesis://REGION", scrubURLError(err))
	}
	if u.User != nil || (u.Path != "" && u.Path != "/") || strings.Contains(u.Host, ":") {
		return fail("write kinesis://REGION (or kinesis:// with AWS_REGION set), with the region as the host and nothing else before the query")
	}
	q := u.Query()
	for k := range q {
		if !slices.Contains(kinesisParams, k) {
			return fail("unknown parameter %q; Kinesis URLs take %s", k, strings.Join(kinesisParams, ", "))
		}
	}
	awsCfg, endpoint, err := loadAWSConfig(ctx, u.Host, q.Get("endpoint"), "KINESIS", "kinesis:PutRecords on the streams", rt)
	if err != nil {
		return fail("%v", err)
	}
	c := kinesis.NewFromConfig(awsCfg, func(o *kinesis.Options) {
		if endpoint != "" {
			o.BaseEndpoint = aws.String(endpoint)
		}
	})
	pub, err := kinesisbroker.NewPublisher(c, &kinesisbroker.PublisherConfig{StreamPrefix: q.Get("stream_prefix"), StreamName: q.Get("stream"),
		Source: o.source, Logger: rt.log})
	if err != nil {
		return fail("%v", err)
	}
	return &brokerConn{
		name: RedactURL(raw),
		pub:  pub,
		// No ping: every Kinesis call that would prove the streams reachable needs a permission beyond putting.
		close: func(context.Context) error { return pub.Close() },
	}, nil
}

package cli

import (
	"context"
	"net/url"
	"slices"
	"strings"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sns"

	"github.com/postbox-go/postbox/broker/snsbroker"
)

func init() { brokerSchemes["sns"] = openSNS }

// snsParams are the query parameters of an sns:// URL.
var snsParams = []string{"account", "topic_prefix", "topic_suffix", "topic_arn", "default_group", "endpoint"}

// openSNS returns an Amazon SNS publisher for
//
//	sns://[REGION]?account=ID[&topic_prefix=P&topic_suffix=.fifo&default_group=G&endpoint=URL]
//	sns://[REGION]?topic_arn=ARN[&default_group=G&endpoint=URL]
//
// Each message goes to the topic arn:aws:sns:REGION:ID:P + topic + suffix (".fifo" for FIFO topics: the key is
// the MessageGroupId, the message ID the MessageDeduplicationId), or to topic_arn for every topic. The topics
// must exist. Region, credentials and endpoint are found as for sqs:// (AWS_ENDPOINT_URL_SNS for the endpoint).
func openSNS(ctx context.Context, raw string, rt *runtime, o brokerOptions) (*brokerConn, error) {
	fail := brokerFail(raw)
	u, err := url.Parse(raw)
	if err != nil {
		return fail("not a URL (%v); write sns://REGION?account=ID", scrubURLError(err))
	}
	if u.User != nil || (u.Path != "" && u.Path != "/") || strings.Contains(u.Host, ":") {
		return fail("write sns://REGION?account=ID (or sns://?account=ID with AWS_REGION set), with the region as the host and nothing else before the query")
	}
	q := u.Query()
	for k := range q {
		if !slices.Contains(snsParams, k) {
			return fail("unknown parameter %q; SNS URLs take %s", k, strings.Join(snsParams, ", "))
		}
	}
	account, arn := q.Get("account"), q.Get("topic_arn")
	if (account == "") == (arn == "") {
		return fail("write account=ID (the AWS account of the topics, 12 digits) or topic_arn=ARN (one topic for every message), not both")
	}
	awsCfg, endpoint, err := loadAWSConfig(ctx, u.Host, q.Get("endpoint"), "SNS", "sns:Publish on the topics", rt)
	if err != nil {
		return fail("%v", err)
	}
	cfg := snsbroker.PublisherConfig{TopicARN: arn, TopicSuffix: q.Get("topic_suffix"), DefaultGroup: q.Get("default_group"),
		Source: o.source, Logger: rt.log}
	if account != "" {
		cfg.TopicARNPrefix = "arn:" + awsPartition(awsCfg.Region) + ":sns:" + awsCfg.Region + ":" + account + ":" + q.Get("topic_prefix")
	} else if q.Get("topic_prefix") != "" {
		return fail("topic_prefix goes with account=ID, not with topic_arn")
	}
	c := sns.NewFromConfig(awsCfg, func(o *sns.Options) {
		if endpoint != "" {
			o.BaseEndpoint = aws.String(endpoint)
		}
	})
	pub, err := snsbroker.NewPublisher(c, &cfg)
	if err != nil {
		return fail("%v", err)
	}
	return &brokerConn{
		name: RedactURL(raw),
		pub:  pub,
		// No ping: every SNS call that would prove the topics reachable needs a permission beyond publishing.
		close: func(context.Context) error { return pub.Close() },
	}, nil
}

// awsPartition returns the AWS partition of region, for ARNs.
func awsPartition(region string) string {
	switch {
	case strings.HasPrefix(region, "cn-"):
		return "aws-cn"
	case strings.HasPrefix(region, "us-gov-"):
		return "aws-us-gov"
	}
	return "aws"
}

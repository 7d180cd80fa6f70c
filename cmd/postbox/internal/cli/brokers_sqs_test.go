package cli

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/kinesis"
	ktypes "github.com/aws/aws-sdk-go-v2/service/kinesis/types"
	"github.com/aws/aws-sdk-go-v2/service/sns"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"github.com/postbox-go/postbox/broker/kinesisbroker"
	"github.com/postbox-go/postbox/broker/snsbroker"
	"github.com/postbox-go/postbox/broker/sqsbroker"
	"github.com/postbox-go/postbox/internal/testenv"
)

// TestRelayToSQS: sqs:// with AWS_ENDPOINT_URL_SQS set publishes to that endpoint (fauxqs, a real SQS server
// process, here), each message to queue_prefix + topic + queue_suffix, on a FIFO queue with its key as
// MessageGroupId and its ID as MessageDeduplicationId.
func TestRelayToSQS(t *testing.T) {
	srv, err := testenv.StartFauxqs()
	testenv.NeedFauxqs(t, err)
	defer srv.Stop()
	c := sqs.New(sqs.Options{Region: "us-east-1", BaseEndpoint: aws.String(srv.Endpoint),
		Credentials: aws.CredentialsProviderFunc(func(context.Context) (aws.Credentials, error) {
			return aws.Credentials{AccessKeyID: "test", SecretAccessKey: "test"}, nil
		})})
	url, err := sqsbroker.EnsureQueue(context.Background(), c, "prod-orders.fifo", nil)
	if err != nil {
		t.Fatal(err)
	}

	environ := env("AWS_ACCESS_KEY_ID", "test", "AWS_SECRET_ACCESS_KEY", "test", "AWS_ENDPOINT_URL_SQS", srv.Endpoint)
	rl := relayed(t, environ, "orders", 3, "--broker", "sqs://us-east-1?queue_prefix=prod-&queue_suffix=.fifo")
	var got []types.Message
	eventually(t, "three messages in the queue", func() bool {
		out, err := c.ReceiveMessage(context.Background(), &sqs.ReceiveMessageInput{QueueUrl: aws.String(url), MaxNumberOfMessages: 10,
			MessageAttributeNames:       []string{"All"},
			MessageSystemAttributeNames: []types.MessageSystemAttributeName{types.MessageSystemAttributeNameAll}})
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, out.Messages...)
		for _, m := range out.Messages {
			// Delete them, so that FIFO hands out the group's next message.
			if _, err := c.DeleteMessage(context.Background(), &sqs.DeleteMessageInput{QueueUrl: aws.String(url), ReceiptHandle: m.ReceiptHandle}); err != nil {
				t.Fatal(err)
			}
		}
		return len(got) >= 3
	})
	if r := rl.stop(); r.code != 0 {
		t.Fatalf("relay exit %d: %s", r.code, r.stderr)
	}
	groups := map[string]string{}
	for _, m := range got {
		id := aws.ToString(m.MessageAttributes["ce-id"].StringValue)
		if d := m.Attributes["MessageDeduplicationId"]; d != id {
			t.Errorf("message %s has MessageDeduplicationId %q; want its ID", id, d)
		}
		groups[id] = m.Attributes["MessageGroupId"]
	}
	for i, id := range rl.ids {
		if groups[id] != fmt.Sprintf("k%d", i) {
			t.Errorf("message %s has MessageGroupId %q; want k%d (got %v)", id, groups[id], i, groups)
		}
	}
}

// TestSQSURLErrors: a URL the relay cannot use says what to write or set.
func TestSQSURLErrors(t *testing.T) {
	for _, c := range []struct {
		environ func(string) string
		url     string
		want    string
	}{
		{env(), "sqs://", "no AWS region: write sqs://REGION"},
		{env(), "sqs://eu-west-1?queue=x", `unknown parameter "queue"; SQS URLs take queue_prefix`},
		{env(), "sqs://eu-west-1/orders", "write sqs://REGION"},
		{env(), "sqs://eu-west-1?max_message_bytes=big", `max_message_bytes="big": write a number of bytes`},
		{env("AWS_ACCESS_KEY_ID", "a", "AWS_SECRET_ACCESS_KEY", "b"), "sqs://eu-west-1?queue_prefix=a.b", "QueuePrefix and QueueSuffix"},
		{env("AWS_ACCESS_KEY_ID", "a", "AWS_SECRET_ACCESS_KEY", "b"), "sqs://eu-west-1?endpoint=localhost:1", "write an http:// or https:// URL"},
	} {
		t.Run(c.url, func(t *testing.T) {
			r := run(t, c.environ, "relay", "--db", "sqlite:"+t.TempDir()+"/x.db", "--broker", c.url)
			if r.code == 0 || !strings.Contains(r.stderr, c.want) {
				t.Errorf("exit %d, stderr %q; want an error containing %q", r.code, r.stderr, c.want)
			}
		})
	}
}

// TestRelayToSNS: sns:// with AWS_ENDPOINT_URL_SNS set publishes to that endpoint (fauxqs), each message to the
// topic arn:aws:sns:REGION:ACCOUNT: + topic_prefix + topic + topic_suffix; an SQS FIFO queue subscribed to the
// FIFO topic receives them with the key as MessageGroupId and the message ID as MessageDeduplicationId.
func TestRelayToSNS(t *testing.T) {
	srv, err := testenv.StartFauxqs()
	testenv.NeedFauxqs(t, err)
	defer srv.Stop()
	creds := aws.CredentialsProviderFunc(func(context.Context) (aws.Credentials, error) {
		return aws.Credentials{AccessKeyID: "test", SecretAccessKey: "test"}, nil
	})
	qc := sqs.New(sqs.Options{Region: "us-east-1", BaseEndpoint: aws.String(srv.Endpoint), Credentials: creds})
	sc := sns.New(sns.Options{Region: "us-east-1", BaseEndpoint: aws.String(srv.Endpoint), Credentials: creds})
	ctx := context.Background()
	arn, err := snsbroker.EnsureTopic(ctx, sc, "prod-orders.fifo")
	if err != nil {
		t.Fatal(err)
	}
	url, err := sqsbroker.EnsureQueue(ctx, qc, "orders-copy.fifo", nil)
	if err != nil {
		t.Fatal(err)
	}
	qa, err := qc.GetQueueAttributes(ctx, &sqs.GetQueueAttributesInput{QueueUrl: aws.String(url), AttributeNames: []types.QueueAttributeName{types.QueueAttributeNameQueueArn}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := snsbroker.SubscribeQueue(ctx, sc, arn, qa.Attributes["QueueArn"]); err != nil {
		t.Fatal(err)
	}
	account := strings.Split(arn, ":")[4]

	environ := env("AWS_ACCESS_KEY_ID", "test", "AWS_SECRET_ACCESS_KEY", "test", "AWS_ENDPOINT_URL_SNS", srv.Endpoint)
	rl := relayed(t, environ, "orders", 3, "--broker", "sns://us-east-1?account="+account+"&topic_prefix=prod-&topic_suffix=.fifo")
	var got []types.Message
	eventually(t, "three messages in the subscribed queue", func() bool {
		out, err := qc.ReceiveMessage(ctx, &sqs.ReceiveMessageInput{QueueUrl: aws.String(url), MaxNumberOfMessages: 10,
			MessageAttributeNames: []string{"All"}, MessageSystemAttributeNames: []types.MessageSystemAttributeName{types.MessageSystemAttributeNameAll}})
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, out.Messages...)
		for _, m := range out.Messages {
			if _, err := qc.DeleteMessage(ctx, &sqs.DeleteMessageInput{QueueUrl: aws.String(url), ReceiptHandle: m.ReceiptHandle}); err != nil {
				t.Fatal(err)
			}
		}
		return len(got) >= 3
	})
	if r := rl.stop(); r.code != 0 {
		t.Fatalf("relay exit %d: %s", r.code, r.stderr)
	}
	groups := map[string]string{}
	for _, m := range got {
		groups[aws.ToString(m.MessageAttributes["ce-id"].StringValue)] = m.Attributes["MessageGroupId"]
	}
	for i, id := range rl.ids {
		if groups[id] != fmt.Sprintf("k%d", i) {
			t.Errorf("message %s has MessageGroupId %q; want k%d (got %v)", id, groups[id], i, groups)
		}
	}
}

// TestSNSURLErrors: an sns:// URL the relay cannot use says what to write.
func TestSNSURLErrors(t *testing.T) {
	keys := env("AWS_ACCESS_KEY_ID", "a", "AWS_SECRET_ACCESS_KEY", "b")
	for _, c := range []struct {
		environ func(string) string
		url     string
		want    string
	}{
		{env(), "sns://?account=123456789012", "no AWS region: write sns://REGION"},
		{keys, "sns://eu-west-1", "write account=ID"},
		{keys, "sns://eu-west-1?account=1&topic_arn=arn:aws:sns:eu-west-1:1:t", "not both"},
		{keys, "sns://eu-west-1?topic=x", `unknown parameter "topic"; SNS URLs take account`},
		{keys, "sns://eu-west-1?topic_arn=arn:aws:sns:eu-west-1:1:t&topic_prefix=p", "topic_prefix goes with account=ID"},
	} {
		t.Run(c.url, func(t *testing.T) {
			r := run(t, c.environ, "relay", "--db", "sqlite:"+t.TempDir()+"/x.db", "--broker", c.url)
			if r.code == 0 || !strings.Contains(r.stderr, c.want) {
				t.Errorf("exit %d, stderr %q; want an error containing %q", r.code, r.stderr, c.want)
			}
		})
	}
}

// TestRelayToKinesis: kinesis:// with AWS_ENDPOINT_URL_KINESIS set puts each message to that endpoint
// (kinesalite, a real Kinesis server process, here) as a record of stream stream_prefix + topic, partitioned by
// its key, its data the CloudEvent with the message ID.
func TestRelayToKinesis(t *testing.T) {
	srv, err := testenv.StartKinesalite()
	testenv.NeedFauxqs(t, err)
	defer srv.Stop()
	c := kinesis.New(kinesis.Options{Region: "us-east-1", BaseEndpoint: aws.String(srv.Endpoint),
		Credentials: aws.CredentialsProviderFunc(func(context.Context) (aws.Credentials, error) {
			return aws.Credentials{AccessKeyID: "test", SecretAccessKey: "test"}, nil
		})})
	ctx := context.Background()
	if _, err := c.CreateStream(ctx, &kinesis.CreateStreamInput{StreamName: aws.String("prod-orders"), ShardCount: aws.Int32(1)}); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the stream active", func() bool {
		out, err := c.DescribeStream(ctx, &kinesis.DescribeStreamInput{StreamName: aws.String("prod-orders")})
		return err == nil && out.StreamDescription.StreamStatus == ktypes.StreamStatusActive
	})
	it, err := c.GetShardIterator(ctx, &kinesis.GetShardIteratorInput{StreamName: aws.String("prod-orders"), ShardId: aws.String("shardId-000000000000"),
		ShardIteratorType: ktypes.ShardIteratorTypeTrimHorizon})
	if err != nil {
		t.Fatal(err)
	}

	environ := env("AWS_ACCESS_KEY_ID", "test", "AWS_SECRET_ACCESS_KEY", "test", "AWS_ENDPOINT_URL_KINESIS", srv.Endpoint)
	rl := relayed(t, environ, "orders", 3, "--broker", "kinesis://us-east-1?stream_prefix=prod-")
	keys := map[string]string{}
	iter := it.ShardIterator
	eventually(t, "three records in the stream", func() bool {
		out, err := c.GetRecords(ctx, &kinesis.GetRecordsInput{ShardIterator: iter})
		if err != nil {
			t.Fatal(err)
		}
		iter = out.NextShardIterator
		for _, r := range out.Records {
			e, err := kinesisbroker.Decode(r.Data)
			if err != nil {
				t.Fatal(err)
			}
			keys[e.Message.ID] = aws.ToString(r.PartitionKey)
		}
		return len(keys) >= 3
	})
	if r := rl.stop(); r.code != 0 {
		t.Fatalf("relay exit %d: %s", r.code, r.stderr)
	}
	for i, id := range rl.ids {
		if keys[id] != fmt.Sprintf("k%d", i) {
			t.Errorf("message %s has partition key %q; want k%d (got %v)", id, keys[id], i, keys)
		}
	}
}

package cli

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"

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

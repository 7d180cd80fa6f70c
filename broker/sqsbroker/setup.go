package sqsbroker

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"strings"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
)

// EnsureQueue creates the queue name unless it exists, and returns its URL. A name ending in ".fifo" makes a FIFO
// queue (FifoQueue "true"; deduplication by the MessageDeduplicationId the publisher sets, not by content).
// attrs are further queue attributes, such as "VisibilityTimeout" or "RedrivePolicy"; SQS fails the call when an
// existing queue has different ones. Call it at deploy or start-up time; Postbox never creates queues on its
// own. It needs sqs:CreateQueue.
func EnsureQueue(ctx context.Context, c *sqs.Client, name string, attrs map[string]string) (string, error) {
	if c == nil {
		return "", errors.New("sqsbroker: EnsureQueue needs a client; make one with sqs.NewFromConfig")
	}
	if err := CheckQueueName(name); err != nil {
		return "", fmt.Errorf("sqsbroker: EnsureQueue: %w", err)
	}
	a := maps.Clone(attrs)
	if strings.HasSuffix(name, ".fifo") {
		if a == nil {
			a = map[string]string{}
		}
		a["FifoQueue"] = "true"
	}
	out, err := c.CreateQueue(ctx, &sqs.CreateQueueInput{QueueName: aws.String(name), Attributes: a})
	if err != nil {
		return "", fmt.Errorf("sqsbroker: ensure queue %s: %w", name, classify(err, "sqs:CreateQueue", name))
	}
	return aws.ToString(out.QueueUrl), nil
}

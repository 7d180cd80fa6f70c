package snsbroker

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sns"
)

// EnsureTopic creates the SNS topic name unless it exists, and returns its ARN. A name ending in ".fifo" makes a
// FIFO topic (deduplication by the MessageDeduplicationId the publisher sets). It needs sns:CreateTopic.
func EnsureTopic(ctx context.Context, c *sns.Client, name string) (string, error) {
	if c == nil {
		return "", errors.New("snsbroker: EnsureTopic needs a client; make one with sns.NewFromConfig")
	}
	var attrs map[string]string
	if strings.HasSuffix(name, ".fifo") {
		attrs = map[string]string{"FifoTopic": "true"}
	}
	out, err := c.CreateTopic(ctx, &sns.CreateTopicInput{Name: aws.String(name), Attributes: attrs})
	if err != nil {
		return "", fmt.Errorf("snsbroker: ensure topic %s: %w", name, err)
	}
	return aws.ToString(out.TopicArn), nil
}

// SubscribeQueue subscribes the SQS queue queueARN to the topic with raw message delivery, so that the queue's
// messages carry the publisher's body and message attributes as they are, for broker/sqsbroker's subscriber to
// read. The queue's access policy must let the topic send to it (sqs:SendMessage from the topic's ARN). It returns
// the subscription's ARN and needs sns:Subscribe.
func SubscribeQueue(ctx context.Context, c *sns.Client, topicARN, queueARN string) (string, error) {
	if c == nil {
		return "", errors.New("snsbroker: SubscribeQueue needs a client; make one with sns.NewFromConfig")
	}
	out, err := c.Subscribe(ctx, &sns.SubscribeInput{TopicArn: aws.String(topicARN), Protocol: aws.String("sqs"), Endpoint: aws.String(queueARN),
		Attributes: map[string]string{"RawMessageDelivery": "true"}, ReturnSubscriptionArn: true})
	if err != nil {
		return "", fmt.Errorf("snsbroker: subscribe %s to %s: %w", queueARN, topicARN, err)
	}
	return aws.ToString(out.SubscriptionArn), nil
}

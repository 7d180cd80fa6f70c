package snsbroker_test

import (
	"context"
	"strings"
	"sync"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sns"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"
	"github.com/postbox-go/postbox"
	"github.com/postbox-go/postbox/broker"
	"github.com/postbox-go/postbox/broker/brokertest"
	"github.com/postbox-go/postbox/broker/snsbroker"
	"github.com/postbox-go/postbox/broker/sqsbroker"
)

// harness makes an SNS topic per Postbox topic with an SQS queue subscribed to it (raw delivery; FIFO both with
// suffix ".fifo"), and an sqsbroker subscriber on the queue per call, all sharing one SNS publisher.
type harness struct {
	sns    *sns.Client
	sqs    *sqs.Client
	suffix string

	mu     sync.Mutex
	pub    *snsbroker.Publisher
	queues map[string]string
}

func (h *harness) new(t *testing.T, topic string) (postbox.Publisher, broker.Subscriber) {
	t.Helper()
	ctx := context.Background()
	h.mu.Lock()
	defer h.mu.Unlock()
	url, ok := h.queues[topic]
	if !ok {
		arn, err := snsbroker.EnsureTopic(ctx, h.sns, topic+h.suffix)
		if err != nil {
			t.Fatal(err)
		}
		if h.pub == nil {
			prefix := arn[:strings.LastIndex(arn, ":")+1]
			// fauxqs 1.9 reads a PublishBatch's entries in the order of their form keys as strings, so the tenth
			// (member.10) comes before the second: nine per call keeps the batch in order, as SNS does with ten.
			pub, err := snsbroker.NewPublisher(h.sns, &snsbroker.PublisherConfig{TopicARNPrefix: prefix, TopicSuffix: h.suffix,
				BatchEntries: 9, Source: "/conformance", Logger: quietLogger()})
			if err != nil {
				t.Fatal(err)
			}
			h.pub = pub
			t.Cleanup(func() { h.mu.Lock(); h.pub = nil; h.mu.Unlock() })
		}
		if url, err = sqsbroker.EnsureQueue(ctx, h.sqs, topic+h.suffix, nil); err != nil {
			t.Fatal(err)
		}
		qa, err := h.sqs.GetQueueAttributes(ctx, &sqs.GetQueueAttributesInput{QueueUrl: aws.String(url),
			AttributeNames: []types.QueueAttributeName{types.QueueAttributeNameQueueArn}})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := snsbroker.SubscribeQueue(ctx, h.sns, arn, qa.Attributes[string(types.QueueAttributeNameQueueArn)]); err != nil {
			t.Fatal(err)
		}
		h.queues[topic] = url
	}
	if h.pub == nil {
		t.Fatal("harness: no publisher")
	}
	sub, err := sqsbroker.NewSubscriber(h.sqs, &sqsbroker.SubscriberConfig{QueueURL: url, Topic: topic, WaitTime: 2e9, Logger: quietLogger()})
	if err != nil {
		t.Fatal(err)
	}
	return h.pub, sub
}

// unreachable returns a publisher whose client talks to a port where nothing listens.
func unreachable(t *testing.T) postbox.Publisher {
	c, _ := clients("http://127.0.0.1:1")
	pub, err := snsbroker.NewPublisher(c, &snsbroker.PublisherConfig{TopicARN: "arn:aws:sns:us-east-1:000000000000:none"})
	if err != nil {
		t.Fatal(err)
	}
	return pub
}

// TestConformance runs the suite with the SNS publisher and sqsbroker's subscriber on a queue subscribed to the
// topic, on standard and on FIFO topics and queues.
func TestConformance(t *testing.T) {
	sc, qc := server(t)
	f := brokertest.Features{Redelivery: true, Attempts: true, Unroutable: true, Unreachable: unreachable, ErrClosed: snsbroker.ErrClosed}
	t.Run("Standard", func(t *testing.T) {
		brokertest.Exercise(t, f, (&harness{sns: sc, sqs: qc, queues: map[string]string{}}).new)
	})
	t.Run("FIFO", func(t *testing.T) {
		f := f
		f.PerKeyOrder, f.Dedup = true, true
		brokertest.Exercise(t, f, (&harness{sns: sc, sqs: qc, suffix: ".fifo", queues: map[string]string{}}).new)
	})
}

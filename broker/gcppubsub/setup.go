package gcppubsub

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"cloud.google.com/go/pubsub/v2"
	"cloud.google.com/go/pubsub/v2/apiv1/pubsubpb"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/durationpb"
)

// Defaults for EnsureSubscription's retry policy: the backoff Pub/Sub waits before it delivers a nacked message
// again, matching broker.Consume's default nack delay.
const (
	DefaultMinimumBackoff = time.Second
	DefaultMaximumBackoff = time.Minute
)

// EnsureTopic creates the topic unless it exists, and returns it. topic is a topic ID ("orders", with any
// TopicPrefix applied) or a full name ("projects/p/topics/orders"). An existing topic is returned as it is. Call
// it at deploy or start-up time; Postbox never creates topics on its own.
func EnsureTopic(ctx context.Context, c *pubsub.Client, topic string) (*pubsubpb.Topic, error) {
	if c == nil {
		return nil, errors.New("gcppubsub: EnsureTopic needs a client; make one with pubsub.NewClient")
	}
	name, err := topicName(c.Project(), topic)
	if err != nil {
		return nil, fmt.Errorf("gcppubsub: EnsureTopic: %w", err)
	}
	t, err := c.TopicAdminClient.CreateTopic(ctx, &pubsubpb.Topic{Name: name})
	if status.Code(err) == codes.AlreadyExists {
		t, err = c.TopicAdminClient.GetTopic(ctx, &pubsubpb.GetTopicRequest{Topic: name})
	}
	if err != nil {
		return nil, fmt.Errorf("gcppubsub: ensure topic %s: %w", name, err)
	}
	return t, nil
}

// EnsureSubscription creates the subscription sub unless it exists, and returns it. sub.Name and sub.Topic may
// be IDs or full names. Message ordering is always enabled, so that messages with the same key are delivered in
// publish order. RetryPolicy, the backoff before a nacked message comes again, defaults to DefaultMinimumBackoff
// doubling up to DefaultMaximumBackoff. The other fields keep Pub/Sub's defaults: AckDeadlineSeconds 10 (the
// client extends it while a handler runs), no dead-letter policy, no exactly-once delivery.
//
// An existing subscription is returned as it is, except that EnsureSubscription fails when it was made without
// message ordering: Pub/Sub cannot turn ordering on later, so make a new subscription.
func EnsureSubscription(ctx context.Context, c *pubsub.Client, sub *pubsubpb.Subscription) (*pubsubpb.Subscription, error) {
	if c == nil {
		return nil, errors.New("gcppubsub: EnsureSubscription needs a client; make one with pubsub.NewClient")
	}
	if sub == nil || sub.Name == "" || sub.Topic == "" {
		return nil, errors.New("gcppubsub: EnsureSubscription needs a subscription with a Name and a Topic")
	}
	cfg := proto.Clone(sub).(*pubsubpb.Subscription)
	var err error
	if cfg.Name, err = subscriptionName(c.Project(), cfg.Name); err != nil {
		return nil, fmt.Errorf("gcppubsub: EnsureSubscription: %w", err)
	}
	if cfg.Topic, err = topicName(c.Project(), cfg.Topic); err != nil {
		return nil, fmt.Errorf("gcppubsub: EnsureSubscription: %w", err)
	}
	if cfg.DeadLetterPolicy != nil && cfg.DeadLetterPolicy.DeadLetterTopic != "" {
		if cfg.DeadLetterPolicy.DeadLetterTopic, err = topicName(c.Project(), cfg.DeadLetterPolicy.DeadLetterTopic); err != nil {
			return nil, fmt.Errorf("gcppubsub: EnsureSubscription: dead-letter topic: %w", err)
		}
	}
	cfg.EnableMessageOrdering = true
	if cfg.RetryPolicy == nil {
		cfg.RetryPolicy = &pubsubpb.RetryPolicy{MinimumBackoff: durationpb.New(DefaultMinimumBackoff),
			MaximumBackoff: durationpb.New(DefaultMaximumBackoff)}
	}
	got, err := c.SubscriptionAdminClient.CreateSubscription(ctx, cfg)
	if status.Code(err) == codes.AlreadyExists {
		got, err = c.SubscriptionAdminClient.GetSubscription(ctx, &pubsubpb.GetSubscriptionRequest{Subscription: cfg.Name})
		if err == nil && !got.EnableMessageOrdering {
			return nil, fmt.Errorf("gcppubsub: subscription %s exists without message ordering, which Pub/Sub cannot turn on later; make a new subscription", cfg.Name)
		}
	}
	if err != nil {
		return nil, fmt.Errorf("gcppubsub: ensure subscription %s: %w", cfg.Name, err)
	}
	return got, nil
}

// CheckTopicID returns an error unless id is a valid Pub/Sub topic or subscription ID: 3 to 255 characters,
// starting with a letter, made of letters, digits and "-_.~+%", and not starting with "goog".
func CheckTopicID(id string) error {
	switch {
	case len(id) < 3 || len(id) > 255:
		return fmt.Errorf("ID %q is %d characters; Pub/Sub allows 3 to 255", id, len(id))
	case !(id[0] >= 'a' && id[0] <= 'z' || id[0] >= 'A' && id[0] <= 'Z'):
		return fmt.Errorf("ID %q does not start with a letter, as Pub/Sub requires", id)
	case strings.HasPrefix(strings.ToLower(id), "goog"):
		return fmt.Errorf("ID %q starts with \"goog\", which Pub/Sub reserves", id)
	}
	for i := 0; i < len(id); i++ {
		c := id[i]
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || strings.IndexByte("-_.~+%", c) >= 0) {
			return fmt.Errorf("ID %q is not a Pub/Sub ID: byte %d (%q) is not a letter, digit or one of -_.~+%%", id, i, c)
		}
	}
	return nil
}

// topicName returns the full name of topic, an ID or a full name in project.
func topicName(project, topic string) (string, error) { return fullName(project, "topics", topic) }

// subscriptionName returns the full name of sub, an ID or a full name in project.
func subscriptionName(project, sub string) (string, error) {
	return fullName(project, "subscriptions", sub)
}

func fullName(project, kind, id string) (string, error) {
	if parts := strings.Split(id, "/"); len(parts) == 4 {
		if parts[0] != "projects" || parts[2] != kind {
			return "", fmt.Errorf("%q is neither an ID nor a name of the form projects/<project>/%s/<id>", id, kind)
		}
		return id, CheckTopicID(parts[3])
	}
	if err := CheckTopicID(id); err != nil {
		return "", err
	}
	return "projects/" + project + "/" + kind + "/" + id, nil
}

package natsbroker

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/postbox-go/postbox/broker"
)

// DefaultDuplicates is the dedup window EnsureStream gives a stream that does not set one; it is also the
// server's own default.
const DefaultDuplicates = 2 * time.Minute

// EnsureStream creates the stream, or updates it to cfg if it exists. Streams hold messages durably; a subject
// no stream covers cannot be published to (Publish reports "no responders" for it). Duplicates defaults to
// DefaultDuplicates. Call it at deploy or start-up time; Postbox never creates streams on its own.
func EnsureStream(ctx context.Context, js jetstream.JetStream, cfg jetstream.StreamConfig) (jetstream.Stream, error) {
	if cfg.Name == "" || len(cfg.Subjects) == 0 {
		return nil, errors.New("natsbroker: EnsureStream needs a stream Name and at least one subject, such as " +
			"TopicFilter(\"orders\", false)")
	}
	if cfg.Duplicates == 0 {
		cfg.Duplicates = DefaultDuplicates
	}
	s, err := js.CreateOrUpdateStream(ctx, cfg)
	if err != nil {
		return nil, fmt.Errorf("natsbroker: ensure stream %s: %w", cfg.Name, err)
	}
	return s, nil
}

// EnsureConsumer creates the durable pull consumer on stream, or updates it to cfg if it exists. Subscribers
// sharing one durable consumer compete for its messages. cfg.Durable is required; AckPolicy must be explicit (the
// zero value means explicit); AckWait, the time a message may stay unacked before JetStream delivers it again,
// defaults to the server's 30 seconds.
func EnsureConsumer(ctx context.Context, js jetstream.JetStream, stream string, cfg jetstream.ConsumerConfig) (jetstream.Consumer, error) {
	if cfg.Durable == "" {
		return nil, errors.New("natsbroker: EnsureConsumer needs a Durable name, so that subscribers and restarts share the consumer's position")
	}
	if cfg.AckPolicy != jetstream.AckExplicitPolicy {
		return nil, fmt.Errorf("natsbroker: consumer %s has AckPolicy %v; Postbox acks each message after its transaction commits, so it must be AckExplicitPolicy", cfg.Durable, cfg.AckPolicy)
	}
	c, err := js.CreateOrUpdateConsumer(ctx, stream, cfg)
	if err != nil {
		return nil, fmt.Errorf("natsbroker: ensure consumer %s on stream %s: %w", cfg.Durable, stream, err)
	}
	return c, nil
}

// Subject returns the subject a message with topic and key is published to: the topic, or with keyInSubject
// the topic and KeyToken(key) as one more token.
func Subject(topic, key string, keyInSubject bool) string {
	if !keyInSubject {
		return topic
	}
	return topic + "." + KeyToken(key)
}

// TopicFilter returns the subject filter matching every message of topic, for stream subjects and consumer
// filters: the topic itself, or with keyInSubject topic + ".*".
func TopicFilter(topic string, keyInSubject bool) string {
	if !keyInSubject {
		return topic
	}
	return topic + ".*"
}

// KeyToken returns key as one subject token; see broker.KeyToken.
func KeyToken(key string) string { return broker.KeyToken(key) }

// checkTopic refuses topics that are not a literal NATS subject.
func checkTopic(topic string) error {
	if topic == "" {
		return errors.New("topic is empty")
	}
	for _, tok := range strings.Split(topic, ".") {
		switch {
		case tok == "":
			return fmt.Errorf("topic %q is not a NATS subject: it has an empty token (leading, trailing or doubled '.')", topic)
		case tok == "*" || tok == ">":
			return fmt.Errorf("topic %q is not a NATS subject to publish to: it has a wildcard token", topic)
		case strings.ContainsAny(tok, " \t\r\n"):
			return fmt.Errorf("topic %q is not a NATS subject: it contains whitespace", topic)
		}
	}
	return nil
}

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
// no stream covers cannot be published to (Publish reports "no response from stream" for it, with the subject
// and the fix). A subject another stream holds is refused, naming that stream. Duplicates defaults to
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
		var jsErr jetstream.JetStreamError
		if errors.As(err, &jsErr) && jsErr.APIError() != nil && jsErr.APIError().ErrorCode == jsErrCodeStreamSubjectOverlap {
			if other, subject, found := overlapping(ctx, js, cfg); found {
				return nil, fmt.Errorf("natsbroker: ensure stream %s: %w: stream %s already holds %s; a subject belongs to one "+
					"stream only: take it out of one of them, or use stream %s", cfg.Name, err, other, subject, other)
			}
		}
		return nil, fmt.Errorf("natsbroker: ensure stream %s: %w", cfg.Name, err)
	}
	return s, nil
}

// jsErrCodeStreamSubjectOverlap is the server's error code for a stream whose subjects another stream holds.
const jsErrCodeStreamSubjectOverlap jetstream.ErrorCode = 10065

// overlapping finds a stream other than cfg's whose subjects overlap cfg's, and the subject it holds.
func overlapping(ctx context.Context, js jetstream.JetStream, cfg jetstream.StreamConfig) (name, subject string, found bool) {
	streams := js.ListStreams(ctx)
	for info := range streams.Info() { // read to the end, so that the lister's goroutine finishes
		if found || info.Config.Name == cfg.Name {
			continue
		}
		for _, theirs := range info.Config.Subjects {
			for _, ours := range cfg.Subjects {
				if !found && subjectsOverlap(theirs, ours) {
					name, subject, found = info.Config.Name, theirs, true
				}
			}
		}
	}
	return name, subject, found
}

// subjectsOverlap reports whether some subject matches both patterns (* one token, > one or more at the end).
func subjectsOverlap(a, b string) bool {
	at, bt := strings.Split(a, "."), strings.Split(b, ".")
	for i := 0; i < len(at) && i < len(bt); i++ {
		switch {
		case at[i] == ">" || bt[i] == ">":
			return true
		case at[i] == "*" || bt[i] == "*" || at[i] == bt[i]:
		default:
			return false
		}
	}
	return len(at) == len(bt)
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

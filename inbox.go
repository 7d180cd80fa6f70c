package postbox

import (
	"context"
	"fmt"
	"log/slog"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/postbox-go/postbox/driver"
)

// Limits on inbox keys, checked before anything is written.
const (
	// MaxConsumerLen is the longest consumer name.
	MaxConsumerLen = 255
	// MaxMessageIDLen is the longest delivered message ID the inbox accepts.
	MaxMessageIDLen = 255
)

// Defaults for ConsumerConfig's caps on delivered messages: the limits Enqueue applies, so that every message a
// Postbox producer sends passes.
const (
	DefaultConsumerMaxKeyBytes     = MaxKeyLen
	DefaultConsumerMaxPayloadBytes = DefaultMaxPayloadBytes
	DefaultConsumerMaxHeaders      = MaxHeaders
)

// ConsumerConfig configures a Consumer. The zero value is valid: every field has a default, and the default
// failure policy is the simplest one (a failed delivery is rolled back and redelivered).
type ConsumerConfig struct {
	// MaxFailures turns on the failure policy. After this many failed deliveries of one message, the message is
	// recorded as failed, Process reports it as Failed with a nil error so that the caller acks it, and it never
	// reaches the handler again. A handler error marked with Permanent records the message as failed at once.
	// Failed deliveries are counted in a short transaction of their own, after the delivery's transaction has
	// rolled back, so the count survives the rollback. Default: 0, off: every failure rolls back and is
	// returned, and the broker redelivers the message until its own limits stop it; a Permanent error makes the
	// outcome Rejected.
	MaxFailures int
	// DeadLetterTopic, when set with MaxFailures, makes a message recorded as failed also enqueue a copy of itself
	// to this topic, in the transaction that records it, so that the relay publishes it for an operator or
	// another service to handle. The copy has a new ID and the original's key, type, payload and headers, plus
	// the headers postbox-consumer, postbox-message-id, postbox-failures and postbox-error. A payload over the
	// client's MaxPayloadBytes is left out and its size put in postbox-payload-omitted, and original headers that
	// Enqueue would refuse are dropped, so that recording the failure cannot fail on them. Default: none.
	DeadLetterTopic string
	// MaxKeyBytes is the longest key a delivered message may have. A longer one is Rejected before anything is
	// written or the handler runs. Default: DefaultConsumerMaxKeyBytes (1 KiB).
	MaxKeyBytes int
	// MaxPayloadBytes is the largest payload a delivered message may have; a larger one is Rejected. Default:
	// DefaultConsumerMaxPayloadBytes (1 MiB).
	MaxPayloadBytes int
	// MaxHeaders is the most headers a delivered message may have; one with more is Rejected. Default:
	// DefaultConsumerMaxHeaders (64).
	MaxHeaders int
	// ScopeBySource keys the inbox by the message's source as well as its ID, so that a producer that reuses
	// another producer's message ID (by mistake or on purpose) cannot make the consumer skip that producer's
	// message as a duplicate. The source is the delivery's CloudEvents source (broker.Delivery.Source), given to
	// ProcessFrom; broker.Consume passes it. A delivery without a source is Rejected, and Process and Claim,
	// which take none, return an error. Turning it on or off changes the keys, so messages delivered across the
	// change can be processed twice. Default: false, the key is (consumer, message ID).
	ScopeBySource bool
	// Logger receives the consumer's logs. Default: the client's logger.
	Logger *slog.Logger
}

// WithDefaults returns a copy of c with every zero field set to its default. A nil c gives the defaults; the
// Logger stays nil, for NewConsumer to take the client's.
func (c *ConsumerConfig) WithDefaults() ConsumerConfig {
	var out ConsumerConfig
	if c != nil {
		out = *c
	}
	if out.MaxKeyBytes == 0 {
		out.MaxKeyBytes = DefaultConsumerMaxKeyBytes
	}
	if out.MaxPayloadBytes == 0 {
		out.MaxPayloadBytes = DefaultConsumerMaxPayloadBytes
	}
	if out.MaxHeaders == 0 {
		out.MaxHeaders = DefaultConsumerMaxHeaders
	}
	return out
}

func (c ConsumerConfig) validate() error {
	for _, f := range []struct {
		name string
		v    int
	}{{"MaxFailures", c.MaxFailures}, {"MaxKeyBytes", c.MaxKeyBytes}, {"MaxPayloadBytes", c.MaxPayloadBytes}, {"MaxHeaders", c.MaxHeaders}} {
		if f.v < 0 {
			return fmt.Errorf("%w: ConsumerConfig.%s is %d; use a positive number, or 0 for the default", ErrInvalidConfig, f.name, f.v)
		}
	}
	if c.DeadLetterTopic != "" {
		if c.MaxFailures == 0 {
			return fmt.Errorf("%w: ConsumerConfig.DeadLetterTopic is set but MaxFailures is 0, so no message is ever dead-lettered; set MaxFailures", ErrInvalidConfig)
		}
		if checkText("DeadLetterTopic", c.DeadLetterTopic, true, MaxTopicLen) != nil {
			return fmt.Errorf("%w: ConsumerConfig.DeadLetterTopic %q is not a valid topic; use at most %d bytes of UTF-8 text without control characters",
				ErrInvalidConfig, c.DeadLetterTopic, MaxTopicLen)
		}
	}
	return nil
}

// Consumer processes delivered messages exactly once per consumer name: it claims each message in the inbox
// inside the transaction that runs the handler, so that the claim, the handler's writes and the messages the
// handler emits commit together or not at all. A Consumer is safe for concurrent use.
//
// Claims are kept for the inbox retention (CleanupConfig.InboxRetention of a Cleaner). A message redelivered after its claim was
// cleaned up is processed again, so the retention must exceed the broker's redelivery horizon.
//
// # Trust
//
// The inbox trusts whoever may produce to the consumer's topics. It deduplicates by message ID, so a producer
// that sends a message with the ID of another producer's message makes the consumer skip the second one as a
// duplicate, whichever it is. When producers do not trust each other, give each one topics only it may write
// (the broker's access control), or set ConsumerConfig.ScopeBySource so that the key includes the CloudEvents
// source, and make the broker authenticate the source. Delivered messages are checked before anything is
// written: an ID that is empty, over MaxMessageIDLen bytes, not UTF-8 or with a control character, and a key,
// payload or header count over the consumer's caps, make the delivery Rejected, never redelivered forever.
type Consumer[TTx any] struct {
	client *Client[TTx]
	name   string
	cfg    ConsumerConfig
	log    *slog.Logger
}

// NewConsumer returns the consumer called name on client's inbox. The name scopes deduplication: two consumers
// with different names each process every message once. cfg may be nil for the defaults. It does no I/O.
func NewConsumer[TTx any](client *Client[TTx], name string, cfg *ConsumerConfig) (*Consumer[TTx], error) {
	if client == nil {
		return nil, fmt.Errorf("%w: NewConsumer needs a client from NewClient", ErrInvalidConfig)
	}
	if err := checkConsumerName(name); err != nil {
		return nil, err
	}
	c := cfg.WithDefaults()
	if err := c.validate(); err != nil {
		return nil, err
	}
	log := c.Logger
	if log == nil {
		log = client.cfg.Logger
	}
	return &Consumer[TTx]{client: client, name: name, cfg: c,
		log: log.With("component", "postbox.consumer", "consumer", name, "table", client.cfg.InboxTable)}, nil
}

// Name returns the consumer's name.
func (c *Consumer[TTx]) Name() string { return c.name }

// Claim records inside tx that the consumer has taken the message with the given ID, and reports whether it is
// the first to: false means a duplicate, already processed or being processed by a transaction that has since
// committed. A duplicate is not an error and leaves tx usable. When another transaction holds an uncommitted
// claim of the same message, Claim waits for it to end. Process calls Claim's equivalent; call it yourself only
// when you manage the transaction, and then commit the claim with the handler's writes. A consumer with
// ConsumerConfig.ScopeBySource refuses it, as it has no source: use ProcessFrom.
func (c *Consumer[TTx]) Claim(ctx context.Context, tx TTx, messageID string) (bool, error) {
	key, err := c.inboxKey("", messageID)
	if err != nil {
		return false, err
	}
	return c.claim(ctx, tx, key)
}

func (c *Consumer[TTx]) claim(ctx context.Context, tx TTx, key string) (bool, error) {
	ok, err := c.client.store.InboxClaim(ctx, tx, c.name, key, c.client.cfg.Clock.Now())
	if err != nil {
		return false, fmt.Errorf("postbox: inbox claim of message %s for %s: %w", key, c.name, err)
	}
	return ok, nil
}

// inboxKey validates a delivered message's ID and returns the key the inbox stores it under: the ID, or with
// ScopeBySource the source, a space and the ID. A CloudEvents source is a URI reference, which has no space, so
// two different (source, ID) pairs never make the same key.
func (c *Consumer[TTx]) inboxKey(source, id string) (string, error) {
	if err := checkMessageID(id); err != nil {
		return "", err
	}
	if !c.cfg.ScopeBySource {
		return id, nil
	}
	switch {
	case source == "":
		return "", invalid("message %s has no source, and consumer %s scopes its inbox by source (ConsumerConfig.ScopeBySource); "+
			"deliver it with its CloudEvents source through ProcessFrom or broker.Consume", id, c.name)
	case strings.ContainsFunc(source, unicode.IsSpace):
		return "", invalid("message %s has the source %q, which contains a space; a CloudEvents source is a URI reference", id, source)
	}
	key := source + " " + id
	if err := checkText("source and message ID", key, true, MaxMessageIDLen); err != nil {
		return "", err
	}
	return key, nil
}

// checkDelivery validates a delivered message against the consumer's caps and returns its inbox key. An error
// means no delivery of the message can ever succeed.
func (c *Consumer[TTx]) checkDelivery(source string, m Message) (string, error) {
	key, err := c.inboxKey(source, m.ID)
	switch {
	case err != nil:
		return "", err
	case len(m.Key) > c.cfg.MaxKeyBytes:
		return "", invalid("message %s has a key of %d bytes; consumer %s accepts at most %d (ConsumerConfig.MaxKeyBytes)", m.ID, len(m.Key), c.name, c.cfg.MaxKeyBytes)
	case len(m.Payload) > c.cfg.MaxPayloadBytes:
		return "", invalid("message %s has a payload of %d bytes; consumer %s accepts at most %d (ConsumerConfig.MaxPayloadBytes)", m.ID, len(m.Payload), c.name, c.cfg.MaxPayloadBytes)
	case len(m.Headers) > c.cfg.MaxHeaders:
		return "", invalid("message %s has %d headers; consumer %s accepts at most %d (ConsumerConfig.MaxHeaders)", m.ID, len(m.Headers), c.name, c.cfg.MaxHeaders)
	}
	return key, nil
}

// recordFailure counts a failed delivery of m, stored under key, in a transaction of its own and, when that
// records m as failed, enqueues the dead letter in the same transaction and returns it.
func (c *Consumer[TTx]) recordFailure(ctx context.Context, key string, m Message, cause error) (driver.InboxFailResult, []Message, error) {
	var (
		res  driver.InboxFailResult
		dead []Message
	)
	err := c.client.InTx(ctx, func(ctx context.Context, tx TTx) error {
		var err error
		res, err = c.client.store.InboxFail(ctx, tx, driver.InboxFailure{
			Consumer: c.name, MessageID: key, LastError: truncate(cause.Error(), MaxLastErrorLen),
			Now: c.client.cfg.Clock.Now(), MaxFailures: c.cfg.MaxFailures, Give: IsPermanent(cause),
		})
		if err != nil || !res.Failed || c.cfg.DeadLetterTopic == "" {
			return err
		}
		dead = []Message{c.deadLetter(m, res.Failures, cause)}
		if err := c.client.EnqueueBatch(ctx, tx, dead); err != nil {
			return fmt.Errorf("enqueue dead letter: %w", err)
		}
		return nil
	})
	if err != nil {
		return res, nil, fmt.Errorf("postbox: count failed delivery of message %s for %s: %w", m.ID, c.name, err)
	}
	return res, dead, nil
}

// deadLetter builds the copy of m to enqueue to the dead-letter topic. It keeps only what Enqueue accepts, so
// that a delivered message that would not pass as an outgoing one can still be dead-lettered.
func (c *Consumer[TTx]) deadLetter(m Message, failures int, cause error) Message {
	dl := Message{ID: NewID(), Topic: c.cfg.DeadLetterTopic, Key: m.Key, Type: m.Type, Headers: map[string]string{}}
	if checkText("Key", dl.Key, false, MaxKeyLen) != nil {
		dl.Key = ""
	}
	if checkText("Type", dl.Type, true, MaxTypeLen) != nil {
		dl.Type = "postbox.inbox.failed"
	}
	if len(m.Payload) <= c.client.cfg.MaxPayloadBytes {
		dl.Payload = m.Payload
	} else {
		dl.Headers["postbox-payload-omitted"] = strconv.Itoa(len(m.Payload))
	}
	ours := map[string]string{
		"postbox-consumer":   c.name,
		"postbox-message-id": m.ID,
		"postbox-failures":   strconv.Itoa(failures),
		"postbox-error":      headerValue(cause.Error()),
	}
	for k, v := range m.Headers {
		if len(dl.Headers)+len(ours) >= MaxHeaders {
			break
		}
		lower := strings.ToLower(k)
		if validHeaderName(k) && !strings.HasPrefix(lower, "ce-") && !strings.HasPrefix(lower, "ce_") &&
			checkText("header", v, false, MaxHeaderLen) == nil {
			dl.Headers[k] = v
		}
	}
	for k, v := range ours {
		dl.Headers[k] = v
	}
	return dl
}

// headerValue makes s a valid header value: control characters become spaces and it is cut to MaxHeaderLen.
func headerValue(s string) string {
	s = strings.Map(func(r rune) rune {
		if isControl(r) {
			return ' '
		}
		return r
	}, strings.ToValidUTF8(s, "?"))
	return truncate(s, MaxHeaderLen)
}

func checkConsumerName(name string) error {
	switch {
	case name == "":
		return fmt.Errorf("%w: the consumer name is empty; name the service or handler, such as \"billing\"", ErrInvalidConfig)
	case len(name) > MaxConsumerLen:
		return fmt.Errorf("%w: the consumer name is %d bytes; the limit is %d", ErrInvalidConfig, len(name), MaxConsumerLen)
	case !utf8.ValidString(name) || strings.ContainsFunc(name, isControl):
		return fmt.Errorf("%w: the consumer name %q must be UTF-8 text without control characters", ErrInvalidConfig, name)
	}
	return nil
}

// checkMessageID validates the ID of a delivered message. Unlike Enqueue it accepts any text: messages may come
// from producers other than Postbox.
func checkMessageID(id string) error {
	if id == "" {
		return invalid("message ID is empty; the inbox deduplicates by the broker's message ID (the CloudEvents id), so pass it in Message.ID")
	}
	return checkText("message ID", id, true, MaxMessageIDLen)
}

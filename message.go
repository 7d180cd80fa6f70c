package postbox

import (
	"context"
	"fmt"
	"maps"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/postbox-go/postbox/driver"
)

// Message is an event to enqueue, and the event a consumer receives.
type Message struct {
	// ID is the message's stable identity (a UUID in canonical text form). Enqueue fills it with a UUIDv7 when
	// empty and reports it. It is the broker-side dedup key and the consumer's inbox key.
	ID string
	// Topic names the destination (a subject, topic, exchange routing key or URL path, depending on the broker).
	Topic string
	// Key is optional. Brokers map it to their partition or ordering concept; in ordered mode (Config.Ordered),
	// messages with the same key are published one at a time in enqueue order.
	Key string
	// Type names the event, such as "order.created". It becomes the CloudEvents type.
	Type string
	// Payload is the body, published as is.
	Payload []byte
	// Headers are carried to the broker as message headers.
	Headers map[string]string
	// AvailableAt delays delivery until the given time. The zero value means at once.
	AvailableAt time.Time
}

// Record is a stored message with its delivery bookkeeping: what a Publisher receives and ListDead returns.
type Record struct {
	Message
	// Status is the record's state.
	Status Status
	// Attempts counts the failed publishes so far.
	Attempts int
	// LastError is the last failed publish's error, truncated to MaxLastErrorLen bytes; empty when none failed.
	LastError string
	// CreatedAt is when the message was enqueued, on the client's clock.
	CreatedAt time.Time
	// PublishedAt is when the broker acknowledged the record; zero unless Status is StatusPublished.
	PublishedAt time.Time
}

// Status is the state of a stored record: pending, published (RelayConfig.KeepPublished only) or dead.
type Status string

// Record states.
const (
	// StatusPending: waiting to be published, or to be retried after a failure.
	StatusPending Status = "pending"
	// StatusPublished: acknowledged by the broker and kept (RelayConfig.KeepPublished) until cleanup.
	StatusPublished Status = "published"
	// StatusDead: parked after MaxAttempts failures or a permanent error, until an operator retries or purges it.
	StatusDead Status = "dead"
)

// fromRows returns the records of the store's rows, in order.
func fromRows(rows []driver.Record) []Record {
	if rows == nil {
		return nil
	}
	recs := make([]Record, len(rows))
	for i := range rows {
		r := &rows[i]
		recs[i] = Record{Message: Message(r.Message), Status: Status(r.Status), Attempts: r.Attempts,
			LastError: r.LastError, CreatedAt: r.CreatedAt, PublishedAt: r.PublishedAt}
	}
	return recs
}

// Limits on message fields, checked by Enqueue before anything is written.
const (
	MaxTopicLen      = driver.MaxTopicLen
	MaxTypeLen       = driver.MaxTypeLen
	MaxKeyLen        = driver.MaxKeyLen
	MaxHeaders       = driver.MaxHeaders
	MaxHeaderNameLen = driver.MaxHeaderNameLen
	MaxHeaderLen     = driver.MaxHeaderLen
)

// invalid returns an error wrapping ErrInvalidMessage.
func invalid(format string, args ...any) error {
	return fmt.Errorf("%w: %s", ErrInvalidMessage, fmt.Sprintf(format, args...))
}

// checkText validates a required or optional text field.
func checkText(field, s string, required bool, max int) error {
	switch {
	case s == "" && required:
		return invalid("%s is empty; every message needs one", field)
	case len(s) > max:
		return invalid("%s is %d bytes; the limit is %d", field, len(s), max)
	case !utf8.ValidString(s):
		return invalid("%s %q is not valid UTF-8", field, s)
	case strings.ContainsFunc(s, isControl):
		return invalid("%s %q contains a control character or a bidirectional override", field, s)
	}
	return nil
}

// isControl reports the characters a terminal or a text viewer may act on instead of showing: C0 and C1 controls,
// DEL, and the bidirectional embeddings, overrides and isolates that make text read differently from its bytes.
func isControl(r rune) bool { return driver.IsControl(r) }

// validHeaderName: an HTTP token without the characters brokers disagree on, so the header survives every wire.
func validHeaderName(s string) bool {
	if s == "" || len(s) > MaxHeaderNameLen {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '-' || c == '_' || c == '.') {
			return false
		}
	}
	return true
}

// Validate reports, with an error wrapping ErrInvalidMessage, why Enqueue would refuse m's ID (when set), topic,
// type, key or headers: the limits above, valid UTF-8 without control characters or bidirectional overrides, and
// header names that every broker carries. It does not check the payload's size, which is the client's
// Config.MaxPayloadBytes, nor the event registry. Readers of messages that did not come through Enqueue, such as
// the WAL relay's decoder, use it to refuse what no client could have written.
func (m Message) Validate() error {
	if m.ID != "" {
		if _, err := parseUUID(m.ID); err != nil {
			return invalid("ID %v; leave it empty to get a UUIDv7", err)
		}
	}
	if err := checkText("Topic", m.Topic, true, MaxTopicLen); err != nil {
		return err
	}
	if err := checkText("Type", m.Type, true, MaxTypeLen); err != nil {
		return err
	}
	if err := checkText("Key", m.Key, false, MaxKeyLen); err != nil {
		return err
	}
	if len(m.Headers) > MaxHeaders {
		return invalid("message %s has %d headers; the limit is %d", m.ID, len(m.Headers), MaxHeaders)
	}
	for k, v := range m.Headers {
		if !validHeaderName(k) {
			return invalid("header name %q is not allowed; use 1 to %d letters, digits, '-', '_' or '.'", k, MaxHeaderNameLen)
		}
		if strings.HasPrefix(strings.ToLower(k), "ce-") || strings.HasPrefix(strings.ToLower(k), "ce_") {
			return invalid("header %q uses the CloudEvents prefix, which Postbox sets from the message fields", k)
		}
		if err := checkText("header "+k, v, false, MaxHeaderLen); err != nil {
			return err
		}
	}
	return nil
}

// prepare runs the enqueue hook, validates m and returns the row to insert. It never writes.
func (c *Client[TTx]) prepare(ctx context.Context, m Message) (driver.Record, error) {
	if c.cfg.OnEnqueue != nil {
		m.Headers = maps.Clone(m.Headers)
		if m.Headers == nil {
			m.Headers = map[string]string{}
		}
		c.cfg.OnEnqueue(ctx, &m)
		if len(m.Headers) == 0 {
			m.Headers = nil
		}
	}
	if m.ID == "" {
		m.ID = NewID()
	} else {
		id, err := parseUUID(m.ID)
		if err != nil {
			return driver.Record{}, invalid("ID %v; leave it empty to get a UUIDv7", err)
		}
		m.ID = id
	}
	if err := m.Validate(); err != nil {
		return driver.Record{}, err
	}
	if len(m.Payload) > c.cfg.MaxPayloadBytes {
		return driver.Record{}, invalid("payload of message %s is %d bytes; the limit is %d (Config.MaxPayloadBytes)",
			m.ID, len(m.Payload), c.cfg.MaxPayloadBytes)
	}
	if c.cfg.Registry != nil {
		if err := c.cfg.Registry.Check(m); err != nil {
			return driver.Record{}, fmt.Errorf("message %s: %w", m.ID, err)
		}
	}
	now := c.cfg.Clock.Now().UTC()
	if m.AvailableAt.IsZero() {
		m.AvailableAt = now
	}
	return driver.Record{Message: driver.Message(m), Status: driver.StatusPending, CreatedAt: now}, nil
}

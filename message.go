package postbox

import (
	"context"
	"fmt"
	"maps"
	"strings"
	"unicode/utf8"

	"github.com/postbox-go/postbox/driver"
)

// Message is an event to enqueue: ID, Topic, Key, Type, Payload, Headers and AvailableAt. See driver.Message for
// the fields.
type Message = driver.Message

// Record is a stored message with its attempts, last error, status and times.
type Record = driver.Record

// Status is the state of a stored record: pending, published (retention mode only) or dead.
type Status = driver.Status

// Record states.
const (
	StatusPending   = driver.StatusPending
	StatusPublished = driver.StatusPublished
	StatusDead      = driver.StatusDead
)

// Limits on message fields, checked by Enqueue before anything is written.
const (
	MaxTopicLen      = 255
	MaxTypeLen       = 255
	MaxKeyLen        = 1024
	MaxHeaders       = 64
	MaxHeaderNameLen = 128
	MaxHeaderLen     = 4096
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
func isControl(r rune) bool {
	return r < 0x20 || r >= 0x7f && r <= 0x9f || r >= 0x202a && r <= 0x202e || r >= 0x2066 && r <= 0x2069
}

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

// prepare runs the enqueue hook, validates m and returns the record to insert. It never writes.
func (c *Client[TTx]) prepare(ctx context.Context, m Message) (Record, error) {
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
			return Record{}, invalid("ID %v; leave it empty to get a UUIDv7", err)
		}
		m.ID = id
	}
	if err := checkText("Topic", m.Topic, true, MaxTopicLen); err != nil {
		return Record{}, err
	}
	if err := checkText("Type", m.Type, true, MaxTypeLen); err != nil {
		return Record{}, err
	}
	if err := checkText("Key", m.Key, false, MaxKeyLen); err != nil {
		return Record{}, err
	}
	if len(m.Payload) > c.cfg.MaxPayloadBytes {
		return Record{}, invalid("payload of message %s is %d bytes; the limit is %d (Config.MaxPayloadBytes)",
			m.ID, len(m.Payload), c.cfg.MaxPayloadBytes)
	}
	if len(m.Headers) > MaxHeaders {
		return Record{}, invalid("message %s has %d headers; the limit is %d", m.ID, len(m.Headers), MaxHeaders)
	}
	for k, v := range m.Headers {
		if !validHeaderName(k) {
			return Record{}, invalid("header name %q is not allowed; use 1 to %d letters, digits, '-', '_' or '.'", k, MaxHeaderNameLen)
		}
		if strings.HasPrefix(strings.ToLower(k), "ce-") || strings.HasPrefix(strings.ToLower(k), "ce_") {
			return Record{}, invalid("header %q uses the CloudEvents prefix, which Postbox sets from the message fields", k)
		}
		if err := checkText("header "+k, v, false, MaxHeaderLen); err != nil {
			return Record{}, err
		}
	}
	if c.cfg.Registry != nil {
		if err := c.cfg.Registry.Check(m); err != nil {
			return Record{}, fmt.Errorf("message %s: %w", m.ID, err)
		}
	}
	now := c.cfg.Clock.Now().UTC()
	if m.AvailableAt.IsZero() {
		m.AvailableAt = now
	}
	return Record{Message: m, Status: StatusPending, CreatedAt: now}, nil
}

package broker

import (
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/postbox-go/postbox"
)

// Header-name prefixes of the CloudEvents protocol bindings, for CloudEvents.Prefix.
const (
	PrefixHTTP  = "ce-"          // HTTP binding; also used on NATS (the NATS binding follows HTTP)
	PrefixNATS  = "ce-"          // NATS binding
	PrefixKafka = "ce_"          // Kafka binding
	PrefixAMQP  = "cloudEvents_" // AMQP binding (JMS-safe form; "cloudEvents:" is the older form)
	PrefixMQTT  = ""             // MQTT 5 binding: attributes are user properties without a prefix
)

// SpecVersion is the CloudEvents version Postbox writes and accepts.
const SpecVersion = "1.0"

// DefaultSource is the ce-source attribute when CloudEvents.Source is empty.
const DefaultSource = "postbox"

// CloudEvents attribute names Postbox reads and writes (without the prefix).
const (
	AttrSpecVersion  = "specversion"
	AttrID           = "id"
	AttrSource       = "source"
	AttrType         = "type"
	AttrTime         = "time"
	AttrSubject      = "subject"
	AttrPartitionKey = "partitionkey" // the CloudEvents partitioning extension
)

// reserved are the attribute names a user header may not take when the prefix is empty.
var reserved = []string{AttrSpecVersion, AttrID, AttrSource, AttrType, AttrTime, AttrSubject, AttrPartitionKey,
	"datacontenttype", "dataschema", "data", "data_base64"}

// ErrNotCloudEvent is wrapped by Decode's errors: the headers do not carry a CloudEvent Postbox can read.
var ErrNotCloudEvent = errors.New("broker: not a CloudEvents 1.0 message")

// CloudEvents maps records to CloudEvents 1.0 binary content mode and back: the payload is the body, the message
// fields are attributes in headers, and user headers travel as they are.
//
//	<prefix>specversion   "1.0"
//	<prefix>id            Message.ID
//	<prefix>source        Source
//	<prefix>type          Message.Type
//	<prefix>time          Record.CreatedAt, RFC 3339 with nanoseconds, UTC (omitted when zero)
//	<prefix>subject       Message.Key (omitted when empty)
//	<prefix>partitionkey  Message.Key (omitted when empty)
//	any other header      Message.Headers, names and values unchanged
//
// A user header named content-type is the event's data content type: it needs no mapping because the HTTP,
// Kafka and NATS bindings carry datacontenttype in that very header. traceparent and tracestate pass through
// the same way. The topic is not an attribute: it is the broker destination, and adapters set Message.Topic
// from it.
//
// The zero value uses no prefix (the MQTT binding) and source "postbox".
type CloudEvents struct {
	// Prefix goes before each attribute name: one of the Prefix constants, or your own. Decode matches it
	// without regard to case, as HTTP header names are case-insensitive.
	Prefix string
	// Source is the ce-source attribute, naming the producing service (a URI reference such as
	// "/billing" or "urn:acme:billing"). Default: DefaultSource.
	Source string
	// PercentEncode escapes attribute values as the HTTP binding requires (space, '"', '%' and bytes outside
	// printable ASCII become %XX), so keys and types in any script survive HTTP headers. Decode then
	// unescapes. Set it for HTTP only.
	PercentEncode bool
}

// Encode returns the headers carrying r in binary content mode, and the body (r.Payload). It fails when r has no
// ID or Type, or when a user header would be read back as an attribute (a name starting with the prefix or,
// with no prefix, a CloudEvents attribute name).
func (c CloudEvents) Encode(r postbox.Record) (headers map[string]string, body []byte, err error) {
	if r.ID == "" {
		return nil, nil, errors.New("broker: message has no ID; records from the outbox always have one")
	}
	if r.Type == "" {
		return nil, nil, fmt.Errorf("broker: message %s has no Type; CloudEvents requires one", r.ID)
	}
	h := make(map[string]string, 7+len(r.Headers))
	for name, v := range r.Headers {
		if c.isAttr(name) {
			return nil, nil, fmt.Errorf("broker: header %q of message %s would be read back as a CloudEvents attribute; rename it", name, r.ID)
		}
		h[name] = v
	}
	source := c.Source
	if source == "" {
		source = DefaultSource
	}
	c.put(h, AttrSpecVersion, SpecVersion)
	c.put(h, AttrID, r.ID)
	c.put(h, AttrSource, source)
	c.put(h, AttrType, r.Type)
	if !r.CreatedAt.IsZero() {
		c.put(h, AttrTime, r.CreatedAt.UTC().Format(time.RFC3339Nano))
	}
	if r.Key != "" {
		c.put(h, AttrSubject, r.Key)
		c.put(h, AttrPartitionKey, r.Key)
	}
	return h, r.Payload, nil
}

func (c CloudEvents) put(h map[string]string, attr, v string) {
	if c.PercentEncode {
		v = percentEncode(v)
	}
	h[c.Prefix+attr] = v
}

// isAttr reports whether a header name would be decoded as an attribute.
func (c CloudEvents) isAttr(name string) bool {
	if c.Prefix != "" {
		return len(name) >= len(c.Prefix) && strings.EqualFold(name[:len(c.Prefix)], c.Prefix)
	}
	for _, a := range reserved {
		if strings.EqualFold(name, a) {
			return true
		}
	}
	return false
}

// Event is a message decoded from CloudEvents headers.
type Event struct {
	// Message has the ID, Type, Key, Payload and Headers. Its Topic is set by the adapter from the broker
	// destination; its AvailableAt is zero.
	Message postbox.Message
	// Time is when the message was enqueued (ce-time), or zero when the producer did not say.
	Time time.Time
	// Source is the ce-source attribute: which service produced the event.
	Source string
}

// Decode reads a message from binary-mode headers and body, the inverse of Encode. It requires specversion 1.0,
// an id and a type, and returns an error wrapping ErrNotCloudEvent otherwise. Attributes Postbox does not map
// (dataschema, extensions of other producers) stay in Message.Headers under their full header names. body is
// not copied.
func (c CloudEvents) Decode(headers map[string]string, body []byte) (Event, error) {
	var e Event
	attrs := make(map[string]string, 7)
	for name, v := range headers {
		if !c.isAttr(name) {
			if e.Message.Headers == nil {
				e.Message.Headers = make(map[string]string, len(headers))
			}
			e.Message.Headers[name] = v
			continue
		}
		attr := strings.ToLower(name[len(c.Prefix):])
		switch attr {
		case AttrSpecVersion, AttrID, AttrSource, AttrType, AttrTime, AttrSubject, AttrPartitionKey:
		default:
			if e.Message.Headers == nil {
				e.Message.Headers = make(map[string]string, len(headers))
			}
			e.Message.Headers[name] = v
			continue
		}
		if _, dup := attrs[attr]; dup {
			return Event{}, fmt.Errorf("%w: attribute %s appears twice (header names differing only in case)", ErrNotCloudEvent, attr)
		}
		if c.PercentEncode {
			dv, err := percentDecode(v)
			if err != nil {
				return Event{}, fmt.Errorf("%w: header %s: %v", ErrNotCloudEvent, name, err)
			}
			v = dv
		}
		attrs[attr] = v
	}
	switch sv, ok := attrs[AttrSpecVersion]; {
	case !ok:
		return Event{}, fmt.Errorf("%w: no %s%s header", ErrNotCloudEvent, c.Prefix, AttrSpecVersion)
	case sv != SpecVersion:
		return Event{}, fmt.Errorf("%w: %s%s is %q; only %q is supported", ErrNotCloudEvent, c.Prefix, AttrSpecVersion, sv, SpecVersion)
	}
	e.Message.ID = attrs[AttrID]
	if e.Message.ID == "" {
		return Event{}, fmt.Errorf("%w: no %s%s header", ErrNotCloudEvent, c.Prefix, AttrID)
	}
	e.Message.Type = attrs[AttrType]
	if e.Message.Type == "" {
		return Event{}, fmt.Errorf("%w: message %s has no %s%s header", ErrNotCloudEvent, e.Message.ID, c.Prefix, AttrType)
	}
	e.Source = attrs[AttrSource]
	if k, ok := attrs[AttrPartitionKey]; ok {
		e.Message.Key = k
	} else {
		e.Message.Key = attrs[AttrSubject]
	}
	if ts, ok := attrs[AttrTime]; ok {
		t, err := time.Parse(time.RFC3339Nano, ts)
		if err != nil {
			return Event{}, fmt.Errorf("%w: message %s: %s%s %q is not an RFC 3339 time", ErrNotCloudEvent, e.Message.ID, c.Prefix, AttrTime, ts)
		}
		e.Time = t.UTC()
	}
	e.Message.Payload = body
	return e, nil
}

// percentEncode escapes what the CloudEvents HTTP binding requires: space, '"', '%' and every byte outside
// printable ASCII.
func percentEncode(s string) string {
	n := 0
	for i := 0; i < len(s); i++ {
		if mustEscape(s[i]) {
			n++
		}
	}
	if n == 0 {
		return s
	}
	const hex = "0123456789ABCDEF"
	b := make([]byte, 0, len(s)+2*n)
	for i := 0; i < len(s); i++ {
		if c := s[i]; mustEscape(c) {
			b = append(b, '%', hex[c>>4], hex[c&15])
		} else {
			b = append(b, c)
		}
	}
	return string(b)
}

func mustEscape(c byte) bool { return c <= ' ' || c >= 0x7f || c == '"' || c == '%' }

func percentDecode(s string) (string, error) {
	if !strings.Contains(s, "%") {
		return s, nil
	}
	b := make([]byte, 0, len(s))
	for i := 0; i < len(s); i++ {
		if s[i] != '%' {
			b = append(b, s[i])
			continue
		}
		if i+2 >= len(s) {
			return "", fmt.Errorf("truncated escape at byte %d", i)
		}
		hi, ok1 := unhex(s[i+1])
		lo, ok2 := unhex(s[i+2])
		if !ok1 || !ok2 {
			return "", fmt.Errorf("bad escape %q at byte %d", s[i:i+3], i)
		}
		b = append(b, hi<<4|lo)
		i += 2
	}
	return string(b), nil
}

func unhex(c byte) (byte, bool) {
	switch {
	case c >= '0' && c <= '9':
		return c - '0', true
	case c >= 'a' && c <= 'f':
		return c - 'a' + 10, true
	case c >= 'A' && c <= 'F':
		return c - 'A' + 10, true
	}
	return 0, false
}

package sqsbroker

import (
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"unicode/utf8"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"
	"github.com/postbox-go/postbox"
	"github.com/postbox-go/postbox/broker"
)

// Prefix is the message-attribute name prefix of the CloudEvents attributes (the HTTP binding's).
const Prefix = broker.PrefixHTTP

// Limits SQS puts on a message.
const (
	// MaxAttributes is how many message attributes SQS allows on a message.
	MaxAttributes = 10
	// MaxBatchEntries is how many messages one SendMessageBatch call takes.
	MaxBatchEntries = 10
	// DefaultMaxMessageBytes is PublisherConfig.MaxMessageBytes's default: 256 KiB, the size limit of a message
	// (body and attributes) and of a whole SendMessageBatch call that every queue accepts.
	DefaultMaxMessageBytes = 256 * 1024
	// MaxMessageBytesLimit is the largest MaxMessageBytes: 1 MiB, SQS's ceiling for a queue's
	// MaximumMessageSize.
	MaxMessageBytesLimit = 1024 * 1024
	// MaxGroupIDLen is the longest MessageGroupId and MessageDeduplicationId.
	MaxGroupIDLen = 128
)

// Attribute names of the adapter's own, beside the CloudEvents ones.
const (
	// AttrHeaders holds, as a JSON object, the headers that did not fit in MaxAttributes or whose name or value
	// SQS does not allow as a message attribute.
	AttrHeaders = "postbox-headers"
	// AttrBody says how the body carries the payload when it is not the payload itself: "base64" (a payload that
	// is not text SQS accepts) or "empty" (an empty payload; SQS refuses an empty body).
	AttrBody = "postbox-body"
)

// DefaultGroup is the MessageGroupId of a message without a key on a FIFO queue: such messages are all in one
// group, delivered in publish order with each other.
const DefaultGroup = "postbox"

// attribute order: the ones that always come individually first, then the well-known headers, then the rest by
// name. Attributes past MaxAttributes-1 go into AttrHeaders.
var firstAttrs = []string{Prefix + broker.AttrSpecVersion, Prefix + broker.AttrID, Prefix + broker.AttrSource,
	Prefix + broker.AttrType, Prefix + broker.AttrTime, Prefix + broker.AttrPartitionKey}

var wellKnown = []string{"content-type", "traceparent", "tracestate"}

// wireMessage is a record as SQS carries it.
type wireMessage struct {
	body  string
	attrs map[string]types.MessageAttributeValue
	size  int // what SQS counts against its size limit
}

// encode maps rec to an SQS body and message attributes. The CloudEvents attributes and the headers are message
// attributes of type String, in that order of preference: when they are more than MaxAttributes, or a header's
// name or value is not one SQS allows, the rest travel as one JSON object in AttrHeaders. ce-subject, which
// repeats ce-partitionkey, is left out. The body is the payload when it is non-empty text SQS accepts, and its
// base64 otherwise (AttrBody says so).
func encode(ce broker.CloudEvents, rec postbox.Record) (wireMessage, error) {
	h, payload, err := ce.Encode(rec)
	if err != nil {
		return wireMessage{}, err
	}
	delete(h, Prefix+broker.AttrSubject)
	for name := range h {
		if name == AttrHeaders || name == AttrBody {
			return wireMessage{}, fmt.Errorf("sqsbroker: message %s: header %q is a name the adapter uses itself; rename it", rec.ID, name)
		}
	}
	m := wireMessage{attrs: make(map[string]types.MessageAttributeValue, MaxAttributes)}
	switch {
	case len(payload) == 0:
		m.body = " "
		m.put(AttrBody, "empty")
	case validText(string(payload)):
		m.body = string(payload)
	default:
		m.body = base64.StdEncoding.EncodeToString(payload)
		m.put(AttrBody, "base64")
	}
	m.size = len(m.body)

	names := make([]string, 0, len(h))
	for _, n := range firstAttrs {
		if _, ok := h[n]; ok {
			names = append(names, n)
		}
	}
	for _, n := range wellKnown {
		if _, ok := h[n]; ok {
			names = append(names, n)
		}
	}
	var rest []string
	for n := range h {
		if !slices.Contains(firstAttrs, n) && !slices.Contains(wellKnown, n) {
			rest = append(rest, n)
		}
	}
	slices.Sort(rest)
	names = append(names, rest...)

	packed := map[string]string{}
	var fit []string
	for _, n := range names {
		if v := h[n]; v != "" && validAttrName(n) && validText(v) {
			fit = append(fit, n)
		} else {
			packed[n] = v
		}
	}
	slots := MaxAttributes - len(m.attrs)
	if len(packed) > 0 || len(fit) > slots {
		slots-- // one for AttrHeaders
	}
	for i, n := range fit {
		if i < slots {
			m.put(n, h[n])
		} else {
			packed[n] = h[n]
		}
	}
	if len(packed) > 0 {
		b, err := json.Marshal(packed)
		if err != nil {
			return wireMessage{}, fmt.Errorf("sqsbroker: message %s: headers: %v", rec.ID, err)
		}
		m.put(AttrHeaders, string(b))
	}
	for n, v := range m.attrs {
		m.size += len(n) + len(*v.DataType) + len(*v.StringValue)
	}
	return m, nil
}

func (m *wireMessage) put(name, v string) {
	m.attrs[name] = types.MessageAttributeValue{DataType: aws.String("String"), StringValue: aws.String(v)}
}

// decode is encode's inverse.
func decode(ce broker.CloudEvents, body *string, attrs map[string]types.MessageAttributeValue) (broker.Event, error) {
	h := make(map[string]string, len(attrs))
	var how string
	for n, v := range attrs {
		if v.StringValue == nil {
			continue // a binary or number attribute of another producer
		}
		switch n {
		case AttrBody:
			how = *v.StringValue
		case AttrHeaders:
			var packed map[string]string
			if err := json.Unmarshal([]byte(*v.StringValue), &packed); err != nil {
				return broker.Event{}, fmt.Errorf("%w: attribute %s is not a JSON object of strings: %v", broker.ErrNotCloudEvent, AttrHeaders, err)
			}
			for k, pv := range packed {
				h[k] = pv
			}
		default:
			h[n] = *v.StringValue
		}
	}
	var payload []byte
	b := aws.ToString(body)
	switch how {
	case "":
		payload = []byte(b)
	case "empty":
	case "base64":
		p, err := base64.StdEncoding.DecodeString(b)
		if err != nil {
			return broker.Event{}, fmt.Errorf("%w: %s says base64 but the body is not: %v", broker.ErrNotCloudEvent, AttrBody, err)
		}
		payload = p
	default:
		return broker.Event{}, fmt.Errorf("%w: %s is %q; want base64 or empty", broker.ErrNotCloudEvent, AttrBody, how)
	}
	return ce.Decode(h, payload)
}

// validText reports whether s holds only the characters SQS allows in a body and in attribute values: #x9, #xA,
// #xD, #x20 to #xD7FF, #xE000 to #xFFFD and #x10000 to #x10FFFF.
func validText(s string) bool {
	if !utf8.ValidString(s) {
		return false
	}
	for _, r := range s {
		switch {
		case r == 0x9 || r == 0xA || r == 0xD:
		case r >= 0x20 && r <= 0xD7FF:
		case r >= 0xE000 && r <= 0xFFFD:
		case r >= 0x10000 && r <= 0x10FFFF:
		default:
			return false
		}
	}
	return true
}

// validAttrName reports whether SQS takes n as a message-attribute name: up to 256 letters, digits, '-', '_'
// and '.', not starting or ending with '.', without "..", and not starting with "AWS." or "Amazon.".
func validAttrName(n string) bool {
	if n == "" || len(n) > 256 || n[0] == '.' || n[len(n)-1] == '.' || strings.Contains(n, "..") {
		return false
	}
	l := strings.ToLower(n)
	if strings.HasPrefix(l, "aws.") || strings.HasPrefix(l, "amazon.") {
		return false
	}
	for i := 0; i < len(n); i++ {
		c := n[i]
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '-' || c == '_' || c == '.') {
			return false
		}
	}
	return true
}

// groupID returns the MessageGroupId of key: key itself when SQS allows it (1 to 128 letters, digits and ASCII
// punctuation), DefaultGroup (or def) when key is empty, and otherwise "sha256-" and the key's SHA-256 in hex,
// so that every key keeps a group of its own.
func groupID(key, def string) string {
	if key == "" {
		return def
	}
	if validGroupID(key) {
		return key
	}
	sum := sha256.Sum256([]byte(key))
	return "sha256-" + hex.EncodeToString(sum[:])
}

// validGroupID reports whether s is a valid MessageGroupId or MessageDeduplicationId.
func validGroupID(s string) bool {
	if s == "" || len(s) > MaxGroupIDLen {
		return false
	}
	for i := 0; i < len(s); i++ {
		if c := s[i]; c < '!' || c > '~' {
			return false
		}
	}
	return true
}

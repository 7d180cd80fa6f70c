// Package awswire maps Postbox records to the bodies and String message attributes that Amazon SQS and SNS carry,
// and back: the wire format broker/sqsbroker and broker/snsbroker share, so that a message published to an SNS
// topic and delivered raw to an SQS queue is read by sqsbroker's subscriber. It uses no AWS SDK type.
package awswire

import (
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"unicode/utf8"

	"github.com/postbox-go/postbox"
	"github.com/postbox-go/postbox/broker"
)

// Prefix is the message-attribute name prefix of the CloudEvents attributes (the HTTP binding's).
const Prefix = broker.PrefixHTTP

// MaxAttributes is how many message attributes SQS allows on a message (and SNS delivers raw to SQS).
const MaxAttributes = 10

// MaxGroupIDLen is the longest MessageGroupId and MessageDeduplicationId.
const MaxGroupIDLen = 128

// Attribute names of the adapters' own, beside the CloudEvents ones.
const (
	// AttrHeaders holds, as a JSON object, the headers that did not fit in MaxAttributes or whose name or value
	// SQS does not allow as a message attribute.
	AttrHeaders = "postbox-headers"
	// AttrBody says how the body carries the payload when it is not the payload itself: "base64" (a payload that
	// is not text SQS accepts) or "empty" (an empty payload; SQS refuses an empty body).
	AttrBody = "postbox-body"
)

// stringType is the DataType of every attribute, counted in the message size.
const stringType = "String"

// the attributes that come first, then the well-known headers, then the rest by name.
var firstAttrs = []string{Prefix + broker.AttrSpecVersion, Prefix + broker.AttrID, Prefix + broker.AttrSource,
	Prefix + broker.AttrType, Prefix + broker.AttrTime, Prefix + broker.AttrPartitionKey}

var wellKnown = []string{"content-type", "traceparent", "tracestate"}

// Message is a record as SQS and SNS carry it.
type Message struct {
	Body  string
	Attrs map[string]string // String message attributes
	Size  int               // what SQS and SNS count against their size limit: body, names, types and values
}

// Encode maps rec to a body and message attributes. The CloudEvents attributes and the headers are String
// message attributes, in that order of preference: when they are more than MaxAttributes, or a header's name or
// value is not one SQS allows as a message attribute, the first ones that fit stay separate and the rest travel
// as one JSON object in AttrHeaders. ce-subject, which repeats ce-partitionkey, is left out. The body is the
// payload when it is non-empty text SQS accepts, and its base64 otherwise (AttrBody says so). A header name or
// value, or a key, that is not UTF-8 is refused: SQS and SNS carry text only.
func Encode(ce broker.CloudEvents, rec postbox.Record) (Message, error) {
	h, payload, err := ce.Encode(rec)
	if err != nil {
		return Message{}, err
	}
	delete(h, Prefix+broker.AttrSubject)
	for name, v := range h {
		if name == AttrHeaders || name == AttrBody {
			return Message{}, fmt.Errorf("message %s: header %q is a name the adapter uses itself; rename it", rec.ID, name)
		}
		if !utf8.ValidString(name) || !utf8.ValidString(v) {
			return Message{}, fmt.Errorf("message %s: header or attribute %q holds bytes that are not UTF-8; SQS and SNS carry text only", rec.ID, name)
		}
	}
	m := Message{Attrs: make(map[string]string, MaxAttributes)}
	switch {
	case len(payload) == 0:
		m.Body = " "
		m.Attrs[AttrBody] = "empty"
	case ValidText(string(payload)):
		m.Body = string(payload)
	default:
		m.Body = base64.StdEncoding.EncodeToString(payload)
		m.Attrs[AttrBody] = "base64"
	}

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
		if v := h[n]; v != "" && validAttrName(n) && ValidText(v) {
			fit = append(fit, n)
		} else {
			packed[n] = v
		}
	}
	slots := MaxAttributes - len(m.Attrs)
	if len(packed) > 0 || len(fit) > slots {
		slots-- // one for AttrHeaders
	}
	for i, n := range fit {
		if i < slots {
			m.Attrs[n] = h[n]
		} else {
			packed[n] = h[n]
		}
	}
	if len(packed) > 0 {
		b, err := json.Marshal(packed)
		if err != nil {
			return Message{}, fmt.Errorf("message %s: headers: %v", rec.ID, err)
		}
		m.Attrs[AttrHeaders] = string(b)
	}
	m.Size = len(m.Body)
	for n, v := range m.Attrs {
		m.Size += len(n) + len(stringType) + len(v)
	}
	return m, nil
}

// Decode is Encode's inverse: attrs are the message's String attributes.
func Decode(ce broker.CloudEvents, body string, attrs map[string]string) (broker.Event, error) {
	h := make(map[string]string, len(attrs))
	var how string
	for n, v := range attrs {
		switch n {
		case AttrBody:
			how = v
		case AttrHeaders:
			var packed map[string]string
			if err := json.Unmarshal([]byte(v), &packed); err != nil {
				return broker.Event{}, fmt.Errorf("%w: attribute %s is not a JSON object of strings: %v", broker.ErrNotCloudEvent, AttrHeaders, err)
			}
			for k, pv := range packed {
				h[k] = pv
			}
		default:
			h[n] = v
		}
	}
	var payload []byte
	switch how {
	case "":
		payload = []byte(body)
	case "empty":
	case "base64":
		p, err := base64.StdEncoding.DecodeString(body)
		if err != nil {
			return broker.Event{}, fmt.Errorf("%w: %s says base64 but the body is not: %v", broker.ErrNotCloudEvent, AttrBody, err)
		}
		payload = p
	default:
		return broker.Event{}, fmt.Errorf("%w: %s is %q; want base64 or empty", broker.ErrNotCloudEvent, AttrBody, how)
	}
	return ce.Decode(h, payload)
}

// ValidText reports whether s holds only the characters SQS allows in a body and in attribute values: #x9, #xA,
// #xD, #x20 to #xD7FF, #xE000 to #xFFFD and #x10000 to #x10FFFF.
func ValidText(s string) bool {
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

// GroupID returns the MessageGroupId of key: key itself when SQS allows it (1 to 128 letters, digits and ASCII
// punctuation), def when key is empty, and otherwise "sha256-" and the key's SHA-256 in hex, so that every key
// keeps a group of its own.
func GroupID(key, def string) string {
	if key == "" {
		return def
	}
	if ValidGroupID(key) {
		return key
	}
	sum := sha256.Sum256([]byte(key))
	return "sha256-" + hex.EncodeToString(sum[:])
}

// ValidGroupID reports whether s is a valid MessageGroupId or MessageDeduplicationId.
func ValidGroupID(s string) bool {
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

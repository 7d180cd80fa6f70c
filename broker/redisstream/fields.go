package redisstream

import (
	"errors"
	"fmt"
	"sort"

	"github.com/postbox-go/postbox"
	"github.com/postbox-go/postbox/broker"
)

// Prefix goes before the CloudEvents attribute names in stream entry fields (ce_id, ce_type…). Redis has no
// CloudEvents binding of its own; this is the Kafka binding's prefix, whose headers are, like entry fields,
// free-form names with binary values.
const Prefix = broker.PrefixKafka

// DataField is the entry field that holds the payload. It starts with Prefix, so no user header can take it.
const DataField = Prefix + "data"

// fields returns the entry fields of rec: the CloudEvents attributes, the user headers and the payload, in an
// order that does not change between publishes (attributes and headers sorted by name, the payload last), so
// that XRANGE output is easy to read.
func fields(ce broker.CloudEvents, rec postbox.Record) ([]any, error) {
	h, body, err := ce.Encode(rec)
	if err != nil {
		return nil, err
	}
	names := make([]string, 0, len(h))
	for name := range h {
		names = append(names, name)
	}
	sort.Strings(names)
	out := make([]any, 0, 2*len(h)+2)
	for _, name := range names {
		out = append(out, name, h[name])
	}
	if body == nil {
		body = []byte{}
	}
	return append(out, DataField, body), nil
}

// errTrimmed marks an entry that was deleted from the stream (trimmed by MAXLEN or MINID, or removed with
// XDEL) while it was pending: Redis still lists its ID but has no fields for it.
var errTrimmed = errors.New("the entry was deleted from the stream before it was acknowledged")

// decode reads a stream entry back into an event; the inverse of fields.
func decode(ce broker.CloudEvents, values map[string]any) (broker.Event, error) {
	if len(values) == 0 {
		return broker.Event{}, errTrimmed
	}
	h := make(map[string]string, len(values))
	var body []byte
	for name, v := range values {
		s, ok := v.(string)
		if !ok {
			return broker.Event{}, fmt.Errorf("%w: field %s is a %T, not a string", broker.ErrNotCloudEvent, name, v)
		}
		if name == DataField {
			body = []byte(s)
			continue
		}
		h[name] = s
	}
	e, err := ce.Decode(h, body)
	if err != nil {
		return broker.Event{}, err
	}
	if len(e.Message.Payload) == 0 {
		e.Message.Payload = nil // an empty payload is published as an empty field
	}
	return e, nil
}

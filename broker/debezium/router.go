package debezium

import (
	"errors"
	"fmt"
	"regexp"
	"strings"
	"time"
)

// Row is one outbox row as the connector reads it: column name to value. Values are nil (NULL), string,
// []byte, bool, int, int32, int64, float64 or time.Time (the timestamp column only).
type Row map[string]any

// Header is one record header. A nil Value is a header with a null value.
type Header struct {
	Key   string
	Value []byte
}

// Message is the record the router emits for a row.
type Message struct {
	// Topic is route.topic.replacement applied to the route-by column.
	Topic string
	// Key is the key column through the key converter. A NULL column is the 4 bytes null with JsonConverter
	// (so such records share one key) and nil, a record without key, with the others.
	Key []byte
	// Value is the payload, or the envelope with the additional fields placed in it, through the value
	// converter; nil for a tombstone. A NULL payload without the tombstone option is null with JsonConverter.
	Value []byte
	// Headers are "id" first, then the columns placed as headers, in the placement's order.
	Headers []Header
	// Partition is the column placed with the partition placement; nil when none is.
	Partition *int32
	// Timestamp is the timestamp column, truncated to milliseconds; zero when none is configured or it is NULL,
	// for the producer to stamp at publish time (the router uses its processing time).
	Timestamp time.Time
}

// Router turns rows into the router's records. It is safe for concurrent use.
type Router struct {
	o        Options
	re       *regexp.Regexp
	envelope bool // some column is placed in the envelope
}

// New validates o (after WithDefaults) and returns its router.
func New(o Options) (*Router, error) {
	o = o.WithDefaults()
	re, err := regexp.Compile(`^(?:` + o.RouteTopicRegex + `)$`)
	if err != nil {
		return nil, fmt.Errorf("debezium: route.topic.regex %q is not a regular expression Go accepts (Java's lookaround and possessive quantifiers are not supported): %v",
			o.RouteTopicRegex, err)
	}
	if _, err := expandJava(o.RouteTopicReplacement, re, nil, ""); err != nil {
		return nil, fmt.Errorf("debezium: route.topic.replacement %q: %v", o.RouteTopicReplacement, err)
	}
	for _, c := range []struct {
		name string
		c    Converter
	}{{"key.converter", o.KeyConverter}, {"value.converter", o.ValueConverter}} {
		switch c.c {
		case ConverterJSON, ConverterString, ConverterBinary:
		default:
			return nil, fmt.Errorf("debezium: %s %q: want %q, %q or %q", c.name, c.c, ConverterJSON, ConverterString, ConverterBinary)
		}
	}
	r := &Router{o: o, re: re}
	inEnvelope := map[string]bool{"payload": true}
	for _, a := range o.Additional {
		if a.Field == "" {
			return nil, errors.New("debezium: table.fields.additional.placement: an entry has no column name")
		}
		switch a.Placement {
		case PlacementEnvelope:
			r.envelope = true
			alias := a.Alias
			if alias == "" {
				alias = a.Field
			}
			if inEnvelope[alias] {
				return nil, fmt.Errorf("debezium: table.fields.additional.placement puts two fields named %q in the envelope (the payload is one); give one an alias (column:envelope:alias), as the router refuses duplicate field names too",
					alias)
			}
			inEnvelope[alias] = true
		case PlacementHeader, PlacementPartition:
		default:
			return nil, fmt.Errorf("debezium: table.fields.additional.placement %s:%s: the placement must be header, envelope or partition",
				a.Field, a.Placement)
		}
	}
	if (r.envelope || o.ExpandJSONPayload) && o.ValueConverter != ConverterJSON {
		return nil, fmt.Errorf("debezium: an envelope placement or table.expand.json.payload makes the value a structure, which only value.converter %q writes as Debezium's consumers read it (StringConverter would write Java's Struct text)",
			ConverterJSON)
	}
	return r, nil
}

// Options returns the router's options, with the defaults filled in.
func (r *Router) Options() Options { return r.o }

// Route returns the record the router emits for row. It fails, as the router does, when a configured column is
// missing from the row or a value cannot be written by its converter.
func (r *Router) Route(row Row) (Message, error) {
	o := r.o
	var m Message

	route, ok := row[o.RouteByField]
	if !ok {
		return m, fmt.Errorf("debezium: the row has no route.by.field column %q", o.RouteByField)
	}
	routeValue, ok := route.(string)
	if !ok {
		return m, fmt.Errorf("debezium: route.by.field column %q is %T; the router routes by a text column", o.RouteByField, route)
	}
	m.Topic = routeValue
	if sm := r.re.FindStringSubmatchIndex(routeValue); sm != nil {
		topic, err := expandJava(o.RouteTopicReplacement, r.re, sm, routeValue)
		if err != nil {
			return m, fmt.Errorf("debezium: route.topic.replacement: %v", err)
		}
		m.Topic = topic
	}

	id, ok := row[o.FieldEventID]
	if !ok {
		return m, fmt.Errorf("debezium: the row has no table.field.event.id column %q", o.FieldEventID)
	}
	h, err := headerValue(id)
	if err != nil {
		return m, fmt.Errorf("debezium: table.field.event.id column %q: %v", o.FieldEventID, err)
	}
	m.Headers = append(m.Headers, Header{Key: "id", Value: h})

	key, ok := row[o.FieldEventKey]
	if !ok {
		return m, fmt.Errorf("debezium: the row has no table.field.event.key column %q", o.FieldEventKey)
	}
	if m.Key, err = convert(o.KeyConverter, key); err != nil {
		return m, fmt.Errorf("debezium: table.field.event.key column %q: %v", o.FieldEventKey, err)
	}

	if o.FieldEventTimestamp != "" {
		ts, ok := row[o.FieldEventTimestamp]
		if !ok {
			return m, fmt.Errorf("debezium: the row has no table.field.event.timestamp column %q", o.FieldEventTimestamp)
		}
		switch t := ts.(type) {
		case nil: // the router falls back to its processing time
		case time.Time:
			m.Timestamp = time.UnixMilli(t.UnixMilli())
		default:
			return m, fmt.Errorf("debezium: table.field.event.timestamp column %q is %T; want a timestamp", o.FieldEventTimestamp, ts)
		}
	}

	payload, ok := row[o.FieldEventPayload]
	if !ok {
		return m, fmt.Errorf("debezium: the row has no table.field.event.payload column %q", o.FieldEventPayload)
	}
	var body jsonValue = scalar{payload}
	if s, isString := payload.(string); isString && o.ExpandJSONPayload {
		if v, ok := expandJSON(s); ok {
			body = v
		}
	}

	var env []field
	if r.envelope {
		env = append(env, field{"payload", body})
	}
	for _, a := range o.Additional {
		v, ok := row[a.Field]
		if !ok {
			if o.AdditionalMissingIgnore {
				continue
			}
			return m, fmt.Errorf("debezium: the row has no column %q, which table.fields.additional.placement places in the %s (set table.field.additional.missing=ignore to leave it out)",
				a.Field, a.Placement)
		}
		alias := a.Alias
		if alias == "" {
			alias = a.Field
		}
		switch a.Placement {
		case PlacementHeader:
			h, err := headerValue(v)
			if err != nil {
				return m, fmt.Errorf("debezium: header %q from column %q: %v", alias, a.Field, err)
			}
			m.Headers = append(m.Headers, Header{Key: alias, Value: h})
		case PlacementEnvelope:
			if _, isTime := v.(time.Time); isTime {
				return m, fmt.Errorf("debezium: envelope field %q from column %q: a timestamp's encoding depends on the connector's time.precision.mode; give the row its integer or text form", alias, a.Field)
			}
			env = append(env, field{alias, scalar{v}})
		case PlacementPartition:
			p, err := partitionOf(v)
			if err != nil {
				return m, fmt.Errorf("debezium: partition from column %q: %v", a.Field, err)
			}
			m.Partition = &p
		}
	}

	if o.TombstoneOnEmptyPayload && blank(payload) {
		return m, nil // a tombstone: key and headers, no value
	}
	switch {
	case r.envelope:
		m.Value = appendJSON(nil, object(env))
	case body != nil:
		if sc, isScalar := body.(scalar); isScalar {
			m.Value, err = convert(o.ValueConverter, sc.v)
			if err != nil {
				return m, fmt.Errorf("debezium: table.field.event.payload column %q: %v", o.FieldEventPayload, err)
			}
		} else {
			m.Value = appendJSON(nil, body)
		}
	}
	return m, nil
}

// blank reports whether the router sees payload as empty: NULL, or text that is empty once trimmed.
func blank(payload any) bool {
	switch p := payload.(type) {
	case nil:
		return true
	case string:
		return strings.TrimSpace(p) == ""
	}
	return false
}

func partitionOf(v any) (int32, error) {
	switch p := v.(type) {
	case int32:
		return p, nil
	case int:
		if int(int32(p)) == p {
			return int32(p), nil
		}
	case int64:
		if int64(int32(p)) == p {
			return int32(p), nil
		}
	}
	return 0, fmt.Errorf("%v (%T) is not a 32-bit integer; the router reads the partition with getInt32", v, v)
}

// convert writes v as the converter c writes a value of its type. A NULL column has an optional schema, which
// JsonConverter writes as the JSON null; StringConverter and the binary converters write no bytes at all.
func convert(c Converter, v any) ([]byte, error) {
	if v == nil {
		if c == ConverterJSON {
			return []byte("null"), nil
		}
		return nil, nil
	}
	switch c {
	case ConverterString:
		switch x := v.(type) {
		case []byte:
			return nil, errors.New("StringConverter writes a bytes value as Java's array text; use the binary converter")
		case time.Time:
			return nil, errors.New("a timestamp's text depends on the connector's time.precision.mode; give the row its integer or text form")
		default:
			return []byte(text(x)), nil
		}
	case ConverterBinary:
		if b, ok := v.([]byte); ok {
			return b, nil
		}
		return nil, fmt.Errorf("the binary converter writes bytes columns only, and this one is %T", v)
	}
	if _, isTime := v.(time.Time); isTime {
		return nil, errors.New("a timestamp's JSON depends on the connector's time.precision.mode; give the row its integer or text form")
	}
	return appendJSON(nil, scalar{v}), nil
}

// headerValue writes v as Kafka Connect's SimpleHeaderConverter does.
func headerValue(v any) ([]byte, error) {
	switch x := v.(type) {
	case nil:
		return nil, nil
	case []byte:
		return nil, errors.New("a bytes column as a header is written as Kafka's Values text, which is not reproduced; give the row its text form")
	case time.Time:
		return nil, errors.New("a timestamp's header text depends on the connector's time.precision.mode; give the row its integer or text form")
	default:
		return []byte(text(x)), nil
	}
}

// text is Java's String.valueOf for the scalar types a Row holds.
func text(v any) string {
	switch x := v.(type) {
	case string:
		return x
	case bool:
		if x {
			return "true"
		}
		return "false"
	case int:
		return fmt.Sprint(x)
	case int32:
		return fmt.Sprint(x)
	case int64:
		return fmt.Sprint(x)
	case float64:
		return javaDouble(x)
	}
	return fmt.Sprint(v)
}

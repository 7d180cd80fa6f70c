package debezium

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
)

// The router's defaults, as Debezium documents them.
const (
	DefaultRouteByField          = "aggregatetype"
	DefaultRouteTopicRegex       = "(?<routedByValue>.*)"
	DefaultRouteTopicReplacement = "outbox.event.${routedByValue}"
	DefaultFieldEventID          = "id"
	DefaultFieldEventKey         = "aggregateid"
	DefaultFieldEventPayload     = "payload"
)

// Converter names the Kafka Connect converter whose bytes a Message reproduces.
type Converter string

// The converters this package reproduces.
const (
	// ConverterJSON is org.apache.kafka.connect.json.JsonConverter with schemas.enable=false.
	ConverterJSON Converter = "json"
	// ConverterString is org.apache.kafka.connect.storage.StringConverter.
	ConverterString Converter = "string"
	// ConverterBinary is io.debezium.converters.BinaryDataConverter or
	// org.apache.kafka.connect.converters.ByteArrayConverter: a bytes column as it is.
	ConverterBinary Converter = "binary"
)

// Placement is where table.fields.additional.placement puts a column.
type Placement string

// The placements the router knows.
const (
	PlacementHeader    Placement = "header"
	PlacementEnvelope  Placement = "envelope"
	PlacementPartition Placement = "partition"
)

// Additional is one entry of table.fields.additional.placement: column:placement[:alias].
type Additional struct {
	// Field is the column.
	Field string
	// Placement is header, envelope or partition.
	Placement Placement
	// Alias is the header name or envelope field; the column's name when empty. Ignored for partition.
	Alias string
}

// Options are the router's settings. The zero value is the router's defaults with JsonConverter (schemas
// disabled) for key and value.
type Options struct {
	// RouteByField is route.by.field: the column whose value ${routedByValue} stands for. Default:
	// DefaultRouteByField ("aggregatetype").
	RouteByField string
	// RouteTopicRegex is route.topic.regex, matched against the whole route value. Go's regexp syntax, which
	// accepts Java's (?<name>...) groups; Java-only constructs (lookaround, possessive quantifiers) are refused.
	// Default: DefaultRouteTopicRegex. A value the regex does not match is used as the topic unchanged, as
	// Kafka's RegexRouter does.
	RouteTopicRegex string
	// RouteTopicReplacement is route.topic.replacement, in Java's replacement syntax ($1, ${name}, \$ for a
	// dollar). Default: DefaultRouteTopicReplacement ("outbox.event.${routedByValue}").
	RouteTopicReplacement string
	// TombstoneOnEmptyPayload is route.tombstone.on.empty.payload: a NULL or blank payload gives a record with
	// a null value (a tombstone). Default: false.
	TombstoneOnEmptyPayload bool
	// FieldEventID is table.field.event.id, the column sent in the "id" header. Default: "id".
	FieldEventID string
	// FieldEventKey is table.field.event.key, the column that becomes the record key. Default: "aggregateid".
	FieldEventKey string
	// FieldEventPayload is table.field.event.payload. Default: "payload".
	FieldEventPayload string
	// FieldEventTimestamp is table.field.event.timestamp, a time.Time column that becomes the record
	// timestamp, in milliseconds. Default: none, the time of publishing.
	FieldEventTimestamp string
	// Additional is table.fields.additional.placement, in its order. Parse the router's own text with
	// ParseAdditional.
	Additional []Additional
	// AdditionalMissingIgnore is table.field.additional.missing=ignore: an additional column the row lacks is
	// left out. Default: false ("error"), the row fails.
	AdditionalMissingIgnore bool
	// ExpandJSONPayload is table.expand.json.payload: a payload string holding a JSON object is written as
	// JSON rather than as a string. Needs ValueConverter ConverterJSON. Default: false.
	ExpandJSONPayload bool
	// KeyConverter is key.converter. Default: ConverterJSON.
	KeyConverter Converter
	// ValueConverter is value.converter. Default: ConverterJSON.
	ValueConverter Converter
}

// WithDefaults returns a copy of o with every zero field set to its default.
func (o Options) WithDefaults() Options {
	def := func(s *string, v string) {
		if *s == "" {
			*s = v
		}
	}
	def(&o.RouteByField, DefaultRouteByField)
	def(&o.RouteTopicRegex, DefaultRouteTopicRegex)
	def(&o.RouteTopicReplacement, DefaultRouteTopicReplacement)
	def(&o.FieldEventID, DefaultFieldEventID)
	def(&o.FieldEventKey, DefaultFieldEventKey)
	def(&o.FieldEventPayload, DefaultFieldEventPayload)
	if o.KeyConverter == "" {
		o.KeyConverter = ConverterJSON
	}
	if o.ValueConverter == "" {
		o.ValueConverter = ConverterJSON
	}
	o.Additional = append([]Additional(nil), o.Additional...)
	return o
}

// ParseAdditional parses table.fields.additional.placement: comma-separated column:placement[:alias]
// entries, each part trimmed, as the router reads them ("type:header:eventType,aggregateid:envelope").
func ParseAdditional(s string) ([]Additional, error) {
	if strings.TrimSpace(s) == "" {
		return nil, errors.New("table.fields.additional.placement is empty; leave it out, or list column:placement[:alias] entries")
	}
	var out []Additional
	for _, entry := range strings.Split(s, ",") {
		parts := strings.Split(entry, ":")
		if len(parts) < 2 || len(parts) > 3 {
			return nil, fmt.Errorf("table.fields.additional.placement entry %q: want column:placement or column:placement:alias", strings.TrimSpace(entry))
		}
		a := Additional{Field: strings.TrimSpace(parts[0]), Placement: Placement(strings.ToLower(strings.TrimSpace(parts[1])))}
		if len(parts) == 3 {
			a.Alias = strings.TrimSpace(parts[2])
		}
		out = append(out, a)
	}
	return out, nil
}

// routerClass is the router's class name, the value of transforms.<name>.type.
const routerClass = "io.debezium.transforms.outbox.EventRouter"

// ParseProperties reads the router's settings from connector properties: the router's own names
// ("route.by.field"), bare or under the "transforms.<name>." prefix of the transform whose type is the router,
// and key.converter / value.converter class names. Properties this package does not know are returned in unknown, so that a migration can list them.
func ParseProperties(props map[string]string) (o Options, unknown []string, err error) {
	// The router's own prefix: transforms.<name>. of the transform whose type is the EventRouter. Other
	// transforms' settings are not the router's.
	prefix := ""
	for k, v := range props {
		if rest, ok := strings.CutPrefix(k, "transforms."); ok && strings.HasSuffix(rest, ".type") && strings.TrimSpace(v) == routerClass {
			prefix = "transforms." + strings.TrimSuffix(rest, ".type") + "."
		}
	}
	for k, v := range props {
		name := k
		if prefix != "" && strings.HasPrefix(k, prefix) {
			name = k[len(prefix):]
		} else if strings.HasPrefix(k, "transforms.") {
			unknown = append(unknown, k)
			continue
		}
		v = strings.TrimSpace(v)
		switch name {
		case "route.by.field":
			o.RouteByField = v
		case "route.topic.regex":
			o.RouteTopicRegex = v
		case "route.topic.replacement":
			o.RouteTopicReplacement = v
		case "route.tombstone.on.empty.payload":
			o.TombstoneOnEmptyPayload, err = strconv.ParseBool(v)
		case "table.field.event.id":
			o.FieldEventID = v
		case "table.field.event.key":
			o.FieldEventKey = v
		case "table.field.event.payload":
			o.FieldEventPayload = v
		case "table.field.event.timestamp":
			o.FieldEventTimestamp = v
		case "table.fields.additional.placement":
			o.Additional, err = ParseAdditional(v)
		case "table.field.additional.missing":
			switch strings.ToLower(v) {
			case "error":
			case "ignore":
				o.AdditionalMissingIgnore = true
			default:
				err = fmt.Errorf("want error or ignore, not %q", v)
			}
		case "table.expand.json.payload":
			o.ExpandJSONPayload, err = strconv.ParseBool(v)
		case "key.converter":
			o.KeyConverter, err = converterOf(v)
		case "value.converter":
			o.ValueConverter, err = converterOf(v)
		case "key.converter.schemas.enable", "value.converter.schemas.enable":
			// Checked below, once the converters are known.
		case "type":
			if v != routerClass {
				unknown = append(unknown, k)
			}
		default:
			unknown = append(unknown, k)
		}
		if err != nil {
			return Options{}, nil, fmt.Errorf("debezium: property %s: %w", k, err)
		}
	}
	// JsonConverter writes a schema beside each value unless schemas.enable is false; that layout is not
	// reproduced, so say so rather than emit records its consumers would not read.
	for _, side := range []struct {
		name string
		c    Converter
	}{{"key", o.KeyConverter}, {"value", o.ValueConverter}} {
		if side.c != ConverterJSON {
			continue
		}
		if v := strings.TrimSpace(props[side.name+".converter.schemas.enable"]); !strings.EqualFold(v, "false") {
			return Options{}, nil, fmt.Errorf("debezium: %s.converter is JsonConverter with schemas enabled (%s.converter.schemas.enable is %q, and true when unset); Postbox reproduces JsonConverter only with schemas.enable=false",
				side.name, side.name, v)
		}
	}
	return o, unknown, nil
}

func converterOf(class string) (Converter, error) {
	switch class {
	case "org.apache.kafka.connect.json.JsonConverter":
		return ConverterJSON, nil
	case "org.apache.kafka.connect.storage.StringConverter":
		return ConverterString, nil
	case "io.debezium.converters.BinaryDataConverter", "org.apache.kafka.connect.converters.ByteArrayConverter":
		return ConverterBinary, nil
	}
	return "", fmt.Errorf("converter %q is not one this package reproduces (JsonConverter with schemas.enable=false, StringConverter, BinaryDataConverter, ByteArrayConverter)", class)
}

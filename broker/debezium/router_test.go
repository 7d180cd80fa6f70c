package debezium_test

import (
	"fmt"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/postbox-go/postbox/broker/debezium"
)

// The expectations below come from Debezium's documentation of the Outbox Event Router
// (documentation/modules/ROOT/pages/transformations/outbox-event-router.adoc, "Example outbox message",
// "Basic outbox table", "Emitting messages with additional fields", "Expanding escaped JSON String as JSON",
// "Configuration options") and from the router's unit tests (debezium-connect-plugins/src/test/java/io/debezium/
// transforms/outbox/EventRouterTest.java, cited by test method). The router's tests assert on Kafka Connect
// values; the bytes here are those values as the converter each case names writes them (JsonConverter with
// schemas.enable=false unless the case says otherwise), and headers as SimpleHeaderConverter writes them.

// userRow is the row of EventRouterTest.createEventRecord().
func userRow() debezium.Row {
	return debezium.Row{
		"id":            "da8d6de6-3b77-45ff-8f44-57db55a7a06c",
		"aggregatetype": "User",
		"aggregateid":   "10711fa5",
		"type":          "UserCreated",
		"payload":       "{}",
		"is_deleted":    nil,
	}
}

func with(row debezium.Row, kv ...any) debezium.Row {
	for i := 0; i < len(kv); i += 2 {
		if kv[i+1] == missing {
			delete(row, kv[i].(string))
			continue
		}
		row[kv[i].(string)] = kv[i+1]
	}
	return row
}

type absent struct{}

var missing = absent{}

func idHeader(v string) debezium.Header { return debezium.Header{Key: "id", Value: []byte(v)} }

const userID = "da8d6de6-3b77-45ff-8f44-57db55a7a06c"

func p32(v int32) *int32 { return &v }

func TestRouteMatchesTheRouter(t *testing.T) {
	tests := []struct {
		name string
		opts debezium.Options
		row  debezium.Row
		want debezium.Message
	}{
		{
			// Docs "Basic outbox table" and "Configuration options": topic outbox.event.${routedByValue} from
			// aggregatetype, key from aggregateid, value the payload alone, the id column in the "id" header.
			// EventRouterTest.canExtractTableFields (value "{}"), canSetDefaultMessageKey (key "10711fa5"),
			// canRouteBasedOnField (topic "outbox.event.User": the value's case is kept).
			name: "defaults",
			row:  userRow(),
			want: debezium.Message{Topic: "outbox.event.User", Key: []byte(`"10711fa5"`), Value: []byte(`"{}"`),
				Headers: []debezium.Header{idHeader(userID)}},
		},
		{
			// Docs "Example outbox message": key "1", header id=4d47e190-…, the value the payload as a JSON
			// string. (The page's topic outbox.event.order dates from routers that lowered the case; the
			// router's current tests, canRouteBasedOnField, keep it, and so do we.)
			name: "documented example message",
			row: debezium.Row{
				"id": "4d47e190-0402-4048-bc2c-89dd54343cdc", "aggregatetype": "order", "aggregateid": "1", "type": "OrderCreated",
				"payload": `{"id": 1, "lineItems": [{"id": 1, "item": "Debezium in Action", "status": "ENTERED", "quantity": 2, "totalPrice": 39.98}, {"id": 2, "item": "Debezium for Dummies", "status": "ENTERED", "quantity": 1, "totalPrice": 29.99}], "orderDate": "2019-01-31T12:13:01", "customerId": 123}`,
			},
			want: debezium.Message{Topic: "outbox.event.order", Key: []byte(`"1"`),
				Value:   []byte(`"{\"id\": 1, \"lineItems\": [{\"id\": 1, \"item\": \"Debezium in Action\", \"status\": \"ENTERED\", \"quantity\": 2, \"totalPrice\": 39.98}, {\"id\": 2, \"item\": \"Debezium for Dummies\", \"status\": \"ENTERED\", \"quantity\": 1, \"totalPrice\": 29.99}], \"orderDate\": \"2019-01-31T12:13:01\", \"customerId\": 123}"`),
				Headers: []debezium.Header{idHeader("4d47e190-0402-4048-bc2c-89dd54343cdc")}},
		},
		{
			// EventRouterTest.canRouteBasedOnField: another aggregatetype, another topic.
			name: "route.by.field default, another aggregate",
			opts: debezium.Options{RouteByField: "aggregatetype"},
			row:  with(userRow(), "aggregatetype", "Address", "type", "AddressCreated"),
			want: debezium.Message{Topic: "outbox.event.Address", Key: []byte(`"10711fa5"`), Value: []byte(`"{}"`),
				Headers: []debezium.Header{idHeader(userID)}},
		},
		{
			// EventRouterTest.canConfigureEveryTableField: every column renamed, routed by payload_id; the
			// only header is id.
			name: "every table field renamed",
			opts: debezium.Options{FieldEventID: "event_id", FieldEventKey: "payload_id", FieldEventPayload: "payload_body", RouteByField: "payload_id"},
			row:  debezium.Row{"event_id": userID, "payload_id": "10711fa5", "event_type": "UserCreated", "payload_body": "{}"},
			want: debezium.Message{Topic: "outbox.event.10711fa5", Key: []byte(`"10711fa5"`), Value: []byte(`"{}"`),
				Headers: []debezium.Header{idHeader(userID)}},
		},
		{
			// EventRouterTest.canSetMessageKey: table.field.event.key=type.
			name: "table.field.event.key",
			opts: debezium.Options{FieldEventKey: "type"},
			row:  userRow(),
			want: debezium.Message{Topic: "outbox.event.User", Key: []byte(`"UserCreated"`), Value: []byte(`"{}"`),
				Headers: []debezium.Header{idHeader(userID)}},
		},
		{
			// A NULL key column is a null of the column's optional schema, which Kafka's JsonConverter writes as
			// the JSON null (its convertToJson: an optional schema's null value is a NullNode).
			name: "NULL key column, JsonConverter",
			row:  with(userRow(), "aggregateid", nil),
			want: debezium.Message{Topic: "outbox.event.User", Key: []byte(`null`), Value: []byte(`"{}"`), Headers: []debezium.Header{idHeader(userID)}},
		},
		{
			// StringConverter writes a null as no bytes: a record without key.
			name: "NULL key column, StringConverter",
			opts: debezium.Options{KeyConverter: debezium.ConverterString},
			row:  with(userRow(), "aggregateid", nil),
			want: debezium.Message{Topic: "outbox.event.User", Value: []byte(`"{}"`), Headers: []debezium.Header{idHeader(userID)}},
		},
		{
			// Without route.tombstone.on.empty.payload a NULL payload is no tombstone: the value is the payload's
			// null, which JsonConverter writes as null.
			name: "NULL payload without the tombstone option",
			row:  with(userRow(), "payload", nil),
			want: debezium.Message{Topic: "outbox.event.User", Key: []byte(`"10711fa5"`), Value: []byte(`null`), Headers: []debezium.Header{idHeader(userID)}},
		},
		{
			// EventRouterTest.canInfluenceTableColumnTypes: integer id and key keep their type (key 1232, header
			// id 2), a bytes payload and a boolean placed in the envelope as "bool". JsonConverter writes the
			// integer key as a number and bytes in base64; SimpleHeaderConverter writes the integer as text.
			name: "column types kept",
			opts: debezium.Options{FieldEventID: "event_id", FieldEventKey: "payload_id", FieldEventPayload: "payload_body",
				RouteByField: "my_route_field", Additional: mustAdditional(t, "some_boolean:envelope:bool")},
			row: debezium.Row{"event_id": int32(2), "payload_id": int32(1232), "event_type": []byte("CoolSchemaCreated"),
				"my_route_field": "routename", "payload_body": []byte("{}"), "some_boolean": true},
			want: debezium.Message{Topic: "outbox.event.routename", Key: []byte(`1232`), Value: []byte(`{"payload":"e30=","bool":true}`),
				Headers: []debezium.Header{idHeader("2")}},
		},
		{
			// EventRouterTest.canSetPayloadTypeIntoTheEnvelope: type:envelope.
			name: "envelope placement",
			opts: debezium.Options{Additional: mustAdditional(t, "type:envelope")},
			row:  userRow(),
			want: debezium.Message{Topic: "outbox.event.User", Key: []byte(`"10711fa5"`), Value: []byte(`{"payload":"{}","type":"UserCreated"}`),
				Headers: []debezium.Header{idHeader(userID)}},
		},
		{
			// EventRouterTest.canSetPayloadTypeIntoTheEnvelopeWithAlias: type:envelope:aggregateType.
			name: "envelope placement with alias",
			opts: debezium.Options{Additional: mustAdditional(t, "type:envelope:aggregateType")},
			row:  userRow(),
			want: debezium.Message{Topic: "outbox.event.User", Key: []byte(`"10711fa5"`), Value: []byte(`{"payload":"{}","aggregateType":"UserCreated"}`),
				Headers: []debezium.Header{idHeader(userID)}},
		},
		{
			// EventRouterTest.canSetMultipleFieldsIntoTheEnvelope: two envelope fields and a header, with the
			// space after the comma the test's setting has.
			name: "envelope and header placements",
			opts: debezium.Options{Additional: mustAdditional(t, "type:envelope:payloadType, aggregateid:envelope:payloadId,type:header:payloadType")},
			row:  userRow(),
			want: debezium.Message{Topic: "outbox.event.User", Key: []byte(`"10711fa5"`),
				Value:   []byte(`{"payload":"{}","payloadType":"UserCreated","payloadId":"10711fa5"}`),
				Headers: []debezium.Header{idHeader(userID), {Key: "payloadType", Value: []byte("UserCreated")}}},
		},
		{
			// Docs "Emitting messages with additional fields": eventType:header:type gives a header "type"
			// holding the column; without an envelope placement the value stays the payload alone.
			name: "header placement",
			opts: debezium.Options{Additional: mustAdditional(t, "eventType:header:type")},
			row:  with(userRow(), "eventType", "order-created"),
			want: debezium.Message{Topic: "outbox.event.User", Key: []byte(`"10711fa5"`), Value: []byte(`"{}"`),
				Headers: []debezium.Header{idHeader(userID), {Key: "type", Value: []byte("order-created")}}},
		},
		{
			// A NULL column placed as a header is a header with a null value (SimpleHeaderConverter writes null
			// for null); an integer is written as its text.
			name: "header placement of NULL and integer columns",
			opts: debezium.Options{Additional: mustAdditional(t, "is_deleted:header,version:header")},
			row:  with(userRow(), "version", int64(3)),
			want: debezium.Message{Topic: "outbox.event.User", Key: []byte(`"10711fa5"`), Value: []byte(`"{}"`),
				Headers: []debezium.Header{idHeader(userID), {Key: "is_deleted"}, {Key: "version", Value: []byte("3")}}},
		},
		{
			// EventRouterTest.canSetPartitionWithAdditionalFields: p:partition sends the record to partition
			// 123; docs: "for the partition placement, adding an alias will have no effect".
			name: "partition placement",
			opts: debezium.Options{Additional: mustAdditional(t, "p:partition:ignored")},
			row:  with(userRow(), "p", int32(123)),
			want: debezium.Message{Topic: "outbox.event.User", Key: []byte(`"10711fa5"`), Value: []byte(`"{}"`),
				Headers: []debezium.Header{idHeader(userID)}, Partition: p32(123)},
		},
		{
			// EventRouterTest.canSetFieldIntoTheEnvelopeWithMissingField: table.field.additional.missing=ignore
			// leaves the missing column out; the envelope still wraps the payload.
			name: "missing additional field ignored",
			opts: debezium.Options{Additional: mustAdditional(t, "nonExistingField:envelope:alias"), AdditionalMissingIgnore: true},
			row:  userRow(),
			want: debezium.Message{Topic: "outbox.event.User", Key: []byte(`"10711fa5"`), Value: []byte(`{"payload":"{}"}`),
				Headers: []debezium.Header{idHeader(userID)}},
		},
		{
			// EventRouterTest.canSetTimestampByUserDefinedConfiguration: the timestamp column, in milliseconds,
			// becomes the record timestamp (a MicroTimestamp column is divided down to milliseconds).
			name: "table.field.event.timestamp",
			opts: debezium.Options{FieldEventTimestamp: "event_timestamp"},
			row:  with(userRow(), "event_timestamp", time.UnixMilli(14222264625338).Add(999*time.Microsecond)),
			want: debezium.Message{Topic: "outbox.event.User", Key: []byte(`"10711fa5"`), Value: []byte(`"{}"`),
				Headers: []debezium.Header{idHeader(userID)}, Timestamp: time.UnixMilli(14222264625338)},
		},
		{
			// EventRouterTest.canSetTimestampFromDebeziumEnvelopeByDefault: without the option the timestamp is
			// the router's processing time, which the producer stamps: zero here. A NULL timestamp column falls
			// back the same way.
			name: "NULL timestamp column",
			opts: debezium.Options{FieldEventTimestamp: "event_timestamp"},
			row:  with(userRow(), "event_timestamp", nil),
			want: debezium.Message{Topic: "outbox.event.User", Key: []byte(`"10711fa5"`), Value: []byte(`"{}"`),
				Headers: []debezium.Header{idHeader(userID)}},
		},
		{
			// EventRouterTest.canMarkAnEventAsDeleted, first record: with a payload the tombstone option changes
			// nothing.
			name: "tombstone option, payload present",
			opts: debezium.Options{Additional: mustAdditional(t, "is_deleted:envelope:deleted"), TombstoneOnEmptyPayload: true},
			row:  with(userRow(), "is_deleted", true),
			want: debezium.Message{Topic: "outbox.event.User", Key: []byte(`"10711fa5"`), Value: []byte(`{"payload":"{}","deleted":true}`),
				Headers: []debezium.Header{idHeader(userID)}},
		},
		{
			// EventRouterTest.canMarkAnEventAsDeleted, second record, and the docs for
			// route.tombstone.on.empty.payload: an empty payload gives a tombstone, key and headers kept.
			name: "tombstone on empty payload",
			opts: debezium.Options{Additional: mustAdditional(t, "is_deleted:envelope:deleted"), TombstoneOnEmptyPayload: true},
			row:  with(userRow(), "is_deleted", true, "payload", ""),
			want: debezium.Message{Topic: "outbox.event.User", Key: []byte(`"10711fa5"`), Headers: []debezium.Header{idHeader(userID)}},
		},
		{
			// EventRouterTest.shouldNotWarnOnNullPayloadWhenExpandJsonPayloadEnabled: a NULL payload is a
			// tombstone too, with expansion on; the docs say "an empty or null payload".
			name: "tombstone on NULL payload",
			opts: debezium.Options{TombstoneOnEmptyPayload: true, ExpandJSONPayload: true},
			row:  with(userRow(), "payload", nil),
			want: debezium.Message{Topic: "outbox.event.User", Key: []byte(`"10711fa5"`), Headers: []debezium.Header{idHeader(userID)}},
		},
		{
			// The router tests emptiness on the payload's text trimmed: blanks are empty.
			name: "tombstone on blank payload",
			opts: debezium.Options{TombstoneOnEmptyPayload: true},
			row:  with(userRow(), "payload", " \t"),
			want: debezium.Message{Topic: "outbox.event.User", Key: []byte(`"10711fa5"`), Headers: []debezium.Header{idHeader(userID)}},
		},
		{
			// EventRouterTest.noTombstoneIfNotConfigured: without the option an empty payload is an ordinary
			// record with its envelope.
			name: "no tombstone unless configured",
			opts: debezium.Options{Additional: mustAdditional(t, "is_deleted:envelope:deleted")},
			row:  with(userRow(), "is_deleted", true, "payload", ""),
			want: debezium.Message{Topic: "outbox.event.User", Key: []byte(`"10711fa5"`), Value: []byte(`{"payload":"","deleted":true}`),
				Headers: []debezium.Header{idHeader(userID)}},
		},
		{
			// EventRouterTest.canExpandJsonPayloadIfConfigured: the JSON string becomes JSON, fields in the
			// document's order; docs "Expanding escaped JSON String as JSON".
			name: "table.expand.json.payload",
			opts: debezium.Options{ExpandJSONPayload: true},
			row: with(userRow(), "payload",
				`{"fullName": "John Doe", "enabled": true, "rating": 4.9, "age": 42, "pets": ["dog", "cat"], "petObjects": [{"type": "dog"}, {"type": "cat"}]}`),
			want: debezium.Message{Topic: "outbox.event.User", Key: []byte(`"10711fa5"`),
				Value:   []byte(`{"fullName":"John Doe","enabled":true,"rating":4.9,"age":42,"pets":["dog","cat"],"petObjects":[{"type":"dog"},{"type":"cat"}]}`),
				Headers: []debezium.Header{idHeader(userID)}},
		},
		{
			// EventRouterTest.canExpandJsonWithNestedArraysWhereFirstArrayIsEmpty: the elements' schemas merge;
			// the first element's empty array stays an empty array.
			name: "expanded nested arrays, first empty",
			opts: debezium.Options{ExpandJSONPayload: true},
			row: with(userRow(), "payload",
				`{"fullName": "John Doe", "petObjects": [{"type": "dog", "colors": []}, {"type": "cat", "colors": [{"name": "white"}]}]}`),
			want: debezium.Message{Topic: "outbox.event.User", Key: []byte(`"10711fa5"`),
				Value:   []byte(`{"fullName":"John Doe","petObjects":[{"type":"dog","colors":[]},{"type":"cat","colors":[{"name":"white"}]}]}`),
				Headers: []debezium.Header{idHeader(userID)}},
		},
		{
			// EventRouterTest.shouldExpandJSONPayloadWithEmptyArrayAndRemoveThatArray: an empty array no element
			// gives a schema is dropped (table.json.payload.empty.array.behavior=ignore, the default).
			name: "expanded empty array dropped",
			opts: debezium.Options{ExpandJSONPayload: true},
			row:  with(userRow(), "payload", `{"fullName": "John Doe", "petObjects": [{"type": "dog", "colors": []}]}`),
			want: debezium.Message{Topic: "outbox.event.User", Key: []byte(`"10711fa5"`),
				Value: []byte(`{"fullName":"John Doe","petObjects":[{"type":"dog"}]}`), Headers: []debezium.Header{idHeader(userID)}},
		},
		{
			// table.json.payload.null.behavior=ignore, the default (EventRouterConfigDefinition): a null field
			// gets no schema and is left out.
			name: "expanded null field dropped",
			opts: debezium.Options{ExpandJSONPayload: true},
			row:  with(userRow(), "payload", `{"a": null, "b": 1}`),
			want: debezium.Message{Topic: "outbox.event.User", Key: []byte(`"10711fa5"`), Value: []byte(`{"b":1}`),
				Headers: []debezium.Header{idHeader(userID)}},
		},
		{
			// EventRouterTest.canExpandJsonArrayWithFirstElementNull: the first non-null element gives the
			// array's type; the null stays.
			name: "expanded array with a leading null",
			opts: debezium.Options{ExpandJSONPayload: true},
			row:  with(userRow(), "payload", `{"fullName": "John Doe", "numbers": [null, 2, 3]}`),
			want: debezium.Message{Topic: "outbox.event.User", Key: []byte(`"10711fa5"`), Value: []byte(`{"fullName":"John Doe","numbers":[null,2,3]}`),
				Headers: []debezium.Header{idHeader(userID)}},
		},
		{
			// EventRouterTest.canExpandJsonPayloadWithAdditionalFieldInEnvelope: the expanded payload inside the
			// envelope.
			name: "expanded payload in the envelope",
			opts: debezium.Options{ExpandJSONPayload: true, Additional: mustAdditional(t, "type:envelope")},
			row:  with(userRow(), "payload", `{"fullName": "John Doe"}`),
			want: debezium.Message{Topic: "outbox.event.User", Key: []byte(`"10711fa5"`), Value: []byte(`{"payload":{"fullName":"John Doe"},"type":"UserCreated"}`),
				Headers: []debezium.Header{idHeader(userID)}},
		},
		{
			// EventRouterTest.shouldNotExpandJSONPayloadIfNotConfigured: the JSON stays a string.
			name: "JSON payload not expanded unless configured",
			row:  with(userRow(), "payload", `{"fullName": "John Doe", "rating": 4.9, "age": 42}`),
			want: debezium.Message{Topic: "outbox.event.User", Key: []byte(`"10711fa5"`), Value: []byte(`"{\"fullName\": \"John Doe\", \"rating\": 4.9, \"age\": 42}"`),
				Headers: []debezium.Header{idHeader(userID)}},
		},
		{
			// Docs, table.expand.json.payload: "If no content found or in case of parsing error, the content is
			// kept as is".
			name: "payload that is not JSON kept as a string",
			opts: debezium.Options{ExpandJSONPayload: true},
			row:  with(userRow(), "payload", `order 1 created`),
			want: debezium.Message{Topic: "outbox.event.User", Key: []byte(`"10711fa5"`), Value: []byte(`"order 1 created"`),
				Headers: []debezium.Header{idHeader(userID)}},
		},
		{
			// The router's expansion throws on an array that is not homogenous ("Field is not a homogenous
			// array"), and the failure keeps the payload as it is.
			name: "payload with a mixed array kept as a string",
			opts: debezium.Options{ExpandJSONPayload: true},
			row:  with(userRow(), "payload", `{"a": [1, "x"]}`),
			want: debezium.Message{Topic: "outbox.event.User", Key: []byte(`"10711fa5"`), Value: []byte(`"{\"a\": [1, \"x\"]}"`),
				Headers: []debezium.Header{idHeader(userID)}},
		},
		{
			// Docs, route.topic.replacement: the topic is the replacement with ${routedByValue} the route value.
			name: "route.topic.replacement",
			opts: debezium.Options{RouteTopicReplacement: "${routedByValue}.events"},
			row:  userRow(),
			want: debezium.Message{Topic: "User.events", Key: []byte(`"10711fa5"`), Value: []byte(`"{}"`), Headers: []debezium.Header{idHeader(userID)}},
		},
		{
			// Docs, route.topic.regex, and Kafka's RegexRouter, which the router applies: the regex must match
			// the whole value; numbered groups work in the replacement.
			name: "route.topic.regex with a numbered group",
			opts: debezium.Options{RouteTopicRegex: `(.*)-(?<routedByValue>.*)`, RouteTopicReplacement: "$1.outbox.${routedByValue}"},
			row:  with(userRow(), "aggregatetype", "shop-Order"),
			want: debezium.Message{Topic: "shop.outbox.Order", Key: []byte(`"10711fa5"`), Value: []byte(`"{}"`), Headers: []debezium.Header{idHeader(userID)}},
		},
		{
			// Kafka's RegexRouter leaves a topic its regex does not match as it is: here the route value.
			name: "route.topic.regex that does not match",
			opts: debezium.Options{RouteTopicRegex: `(?<routedByValue>[a-z]+)`},
			row:  userRow(),
			want: debezium.Message{Topic: "User", Key: []byte(`"10711fa5"`), Value: []byte(`"{}"`), Headers: []debezium.Header{idHeader(userID)}},
		},
		{
			// StringConverter (org.apache.kafka.connect.storage.StringConverter) writes the text as it is.
			name: "StringConverter",
			opts: debezium.Options{KeyConverter: debezium.ConverterString, ValueConverter: debezium.ConverterString},
			row:  userRow(),
			want: debezium.Message{Topic: "outbox.event.User", Key: []byte(`10711fa5`), Value: []byte(`{}`), Headers: []debezium.Header{idHeader(userID)}},
		},
		{
			// Docs "Using Avro as the payload format": BinaryDataConverter passes the payload column's bytes as
			// they are; EventRouterTest.canPassBinaryMessage.
			name: "BinaryDataConverter",
			opts: debezium.Options{KeyConverter: debezium.ConverterString, ValueConverter: debezium.ConverterBinary},
			row:  with(userRow(), "aggregateid", "a key", "payload", []byte("a binary message\x00\xff")),
			want: debezium.Message{Topic: "outbox.event.User", Key: []byte(`a key`), Value: []byte("a binary message\x00\xff"),
				Headers: []debezium.Header{idHeader(userID)}},
		},
		{
			// JsonConverter writes through Jackson, which escapes only '"', '\\' and control characters, and
			// Java's doubles (1.0E7, 4.0).
			name: "JSON escaping and doubles",
			opts: debezium.Options{Additional: mustAdditional(t, "big:envelope,whole:envelope,small:envelope")},
			row:  with(userRow(), "payload", "a\"b\\c\nd\x01é</>\u2028", "big", 1e7, "whole", 4.0, "small", 0.0001),
			want: debezium.Message{Topic: "outbox.event.User", Key: []byte(`"10711fa5"`),
				Value:   []byte(`{"payload":"a\"b\\c\nd\u0001é</>` + "\u2028" + `","big":1.0E7,"whole":4.0,"small":1.0E-4}`),
				Headers: []debezium.Header{idHeader(userID)}},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			r, err := debezium.New(tc.opts)
			if err != nil {
				t.Fatalf("New: %v", err)
			}
			got, err := r.Route(tc.row)
			if err != nil {
				t.Fatalf("Route: %v", err)
			}
			if g, w := show(got), show(tc.want); g != w {
				t.Errorf("the record differs from the router's\n got: %s\nwant: %s", g, w)
			}
		})
	}
}

func TestRouteFailsAsTheRouterDoes(t *testing.T) {
	tests := []struct {
		name string
		opts debezium.Options
		row  debezium.Row
		want string
	}{
		// EventRouterTest.failsOnInvalidSetMessageKey.
		{"key column missing", debezium.Options{FieldEventKey: "fakefield"}, userRow(), `no table.field.event.key column "fakefield"`},
		// EventRouterTest.shouldFailOnMissingField: table.field.additional.missing defaults to error.
		{"additional column missing", debezium.Options{Additional: mustAdditional(t, "nonExistingField:envelope:alias")}, userRow(),
			`no column "nonExistingField"`},
		{"id column missing", debezium.Options{}, with(userRow(), "id", missing), `no table.field.event.id column "id"`},
		{"payload column missing", debezium.Options{}, with(userRow(), "payload", missing), `no table.field.event.payload column "payload"`},
		{"route column missing", debezium.Options{}, with(userRow(), "aggregatetype", missing), `no route.by.field column "aggregatetype"`},
		{"partition not an int32", debezium.Options{Additional: mustAdditional(t, "p:partition")}, with(userRow(), "p", int64(1)<<40),
			"not a 32-bit integer"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			r, err := debezium.New(tc.opts)
			if err != nil {
				t.Fatalf("New: %v", err)
			}
			if _, err := r.Route(tc.row); err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("Route error = %v; want one saying %q", err, tc.want)
			}
		})
	}
}

func TestNewRefusesWhatTheRouterRefuses(t *testing.T) {
	tests := []struct {
		name string
		opts debezium.Options
		want string
	}{
		// EventRouterTest's configuration checks: a bad regex, a placement that is not header, envelope or
		// partition.
		{"bad regex", debezium.Options{RouteTopicRegex: " [[a-z]"}, "route.topic.regex"},
		{"bad placement", debezium.Options{Additional: []debezium.Additional{{Field: "type", Placement: "body"}}}, "must be header, envelope or partition"},
		{"unknown group", debezium.Options{RouteTopicReplacement: "outbox.${nope}"}, `no group named "nope"`},
		// Connect's SchemaBuilder refuses two fields of one name in the envelope.
		{"duplicate envelope field", debezium.Options{Additional: mustAdditional(t, "type:envelope:payload")}, `two fields named "payload"`},
		{"envelope with StringConverter", debezium.Options{Additional: mustAdditional(t, "type:envelope"), ValueConverter: debezium.ConverterString},
			"only value.converter"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if _, err := debezium.New(tc.opts); err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("New error = %v; want one saying %q", err, tc.want)
			}
		})
	}
	// EventRouterTest: an entry without its placement ("type") and an empty setting are refused.
	for _, s := range []string{"type", ""} {
		if _, err := debezium.ParseAdditional(s); err == nil {
			t.Errorf("ParseAdditional(%q) = nil error; the router refuses it", s)
		}
	}
}

func TestParseProperties(t *testing.T) {
	// A connector configured as the docs' "Basic configuration" and "Emitting messages with additional
	// fields" show, with the converters of "Expanding escaped JSON String as JSON".
	props := map[string]string{
		"transforms":             "outbox",
		"transforms.outbox.type": "io.debezium.transforms.outbox.EventRouter",
		"transforms.outbox.table.fields.additional.placement": "eventType:header:type",
		"transforms.outbox.table.expand.json.payload":         "true",
		"transforms.outbox.route.topic.replacement":           "${routedByValue}.events",
		"value.converter":                  "org.apache.kafka.connect.json.JsonConverter",
		"value.converter.schemas.enable":   "false",
		"key.converter":                    "org.apache.kafka.connect.storage.StringConverter",
		"plugin.name":                      "pgoutput",
		"transforms.unwrap.type":           "io.debezium.transforms.ExtractNewRecordState",
		"transforms.unwrap.route.by.field": "not the router's",
	}
	o, unknown, err := debezium.ParseProperties(props)
	if err != nil {
		t.Fatal(err)
	}
	if !o.ExpandJSONPayload || o.RouteTopicReplacement != "${routedByValue}.events" || o.KeyConverter != debezium.ConverterString ||
		o.ValueConverter != debezium.ConverterJSON || len(o.Additional) != 1 || o.Additional[0] != (debezium.Additional{Field: "eventType", Placement: "header", Alias: "type"}) {
		t.Errorf("ParseProperties = %+v", o)
	}
	sort.Strings(unknown)
	if want := "plugin.name,transforms,transforms.unwrap.route.by.field,transforms.unwrap.type"; strings.Join(unknown, ",") != want {
		t.Errorf("unknown = %v; want %s: the connector's own properties and another transform's", unknown, want)
	}
	if o.RouteByField != "" {
		t.Errorf("RouteByField = %q, taken from another transform", o.RouteByField)
	}
	// JsonConverter writes schemas unless told not to: that layout is not reproduced, so it is refused.
	delete(props, "value.converter.schemas.enable")
	if _, _, err := debezium.ParseProperties(props); err == nil || !strings.Contains(err.Error(), "schemas.enable") {
		t.Errorf("ParseProperties with JsonConverter schemas on: err = %v; want one naming schemas.enable", err)
	}
}

func mustAdditional(t *testing.T, s string) []debezium.Additional {
	t.Helper()
	a, err := debezium.ParseAdditional(s)
	if err != nil {
		t.Fatal(err)
	}
	return a
}

// show prints a message so that two can be compared and a difference read.
func show(m debezium.Message) string {
	q := func(b []byte) string {
		if b == nil {
			return "null"
		}
		return fmt.Sprintf("%q", b)
	}
	var b strings.Builder
	fmt.Fprintf(&b, "topic=%q key=%s value=%s headers=[", m.Topic, q(m.Key), q(m.Value))
	for i, h := range m.Headers {
		if i > 0 {
			b.WriteString(" ")
		}
		fmt.Fprintf(&b, "%s=%s", h.Key, q(h.Value))
	}
	b.WriteString("]")
	if m.Partition != nil {
		fmt.Fprintf(&b, " partition=%d", *m.Partition)
	}
	if !m.Timestamp.IsZero() {
		fmt.Fprintf(&b, " timestamp=%d", m.Timestamp.UnixMilli())
	}
	return b.String()
}

// Package debezium produces the Kafka records that Debezium's Outbox Event Router
// (io.debezium.transforms.outbox.EventRouter) emits for a row of an outbox table, so that Postbox can replace a
// Debezium connector, or run beside one during a migration, without a change in the consumers.
//
// It is pure: a Row and the router's Options go in, a Message (topic, key, value, headers, partition, timestamp)
// comes out as bytes, the way Kafka Connect's converters would write them. It depends on the standard library
// only, so every broker adapter and the CLI can use it without pulling in a client.
//
// # What the router does, and what this package reproduces
//
// With the router's defaults, a row (id, aggregatetype, aggregateid, type, payload) becomes a record on topic
// "outbox.event." + aggregatetype, keyed by aggregateid, whose value is the payload and which carries the event ID
// in an "id" header. Options mirror the router's own settings, named after them:
//
//	route.by.field                     Options.RouteByField              "aggregatetype"
//	route.topic.regex                  Options.RouteTopicRegex           "(?<routedByValue>.*)"
//	route.topic.replacement            Options.RouteTopicReplacement     "outbox.event.${routedByValue}"
//	route.tombstone.on.empty.payload   Options.TombstoneOnEmptyPayload   false
//	table.field.event.id               Options.FieldEventID              "id"
//	table.field.event.key              Options.FieldEventKey             "aggregateid"
//	table.field.event.payload          Options.FieldEventPayload         "payload"
//	table.field.event.timestamp        Options.FieldEventTimestamp       none: the time of publishing
//	table.fields.additional.placement  Options.AdditionalPlacement       none
//	table.field.additional.missing     Options.AdditionalMissing         "error"
//	table.expand.json.payload          Options.ExpandJSONPayload         false
//	key.converter / value.converter    Options.KeyConverter / ValueConverter   ConverterJSON
//
// ParseProperties reads these names from a connector's configuration (with or without the
// "transforms.<name>." prefix).
//
// # Converters
//
// The bytes on the wire depend on the connector's converters, not on the router. ConverterJSON is Kafka's
// JsonConverter with schemas.enable=false, the layout of the router's documented example (key "1", value a
// JSON string); ConverterString is Kafka's StringConverter (the key or payload text as it is); ConverterBinary
// is Debezium's BinaryDataConverter or Kafka's ByteArrayConverter (a bytes column passed through). Headers are
// written as Kafka Connect's SimpleHeaderConverter writes them: a string as its UTF-8 text, a number or boolean
// as its decimal or true/false text, a NULL as a header with a null value. JsonConverter with
// schemas.enable=true (a schema beside each value) is not reproduced.
//
// # Not reproduced
//
// The record timestamp without table.field.event.timestamp is the connector's processing time (ts_ms); here it
// is left zero for the producer to stamp at publish time, which is what a consumer sees as the same thing. The
// router's tracing span (tracing.span.context.field) needs OpenTelemetry on Connect's class path and only opens a
// span; place the column as a header to carry it. table.field.event.schema.version only changes the Connect
// schema, which JsonConverter without schemas does not write. When an expanded JSON array holds objects whose
// field sets differ, Debezium merges their schemas in the order of a hash set; here they merge in array order,
// so such records may list the merged fields in another order.
package debezium

package kafkabroker

import (
	"fmt"

	"github.com/postbox-go/postbox"
	"github.com/postbox-go/postbox/broker/debezium"
	"github.com/twmb/franz-go/pkg/kgo"
)

// newDebeziumRouter is the router of PublisherConfig.Debezium, refusing what this publisher cannot honour.
func newDebeziumRouter(o debezium.Options) (*debezium.Router, error) {
	for _, a := range o.Additional {
		if a.Placement == debezium.PlacementPartition {
			// franz-go's default partitioner ignores a record's Partition, and a manual one would send every
			// record without the column to partition 0: neither keeps the router's promise.
			return nil, fmt.Errorf("table.fields.additional.placement %s:partition is not supported by kafkabroker; remove it and let the key choose the partition",
				a.Field)
		}
		if a.Field == "timestamp" && a.Placement != debezium.PlacementPartition {
			// Debezium writes a timestamp column as its connector's time.precision.mode says (epoch microseconds,
			// ISO-8601 text…); guessing would send every message dead, so say it at start.
			return nil, fmt.Errorf("table.fields.additional.placement %s:%s: the timestamp column (CreatedAt) cannot be placed, its form depends on the connector's time.precision.mode; put the form your consumers read in a message header and place that",
				a.Field, a.Placement)
		}
	}
	return debezium.New(o)
}

// DebeziumRow is the outbox row a message stands for in PublisherConfig.Debezium's layout: each header is a
// column of its name, then id = ID, aggregatetype = Topic, aggregateid = Key (NULL when empty), type = Type,
// payload = Payload (text; bytes with the binary value converter) and timestamp = CreatedAt (when set)
// override any header of those names.
func DebeziumRow(rec postbox.Record, valueConverter debezium.Converter) debezium.Row {
	row := make(debezium.Row, len(rec.Headers)+6)
	for k, v := range rec.Headers {
		row[k] = v
	}
	row["id"] = rec.ID
	row["aggregatetype"] = rec.Topic
	row["aggregateid"] = nil
	if rec.Key != "" {
		row["aggregateid"] = rec.Key
	}
	row["type"] = rec.Type
	if valueConverter == debezium.ConverterBinary {
		row["payload"] = rec.Payload
	} else {
		row["payload"] = string(rec.Payload)
	}
	if !rec.CreatedAt.IsZero() {
		row["timestamp"] = rec.CreatedAt
	} else {
		row["timestamp"] = nil
	}
	return row
}

// debeziumRecord builds the router's record for rec.
func (p *Publisher) debeziumRecord(rec postbox.Record) (*kgo.Record, error) {
	m, err := p.dbz.Route(DebeziumRow(rec, p.dbz.Options().ValueConverter))
	if err != nil {
		return nil, fmt.Errorf("kafkabroker: message %s: %w", rec.ID, err)
	}
	topic := p.cfg.TopicPrefix + m.Topic
	if err := CheckTopic(topic); err != nil {
		return nil, fmt.Errorf("kafkabroker: message %s: the Debezium route gives %v", rec.ID, err)
	}
	r := &kgo.Record{Topic: topic, Key: m.Key, Value: m.Value, Timestamp: m.Timestamp, Headers: make([]kgo.RecordHeader, 0, len(m.Headers))}
	size := len(m.Key) + len(m.Value)
	for _, h := range m.Headers {
		r.Headers = append(r.Headers, kgo.RecordHeader{Key: h.Key, Value: h.Value})
		size += len(h.Key) + len(h.Value)
	}
	if err := p.checkSize(rec, r, size); err != nil {
		return nil, err
	}
	return r, nil
}

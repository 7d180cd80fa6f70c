package driver

import "time"

// Message is the message part of an outbox row, as a store reads and writes it. Users hold postbox.Message, which
// has the same fields and documents them; the core converts between the two, so a store never imports the core.
type Message struct {
	// ID is the message's stable identity (a UUID in canonical text form). Enqueue fills it with a UUIDv7 when
	// empty. It is the broker-side dedup key and the consumer's inbox key.
	ID string
	// Topic names the destination (a subject, topic, exchange routing key or URL path, depending on the broker).
	Topic string
	// Key is optional. Brokers map it to their partition or ordering concept; in ordered mode, messages with the
	// same key are published one at a time in enqueue order.
	Key string
	// Type names the event, such as "order.created". It becomes the CloudEvents type.
	Type string
	// Payload is the body, published as is.
	Payload []byte
	// Headers are carried to the broker as message headers.
	Headers map[string]string
	// AvailableAt delays delivery until the given time. The zero value means at once.
	AvailableAt time.Time
}

// Status is the state of an outbox row; postbox.Status has the same values.
type Status string

// Record states.
const (
	StatusPending   Status = "pending"
	StatusPublished Status = "published"
	StatusDead      Status = "dead"
)

// Record is an outbox row: a message with its delivery bookkeeping, as Insert writes it and Claim and ListDead
// read it. Users hold postbox.Record, which has the same fields.
type Record struct {
	Message
	Status      Status
	Attempts    int
	LastError   string
	CreatedAt   time.Time
	PublishedAt time.Time // zero unless Status is StatusPublished
}

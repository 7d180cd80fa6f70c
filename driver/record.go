package driver

import "time"

// Message is an event to publish. It is defined here so that drivers can use it without importing the root
// package; users see it as postbox.Message.
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

// Status is the state of a stored record.
type Status string

// Record states.
const (
	StatusPending   Status = "pending"
	StatusPublished Status = "published"
	StatusDead      Status = "dead"
)

// Record is a stored message with its delivery bookkeeping.
type Record struct {
	Message
	Status      Status
	Attempts    int
	LastError   string
	CreatedAt   time.Time
	PublishedAt time.Time // zero unless Status is StatusPublished
}

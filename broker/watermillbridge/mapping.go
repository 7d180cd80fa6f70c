package watermillbridge

import (
	"errors"
	"fmt"
	"strings"

	"github.com/ThreeDotsLabs/watermill/message"
	"github.com/postbox-go/postbox"
	"github.com/postbox-go/postbox/broker"
)

// DefaultPrefix is Mapping.Prefix when it is empty: the Kafka binding's "ce_", which survives as a header name
// on the transports watermill runs on.
const DefaultPrefix = broker.PrefixKafka

// Mapping converts between Postbox messages and watermill messages. The message ID is the watermill UUID, the
// payload is the watermill payload, and the metadata carries the CloudEvents attributes (as in
// broker.CloudEvents: <prefix>id, <prefix>type, <prefix>partitionkey for the key…) and the user headers. The zero
// value is ready to use.
type Mapping struct {
	// Prefix goes before the CloudEvents attribute names in metadata. Match the binding of the broker under the
	// watermill publisher when Postbox subscribers read the same messages (broker.PrefixAMQP for AMQP,
	// broker.PrefixHTTP for HTTP and NATS). Default: DefaultPrefix.
	Prefix string
	// Source is the CloudEvents source attribute of published messages. Default: broker.DefaultSource.
	Source string
	// NameKey, when set, is a metadata key that carries the message type besides <prefix>type, and gives the
	// type of delivered and produced messages without a <prefix>type. Set it to "name" to work with the
	// marshalers of watermill's cqrs package, which keep the event name there. Default: "", none.
	NameKey string
}

func (m Mapping) prefix() string {
	if m.Prefix == "" {
		return DefaultPrefix
	}
	return m.Prefix
}

func (m Mapping) ce() broker.CloudEvents {
	return broker.CloudEvents{Prefix: m.prefix(), Source: m.Source}
}

// Message returns the watermill message for rec: UUID rec.ID, the payload, and metadata with the CloudEvents
// attributes and rec's headers. It fails when a header would be read back as an attribute.
func (m Mapping) Message(rec postbox.Record) (*message.Message, error) {
	h, body, err := m.ce().Encode(rec)
	if err != nil {
		return nil, err
	}
	if m.NameKey != "" {
		if _, taken := rec.Headers[m.NameKey]; taken {
			return nil, fmt.Errorf("watermillbridge: header %q of message %s is the Mapping's NameKey, which carries the type; rename it",
				m.NameKey, rec.ID)
		}
		h[m.NameKey] = rec.Type
	}
	msg := message.NewMessage(rec.ID, body)
	msg.Metadata = h
	return msg, nil
}

// Type returns the type of msg: its <prefix>type metadata, or else its NameKey metadata.
func (m Mapping) Type(msg *message.Message) string {
	if t := msg.Metadata.Get(m.prefix() + broker.AttrType); t != "" {
		return t
	}
	if m.NameKey != "" {
		return msg.Metadata.Get(m.NameKey)
	}
	return ""
}

// SetType sets the type of msg, for a message a handler produces.
func (m Mapping) SetType(msg *message.Message, typ string) {
	msg.Metadata.Set(m.prefix()+broker.AttrType, typ)
}

// Key returns the key of msg: its <prefix>partitionkey metadata, or else its <prefix>subject. Use it as the
// partition key of watermill publishers that have one (a Kafka partitioning marshaler).
func (m Mapping) Key(msg *message.Message) string {
	if k, ok := msg.Metadata[m.prefix()+broker.AttrPartitionKey]; ok {
		return k
	}
	return msg.Metadata.Get(m.prefix() + broker.AttrSubject)
}

// SetKey sets the key of msg, for a message a handler produces.
func (m Mapping) SetKey(msg *message.Message, key string) {
	msg.Metadata.Set(m.prefix()+broker.AttrPartitionKey, key)
}

// Delivered returns the Postbox message a watermill subscriber delivered, for the inbox. A message with
// CloudEvents metadata (<prefix>specversion) is decoded as broker.CloudEvents does: its ID is <prefix>id. Any
// other message is a plain watermill message: its ID is the UUID, its type the NameKey metadata, and its
// metadata become the headers. The topic is the subscribe topic the router put in msg's context.
func (m Mapping) Delivered(msg *message.Message) (postbox.Message, error) {
	var out postbox.Message
	if _, ok := msg.Metadata[m.prefix()+broker.AttrSpecVersion]; ok {
		e, err := m.ce().Decode(msg.Metadata, msg.Payload)
		if err != nil {
			return postbox.Message{}, fmt.Errorf("watermillbridge: message %s: %w", msg.UUID, err)
		}
		out = e.Message
		if m.NameKey != "" {
			delete(out.Headers, m.NameKey)
		}
	} else {
		if msg.UUID == "" {
			return postbox.Message{}, errors.New("watermillbridge: the delivered message has neither a UUID nor CloudEvents metadata, " +
				"so the inbox has no ID to deduplicate it by; give messages a UUID (watermill.NewUUID())")
		}
		out = postbox.Message{ID: msg.UUID, Type: m.Type(msg), Payload: msg.Payload}
		if len(msg.Metadata) > 0 {
			out.Headers = make(map[string]string, len(msg.Metadata))
			for k, v := range msg.Metadata {
				if k != m.NameKey {
					out.Headers[k] = v
				}
			}
		}
	}
	out.Topic = message.SubscribeTopicFromCtx(msg.Context())
	return out, nil
}

// Produced returns the message to enqueue for msg, which a handler produced, on topic. Its ID is msg's UUID
// (a new one when empty), its type and key come from Type and Key, and its other metadata become headers; the
// CloudEvents attributes in metadata are dropped, as the relay sets them again when it publishes. A UUID that
// is not a UUID in the canonical form is refused, because the outbox keys messages by UUID.
func (m Mapping) Produced(msg *message.Message, topic string) (postbox.Message, error) {
	out := postbox.Message{ID: msg.UUID, Topic: topic, Type: m.Type(msg), Key: m.Key(msg), Payload: msg.Payload}
	if out.ID != "" && !isUUID(out.ID) {
		return postbox.Message{}, fmt.Errorf("watermillbridge: produced message %q: the outbox needs a UUID "+
			"(xxxxxxxx-xxxx-xxxx-xxxx-xxxxxxxxxxxx) or an empty UUID; make messages with watermill.NewUUID()", msg.UUID)
	}
	if out.Type == "" {
		hint := "set it with Mapping.SetType"
		if m.NameKey != "" {
			hint += " or the " + m.NameKey + " metadata"
		}
		return postbox.Message{}, fmt.Errorf("watermillbridge: produced message %s has no type; %s", msg.UUID, hint)
	}
	p := m.prefix()
	for k, v := range msg.Metadata {
		if k == m.NameKey || len(k) >= len(p) && strings.EqualFold(k[:len(p)], p) {
			continue
		}
		if out.Headers == nil {
			out.Headers = make(map[string]string, len(msg.Metadata))
		}
		out.Headers[k] = v
	}
	return out, nil
}

// isUUID reports whether s has the canonical UUID form, which Enqueue accepts.
func isUUID(s string) bool {
	if len(s) != 36 {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch i {
		case 8, 13, 18, 23:
			if c != '-' {
				return false
			}
		default:
			if !(c >= '0' && c <= '9' || c >= 'a' && c <= 'f' || c >= 'A' && c <= 'F') {
				return false
			}
		}
	}
	return true
}

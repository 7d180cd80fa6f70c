package broker_test

import (
	"bytes"
	"errors"
	"testing"

	"github.com/postbox-go/postbox"
	"github.com/postbox-go/postbox/broker"
)

// FuzzCloudEventsDecode: whatever headers a broker hands over, Decode never panics; it either refuses them with
// ErrNotCloudEvent, or returns a message with an ID and a type that, encoded again, decodes to the same message.
func FuzzCloudEventsDecode(f *testing.F) {
	f.Add("ce-specversion", "1.0", "ce-id", "01890a5d-ac96-774b-bcce-b302099a8057", "ce-type", "order.created", "ce-time", "2024-05-06T07:08:09.123456789Z", []byte(`{}`), uint8(0))
	f.Add("specversion", "1.0", "id", "x", "type", "t", "partitionkey", "k", []byte{0}, uint8(4))
	f.Add("CE_SPECVERSION", "0.3", "ce_id", "", "ce_type", "t", "ce_subject", "s", []byte(nil), uint8(1))
	f.Add("ce-specversion", "1.0", "ce-id", "%4", "ce-type", "%41", "ce-time", "2024-05-06T07:08:09+02:00", []byte("x"), uint8(0))
	names := []string{"HTTP", "Kafka", "AMQP", "AMQPColon", "MQTT"}
	f.Fuzz(func(t *testing.T, n1, v1, n2, v2, n3, v3, n4, v4 string, body []byte, binding uint8) {
		ce := bindings[names[int(binding)%len(names)]]
		h := map[string]string{n1: v1, n2: v2, n3: v3, n4: v4}
		e, err := ce.Decode(h, body)
		if err != nil {
			if !errors.Is(err, broker.ErrNotCloudEvent) {
				t.Fatalf("Decode error %v does not wrap ErrNotCloudEvent", err)
			}
			return
		}
		if e.Message.ID == "" || e.Message.Type == "" {
			t.Fatalf("Decode accepted a message without ID or type: %+v", e.Message)
		}
		if !bytes.Equal(e.Message.Payload, body) {
			t.Fatal("Decode changed the body")
		}
		r := postbox.Record{Message: e.Message, CreatedAt: e.Time}
		h2, body2, err := ce.Encode(r)
		if err != nil {
			return // a foreign attribute kept as a header, which Encode refuses to send as one of ours
		}
		e2, err := ce.Decode(h2, body2)
		if err != nil {
			t.Fatalf("Decode of the re-encoded message failed: %v", err)
		}
		if e2.Message.ID != e.Message.ID || e2.Message.Type != e.Message.Type || e2.Message.Key != e.Message.Key ||
			!e2.Time.Equal(e.Time) || !bytes.Equal(e2.Message.Payload, e.Message.Payload) {
			t.Fatalf("re-encoding changed the message: %+v at %v, then %+v at %v", e.Message, e.Time, e2.Message, e2.Time)
		}
	})
}

package awswire

import (
	"bytes"
	"testing"
	"time"

	"github.com/postbox-go/postbox"
	"github.com/postbox-go/postbox/broker"
)

// FuzzRoundTrip: whatever the payload, key and headers, a record Encode accepts comes back from Decode as it was
// sent, within MaxAttributes String attributes whose values are text SQS accepts.
func FuzzRoundTrip(f *testing.F) {
	f.Add([]byte(`{"n":1}`), "k", "X-Tenant", "acme", "traceparent", "00-x-y-01")
	f.Add([]byte{0, 0xff, 0xfe}, "", "a b", "", "content-type", "application/octet-stream")
	f.Add([]byte(nil), "clé ü", "n", "1", "AWS.x", "v")
	f.Fuzz(func(t *testing.T, payload []byte, key, h1, v1, h2, v2 string) {
		ce := broker.CloudEvents{Prefix: Prefix, Source: "/fuzz"}
		rec := postbox.Record{Message: postbox.Message{ID: postbox.NewID(), Topic: "t", Type: "fuzz.event", Key: key, Payload: payload,
			Headers: map[string]string{h1: v1, h2: v2, "x-1": "1", "x-2": "2", "x-3": "3", "x-4": "4", "x-5": "5"}},
			CreatedAt: time.Unix(1700000000, 5).UTC()}
		m, err := Encode(ce, rec)
		if err != nil {
			return // refused: a header the CloudEvents mapping or the adapter reserves
		}
		if len(m.Attrs) > MaxAttributes {
			t.Fatalf("%d attributes; SQS allows %d", len(m.Attrs), MaxAttributes)
		}
		if !ValidText(m.Body) || m.Body == "" {
			t.Fatalf("body %q is not text SQS accepts", m.Body)
		}
		for n, v := range m.Attrs {
			if !validAttrName(n) || !ValidText(v) || v == "" {
				t.Fatalf("attribute %q = %q is not one SQS accepts", n, v)
			}
		}
		e, err := Decode(ce, m.Body, m.Attrs)
		if err != nil {
			t.Fatal(err)
		}
		if e.Message.ID != rec.ID || e.Message.Key != key || !bytes.Equal(e.Message.Payload, payload) || !e.Time.Equal(rec.CreatedAt) {
			t.Fatalf("decoded id %s key %q payload %q time %v; want %s %q %q %v", e.Message.ID, e.Message.Key, e.Message.Payload, e.Time,
				rec.ID, key, payload, rec.CreatedAt)
		}
		for k, v := range rec.Headers {
			if e.Message.Headers[k] != v {
				t.Fatalf("header %q is %q after the round trip; want %q", k, e.Message.Headers[k], v)
			}
		}
		if len(e.Message.Headers) != len(rec.Headers) {
			t.Fatalf("headers %v after the round trip; want %v", e.Message.Headers, rec.Headers)
		}
	})
}

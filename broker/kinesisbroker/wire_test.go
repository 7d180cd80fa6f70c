package kinesisbroker

import (
	"bytes"
	"testing"
	"time"

	"github.com/postbox-go/postbox"
)

// FuzzRoundTrip: whatever the payload, key and headers, a record Encode accepts comes back from Decode as it was
// sent, and its partition key is one Kinesis takes.
func FuzzRoundTrip(f *testing.F) {
	f.Add([]byte(`{"n":1}`), "k", "X-Tenant", "acme")
	f.Add([]byte(`{"a": "<b>&"}`), "", "content-type", "application/json")
	f.Add([]byte{0, 0xff}, "clé ü", "traceparent", "00-x-y-01")
	f.Fuzz(func(t *testing.T, payload []byte, key, h, v string) {
		rec := postbox.Record{Message: postbox.Message{ID: postbox.NewID(), Topic: "t", Type: "fuzz.event", Key: key, Payload: payload,
			Headers: map[string]string{h: v, "n": "1"}}, CreatedAt: time.Unix(1700000000, 5).UTC()}
		data, err := Encode(rec, "/fuzz")
		if err != nil {
			return
		}
		e, err := Decode(data)
		if err != nil {
			t.Fatal(err)
		}
		want := map[string]string{}
		for k, v := range rec.Headers {
			if v != "" || (k != "content-type" && k != "traceparent" && k != "tracestate") {
				want[k] = v
			}
		}
		if e.Message.ID != rec.ID || e.Message.Key != key || !bytes.Equal(e.Message.Payload, payload) || !e.Time.Equal(rec.CreatedAt) || e.Source != "/fuzz" {
			t.Fatalf("decoded id %s key %q payload %q time %v source %q; want %s %q %q %v", e.Message.ID, e.Message.Key, e.Message.Payload,
				e.Time, e.Source, rec.ID, key, payload, rec.CreatedAt)
		}
		for k, v := range want {
			if e.Message.Headers[k] != v {
				t.Fatalf("header %q is %q after the round trip; want %q", k, e.Message.Headers[k], v)
			}
		}
		if pk := partitionKey(rec); pk == "" || len([]rune(pk)) > MaxPartitionKeyLen {
			t.Fatalf("partition key %q: Kinesis takes 1 to %d characters", pk, MaxPartitionKeyLen)
		}
	})
}

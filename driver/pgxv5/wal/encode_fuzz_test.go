package wal

import (
	"bytes"
	"maps"
	"testing"
	"time"

	"github.com/postbox-go/postbox"
	"github.com/postbox-go/postbox/driver"
)

// FuzzDecode: whatever bytes a role writes into the WAL with the table set's prefix, Decode returns an error or a
// record that Enqueue would have accepted, and that record encodes and decodes to itself, signed or not.
func FuzzDecode(f *testing.F) {
	created := time.Date(2026, 1, 2, 3, 4, 5, 6000, time.UTC)
	for _, r := range []driver.Record{
		{Message: driver.Message{ID: "0190f6e4-3b7a-7c3d-8e4f-123456789abc", Topic: "orders", Key: "o-1", Type: "order.created",
			Payload: []byte(`{"n":1}`), Headers: map[string]string{"traceparent": "00-ab-cd-01"}}, CreatedAt: created},
		{Message: driver.Message{ID: "0190f6e4-3b7a-7c3d-8e4f-123456789abd", Topic: "t", Type: "x", AvailableAt: created.Add(time.Hour)}, CreatedAt: created},
	} {
		b, err := Encode(r)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
		f.Add(seal(bytes.Repeat([]byte("k"), MinSecretBytes), "postbox:orders", b))
	}
	f.Add([]byte{Version, 0xff, 0xff, 0xff, 0xff, 0x7f})
	f.Fuzz(func(t *testing.T, content []byte) {
		r, err := Decode(content)
		if err != nil {
			return
		}
		if err := postbox.Message(r.Message).Validate(); err != nil {
			t.Fatalf("Decode returned a record Enqueue refuses: %v", err)
		}
		b, err := Encode(r)
		if err != nil {
			t.Fatalf("Encode of a decoded record: %v", err)
		}
		key := bytes.Repeat([]byte("k"), MinSecretBytes)
		for _, c := range [][]byte{b, seal(key, "postbox:t", b)} {
			again, err := Decode(c)
			if err != nil {
				t.Fatalf("a decoded record, encoded again, does not decode: %v", err)
			}
			if again.ID != r.ID || again.Topic != r.Topic || again.Key != r.Key || again.Type != r.Type ||
				!bytes.Equal(again.Payload, r.Payload) || !maps.Equal(again.Headers, r.Headers) ||
				!again.CreatedAt.Equal(r.CreatedAt) || !again.AvailableAt.Equal(r.AvailableAt) {
				t.Fatalf("round trip changed the record:\n got %+v\nwant %+v", again.Message, r.Message)
			}
		}
		if !verify(key, "postbox:t", seal(key, "postbox:t", b)) || verify(key, "postbox:u", seal(key, "postbox:t", b)) {
			t.Fatal("a sealed message does not verify for its own prefix only")
		}
	})
}

package postbox

import (
	"context"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/postbox-go/postbox/driver"
)

// validationOnly is a driver for exercising validation: it reports every write it is asked to make, which after
// a refusal must be none.
type validationOnly struct {
	driver.Driver[struct{}]
	inserted *int
}

func (v validationOnly) Capabilities() driver.Capabilities {
	return driver.Capabilities{Dialect: "none"}
}
func (v validationOnly) Store(driver.Names) (driver.Store[struct{}], error) {
	return validationStore{inserted: v.inserted}, nil
}

type validationStore struct {
	driver.Store[struct{}]
	inserted *int
}

func (s validationStore) Insert(_ context.Context, _ struct{}, recs []driver.Record) error {
	*s.inserted += len(recs)
	return nil
}

// FuzzEnqueueValidation: whatever a user passes, Enqueue either refuses it before writing, or writes a message
// whose fields every broker and column can carry.
func FuzzEnqueueValidation(f *testing.F) {
	f.Add("", "orders", "order.created", "k", []byte("{}"), "traceparent", "00-ab-cd-01")
	f.Add("0190f6e4-3b7a-7c3d-8e4f-123456789abc", "orders", "t", "", []byte{0, 255}, "x-tenant", "acme")
	f.Add("not-a-uuid", "", "", "\xff", []byte(nil), "bad name", "a\r\nb")
	f.Add("", "o\x00", "ce-type", "k", []byte("x"), "ce-id", "v")
	f.Fuzz(func(t *testing.T, id, topic, typ, key string, payload []byte, hname, hval string) {
		inserted := 0
		c, err := NewClient[struct{}](validationOnly{inserted: &inserted}, &Config{MaxPayloadBytes: 64})
		if err != nil {
			t.Fatal(err)
		}
		m := Message{ID: id, Topic: topic, Type: typ, Key: key, Payload: payload, Headers: map[string]string{hname: hval}}
		_, err = c.Enqueue(context.Background(), struct{}{}, m)
		if err != nil {
			if inserted != 0 {
				t.Fatalf("refused message was written: %v", err)
			}
			return
		}
		if inserted != 1 {
			t.Fatalf("accepted message written %d times", inserted)
		}
		for _, s := range []string{topic, typ, key, hval} {
			if !utf8.ValidString(s) || strings.ContainsFunc(s, isControl) {
				t.Fatalf("accepted a field with invalid UTF-8 or a control character: %q", s)
			}
		}
		if topic == "" || typ == "" || len(payload) > 64 || !validHeaderName(hname) {
			t.Fatalf("accepted %+v", m)
		}
		if id != "" {
			if _, err := parseUUID(id); err != nil {
				t.Fatalf("accepted ID %q", id)
			}
		}
	})
}

// FuzzParseUUID: parsing accepts exactly the canonical form, and its output parses to itself.
func FuzzParseUUID(f *testing.F) {
	f.Add(NewID())
	f.Add("0190F6E4-3B7A-7C3D-8E4F-123456789ABC")
	f.Add("0190f6e4-3b7a-7c3d-8e4f-123456789abg")
	f.Fuzz(func(t *testing.T, s string) {
		got, err := parseUUID(s)
		if err != nil {
			return
		}
		if !strings.EqualFold(got, s) || strings.ToLower(got) != got {
			t.Fatalf("parseUUID(%q) = %q", s, got)
		}
		if again, err := parseUUID(got); err != nil || again != got {
			t.Fatalf("not idempotent: %q -> %q, %v", got, again, err)
		}
	})
}

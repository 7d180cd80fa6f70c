package watermillbridge_test

import (
	"maps"
	"strings"
	"testing"
	"time"

	"github.com/ThreeDotsLabs/watermill"
	"github.com/ThreeDotsLabs/watermill/message"
	"github.com/postbox-go/postbox"
	"github.com/postbox-go/postbox/broker/brokertest"
	watermillbridge "github.com/postbox-go/postbox/broker/watermillbridge"
)

func TestMappingRoundTrip(t *testing.T) {
	for _, m := range []watermillbridge.Mapping{{}, {Prefix: "cloudEvents_", Source: "/billing"}, {NameKey: "name"}} {
		rec := brokertest.Records("orders", 2, 2)[1]
		msg, err := m.Message(rec)
		if err != nil {
			t.Fatal(err)
		}
		if msg.UUID != rec.ID {
			t.Errorf("%+v: UUID %q, want the message ID %q", m, msg.UUID, rec.ID)
		}
		prefix := m.Prefix
		if prefix == "" {
			prefix = watermillbridge.DefaultPrefix
		}
		for attr, want := range map[string]string{"id": rec.ID, "type": rec.Type, "partitionkey": rec.Key, "subject": rec.Key,
			"specversion": "1.0", "time": rec.CreatedAt.UTC().Format(time.RFC3339Nano)} {
			if got := msg.Metadata.Get(prefix + attr); got != want {
				t.Errorf("%+v: metadata %s%s = %q, want %q", m, prefix, attr, got, want)
			}
		}
		if m.NameKey != "" && msg.Metadata.Get(m.NameKey) != rec.Type {
			t.Errorf("%+v: metadata %s = %q, want the type", m, m.NameKey, msg.Metadata.Get(m.NameKey))
		}
		if m.Key(msg) != rec.Key || m.Type(msg) != rec.Type {
			t.Errorf("%+v: Key %q, Type %q; want %q, %q", m, m.Key(msg), m.Type(msg), rec.Key, rec.Type)
		}
		got, err := m.Delivered(msg)
		if err != nil {
			t.Fatal(err)
		}
		if got.ID != rec.ID || got.Type != rec.Type || got.Key != rec.Key || string(got.Payload) != string(rec.Payload) ||
			!maps.Equal(got.Headers, rec.Headers) {
			t.Errorf("%+v: delivered %+v, want the record's fields %+v", m, got, rec.Message)
		}
	}
}

func TestMappingRefusesHeaderOnNameKey(t *testing.T) {
	rec := brokertest.Records("orders", 1, 1)[0]
	rec.Headers["name"] = "x"
	if _, err := (watermillbridge.Mapping{NameKey: "name"}).Message(rec); err == nil || !strings.Contains(err.Error(), "NameKey") {
		t.Fatalf("Message with a header named like the NameKey = %v, want an error", err)
	}
}

func TestMappingDeliveredPlainMessage(t *testing.T) {
	m := watermillbridge.Mapping{NameKey: "name"}
	msg := message.NewMessage(watermill.NewUUID(), []byte("hi"))
	msg.Metadata.Set("name", "OrderPlaced")
	msg.Metadata.Set("correlation_id", "c-1")
	got, err := m.Delivered(msg)
	if err != nil {
		t.Fatal(err)
	}
	if got.ID != msg.UUID || got.Type != "OrderPlaced" || string(got.Payload) != "hi" ||
		!maps.Equal(got.Headers, map[string]string{"correlation_id": "c-1"}) {
		t.Fatalf("delivered %+v; want ID = UUID, type from the name metadata, other metadata as headers", got)
	}

	msg.UUID = ""
	if _, err := m.Delivered(msg); err == nil || !strings.Contains(err.Error(), "UUID") {
		t.Fatalf("Delivered of a message without UUID or CloudEvents = %v, want an error", err)
	}

	bad := message.NewMessage(watermill.NewUUID(), nil)
	bad.Metadata.Set("ce_specversion", "0.3")
	bad.Metadata.Set("ce_id", "x")
	if _, err := m.Delivered(bad); err == nil || !strings.Contains(err.Error(), "0.3") {
		t.Fatalf("Delivered of a CloudEvent of another version = %v, want an error", err)
	}
}

func TestMappingProduced(t *testing.T) {
	m := watermillbridge.Mapping{}
	msg := message.NewMessage(watermill.NewUUID(), []byte(`{"total":42}`))
	m.SetType(msg, "invoice.created")
	m.SetKey(msg, "order-7")
	msg.Metadata.Set("ce_id", "copied from the incoming message")
	msg.Metadata.Set("traceparent", "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01")
	got, err := m.Produced(msg, "invoices")
	if err != nil {
		t.Fatal(err)
	}
	want := postbox.Message{ID: msg.UUID, Topic: "invoices", Type: "invoice.created", Key: "order-7", Payload: msg.Payload,
		Headers: map[string]string{"traceparent": "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"}}
	if got.ID != want.ID || got.Topic != want.Topic || got.Type != want.Type || got.Key != want.Key ||
		string(got.Payload) != string(want.Payload) || !maps.Equal(got.Headers, want.Headers) {
		t.Fatalf("Produced = %+v, want %+v", got, want)
	}

	noType := message.NewMessage(watermill.NewUUID(), nil)
	if _, err := m.Produced(noType, "invoices"); err == nil || !strings.Contains(err.Error(), "SetType") {
		t.Errorf("Produced without a type = %v, want an error saying how to set it", err)
	}
	if got, err := (watermillbridge.Mapping{NameKey: "name"}).Produced(withMeta(noType, "name", "InvoiceCreated"), "i"); err != nil || got.Type != "InvoiceCreated" {
		t.Errorf("Produced with the NameKey metadata = %+v, %v; want type InvoiceCreated", got, err)
	}
	ulid := message.NewMessage(watermill.NewULID(), nil)
	m.SetType(ulid, "t")
	if _, err := m.Produced(ulid, "invoices"); err == nil || !strings.Contains(err.Error(), "NewUUID") {
		t.Errorf("Produced with a ULID = %v, want an error asking for a UUID", err)
	}
	empty := message.NewMessage("", nil)
	m.SetType(empty, "t")
	if got, err := m.Produced(empty, "invoices"); err != nil || got.ID != "" {
		t.Errorf("Produced without UUID = %+v, %v; want an empty ID for Enqueue to fill", got, err)
	}
}

func withMeta(msg *message.Message, k, v string) *message.Message {
	c := msg.Copy()
	c.Metadata.Set(k, v)
	return c
}

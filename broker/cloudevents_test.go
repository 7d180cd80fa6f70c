package broker_test

import (
	"bytes"
	"errors"
	"maps"
	"strings"
	"testing"
	"time"

	"github.com/postbox-go/postbox"
	"github.com/postbox-go/postbox/broker"
)

var bindings = map[string]broker.CloudEvents{
	"HTTP":      {Prefix: broker.PrefixHTTP, PercentEncode: true},
	"Kafka":     {Prefix: broker.PrefixKafka, Source: "urn:test:kafka"},
	"AMQP":      {Prefix: broker.PrefixAMQP},
	"AMQPColon": {Prefix: "cloudEvents:"},
	"MQTT":      {Prefix: broker.PrefixMQTT},
}

func sampleRecord() postbox.Record {
	return postbox.Record{
		Message: postbox.Message{
			ID: "01890a5d-ac96-774b-bcce-b302099a8057", Topic: "orders", Key: "commande 42/é", Type: "order.created",
			Payload: []byte{0, 1, 2, 0xff},
			Headers: map[string]string{"traceparent": "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
				"tracestate": "congo=t61rcWkgMzE", "content-type": "application/json", "X-Tenant": "acme"},
		},
		CreatedAt: time.Date(2024, 5, 6, 7, 8, 9, 123456789, time.FixedZone("CEST", 2*3600)),
	}
}

func TestEncodeHTTP(t *testing.T) {
	r := sampleRecord()
	h, body, err := broker.CloudEvents{Prefix: broker.PrefixHTTP, Source: "/billing", PercentEncode: true}.Encode(r)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]string{
		"ce-specversion":  "1.0",
		"ce-id":           r.ID,
		"ce-source":       "/billing",
		"ce-type":         "order.created",
		"ce-time":         "2024-05-06T05:08:09.123456789Z",
		"ce-subject":      "commande%2042/%C3%A9",
		"ce-partitionkey": "commande%2042/%C3%A9",
		"traceparent":     r.Headers["traceparent"],
		"tracestate":      r.Headers["tracestate"],
		"content-type":    "application/json",
		"X-Tenant":        "acme",
	}
	if !maps.Equal(h, want) {
		t.Fatalf("headers:\n got %v\nwant %v", h, want)
	}
	if !bytes.Equal(body, r.Payload) {
		t.Fatalf("body %v, want the payload %v", body, r.Payload)
	}
}

func TestEncodeDefaultsAndOmissions(t *testing.T) {
	r := postbox.Record{Message: postbox.Message{ID: "id-1", Type: "t"}}
	h, _, err := broker.CloudEvents{Prefix: broker.PrefixKafka}.Encode(r)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]string{"ce_specversion": "1.0", "ce_id": "id-1", "ce_source": "postbox", "ce_type": "t"}
	if !maps.Equal(h, want) {
		t.Fatalf("headers %v, want %v (no time without CreatedAt, no subject without Key)", h, want)
	}
}

func TestEncodeRefuses(t *testing.T) {
	for name, tc := range map[string]struct {
		ce  broker.CloudEvents
		rec postbox.Record
	}{
		"no ID":                 {broker.CloudEvents{Prefix: "ce-"}, postbox.Record{Message: postbox.Message{Type: "t"}}},
		"no Type":               {broker.CloudEvents{Prefix: "ce-"}, postbox.Record{Message: postbox.Message{ID: "x"}}},
		"prefixed header":       {broker.CloudEvents{Prefix: "ce-"}, rec(map[string]string{"CE-Thing": "v"})},
		"AMQP prefixed header":  {broker.CloudEvents{Prefix: broker.PrefixAMQP}, rec(map[string]string{"cloudevents_x": "v"})},
		"MQTT attribute header": {broker.CloudEvents{}, rec(map[string]string{"Type": "v"})},
	} {
		t.Run(name, func(t *testing.T) {
			if _, _, err := tc.ce.Encode(tc.rec); err == nil {
				t.Fatal("Encode accepted it")
			}
		})
	}
}

func rec(h map[string]string) postbox.Record {
	return postbox.Record{Message: postbox.Message{ID: "x", Type: "t", Headers: h}}
}

func TestRoundTrip(t *testing.T) {
	for name, ce := range bindings {
		t.Run(name, func(t *testing.T) {
			r := sampleRecord()
			h, body, err := ce.Encode(r)
			if err != nil {
				t.Fatal(err)
			}
			e, err := ce.Decode(h, body)
			if err != nil {
				t.Fatal(err)
			}
			checkRoundTrip(t, r, e)
			wantSource := ce.Source
			if wantSource == "" {
				wantSource = broker.DefaultSource
			}
			if e.Source != wantSource {
				t.Fatalf("source %q, want %q", e.Source, wantSource)
			}
		})
	}
}

func checkRoundTrip(t *testing.T, r postbox.Record, e broker.Event) {
	t.Helper()
	m := e.Message
	if m.ID != r.ID || m.Type != r.Type || m.Key != r.Key || !bytes.Equal(m.Payload, r.Payload) ||
		!maps.Equal(m.Headers, r.Headers) || !e.Time.Equal(r.CreatedAt) {
		t.Fatalf("round trip changed the message:\n got %+v time %v\nwant %+v time %v", m, e.Time, r.Message, r.CreatedAt)
	}
}

func TestDecodeCaseInsensitivePrefix(t *testing.T) {
	// HTTP servers canonicalise header names: Ce-Id, Ce-Specversion.
	h := map[string]string{"Ce-Specversion": "1.0", "Ce-Id": "a", "Ce-Type": "t%20x", "Ce-Subject": "k", "X-Y": "z"}
	e, err := broker.CloudEvents{Prefix: broker.PrefixHTTP, PercentEncode: true}.Decode(h, nil)
	if err != nil {
		t.Fatal(err)
	}
	if e.Message.ID != "a" || e.Message.Type != "t x" || e.Message.Key != "k" || e.Message.Headers["X-Y"] != "z" {
		t.Fatalf("decoded %+v", e.Message)
	}
}

func TestDecodeKeepsForeignAttributes(t *testing.T) {
	h := map[string]string{"ce-specversion": "1.0", "ce-id": "a", "ce-type": "t", "ce-dataschema": "urn:s"}
	e, err := broker.CloudEvents{Prefix: "ce-"}.Decode(h, nil)
	if err != nil {
		t.Fatal(err)
	}
	if e.Message.Headers["ce-dataschema"] != "urn:s" {
		t.Fatalf("headers %v, want ce-dataschema kept", e.Message.Headers)
	}
}

func TestDecodeRefuses(t *testing.T) {
	ok := map[string]string{"ce-specversion": "1.0", "ce-id": "a", "ce-type": "t"}
	with := func(k, v string) map[string]string {
		h := maps.Clone(ok)
		if v == "" {
			delete(h, k)
		} else {
			h[k] = v
		}
		return h
	}
	for name, tc := range map[string]struct {
		h    map[string]string
		want string
	}{
		"plain message":    {map[string]string{"content-type": "text/plain"}, "no ce-specversion"},
		"spec 0.3":         {with("ce-specversion", "0.3"), `"0.3"`},
		"no id":            {with("ce-id", ""), "no ce-id"},
		"no type":          {with("ce-type", ""), "no ce-type"},
		"bad time":         {with("ce-time", "yesterday"), "RFC 3339"},
		"duplicate":        {with("CE-ID", "b"), "twice"},
		"bad escape":       {with("ce-type", "a%zz"), "bad escape"},
		"truncated escape": {with("ce-type", "a%4"), "truncated"},
	} {
		t.Run(name, func(t *testing.T) {
			_, err := broker.CloudEvents{Prefix: "ce-", PercentEncode: true}.Decode(tc.h, nil)
			if !errors.Is(err, broker.ErrNotCloudEvent) || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("Decode error %v; want ErrNotCloudEvent saying %q", err, tc.want)
			}
		})
	}
}

// FuzzCloudEventsRoundTrip checks that every record Encode accepts decodes to the same message, on every binding.
func FuzzCloudEventsRoundTrip(f *testing.F) {
	f.Add("01890a5d-ac96-774b-bcce-b302099a8057", "order.created", "k 1/é", []byte(`{"a":1}`), "traceparent", "00-x-y-01", int64(1715000000123456789), uint8(0))
	f.Add("x", "t", "", []byte{}, "content-type", "", int64(0), uint8(4))
	f.Add("%41", "\"%\x00\xff", "%%", []byte{0}, "Ce-Id", "v", int64(-1), uint8(2))
	names := []string{"HTTP", "Kafka", "AMQP", "AMQPColon", "MQTT"}
	f.Fuzz(func(t *testing.T, id, typ, key string, payload []byte, hname, hval string, nanos int64, binding uint8) {
		ce := bindings[names[int(binding)%len(names)]]
		r := postbox.Record{Message: postbox.Message{ID: id, Type: typ, Key: key, Payload: payload,
			Headers: map[string]string{hname: hval, "fixed": "v"}}}
		if nanos != 0 {
			r.CreatedAt = time.Unix(0, nanos)
		}
		h, body, err := ce.Encode(r)
		if err != nil {
			return // refused input is tested elsewhere
		}
		e, err := ce.Decode(h, body)
		if err != nil {
			t.Fatalf("Decode of Encode output failed: %v\nheaders %q", err, h)
		}
		checkRoundTrip(t, r, e)
	})
}

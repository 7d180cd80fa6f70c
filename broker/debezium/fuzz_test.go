package debezium_test

import (
	"encoding/json"
	"testing"
	"unicode/utf8"

	"github.com/postbox-go/postbox/broker/debezium"
)

// FuzzRoute: whatever the payload, Route does not panic, a value is valid JSON, and a payload the router keeps as
// a string reads back as that payload.
func FuzzRoute(f *testing.F) {
	for _, s := range []string{`{}`, `{"a": [1, "x"]}`, `{"a": null, "b": [[], [1]]}`, `{"n": 1e400, "m": -0, "k": 12345678901234567890}`,
		`{"x": [{"a": 1}, {"b": [2]}, null]}`, "a\"b\\c\n\x01\u2028", `[1, 2]`, ` {"lead": true}`, "\xff"} {
		f.Add(s, true)
		f.Add(s, false)
	}
	f.Fuzz(func(t *testing.T, payload string, expand bool) {
		r, err := debezium.New(debezium.Options{ExpandJSONPayload: expand})
		if err != nil {
			t.Fatal(err)
		}
		row := debezium.Row{"id": "1", "aggregatetype": "t", "aggregateid": "k", "type": "x", "payload": payload}
		m, err := r.Route(row)
		if err != nil {
			t.Fatalf("Route: %v", err)
		}
		if !json.Valid(m.Value) {
			t.Fatalf("value %q is not JSON", m.Value)
		}
		var back string
		if json.Unmarshal(m.Value, &back) == nil && utf8.ValidString(payload) && back != payload {
			t.Fatalf("payload %q was written as the string %q", payload, back)
		}
	})
}

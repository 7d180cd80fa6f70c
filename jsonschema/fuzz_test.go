package jsonschema_test

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/postbox-go/postbox/jsonschema"
)

// FuzzSchema: a schema from a config file and a payload from a producer are both untrusted. Compiling any
// document and checking any payload never panics; a payload that is not JSON is always refused; and an error
// never quotes the payload, which may hold personal data.
func FuzzSchema(f *testing.F) {
	f.Add(`{"type":"object","required":["id"],"properties":{"id":{"type":"string","pattern":"^o-[0-9]+$"}}}`, `{"id":"o-1"}`)
	f.Add(`{"type":["integer","null"],"minimum":1,"multipleOf":0.5}`, `1e400`)
	f.Add(`{"items":{"enum":[1,"a",null,{"x":[]}]},"uniqueItems":true,"maxItems":3}`, `[1,1.0,"a"]`)
	f.Add(`{"additionalProperties":false,"properties":{"a":true},"minProperties":1}`, `{"a":0,"secret-ssn":"123-45-6789"}`)
	f.Add(`{"const":{"a":[1,2]},"maxLength":-1}`, `{"a":[1,2]}`)
	f.Add(`false`, `"x"`)
	f.Fuzz(func(t *testing.T, schema, payload string) {
		s, err := jsonschema.Compile([]byte(schema))
		if err != nil {
			if !strings.HasPrefix(err.Error(), "jsonschema: ") {
				t.Fatalf("Compile error %q does not say where it comes from", err)
			}
			return
		}
		err = s.Check([]byte(payload))
		if !json.Valid([]byte(payload)) {
			if err == nil {
				t.Fatalf("payload %q is not JSON but passed", payload)
			}
			return
		}
		if err != nil && len(payload) >= 8 && strings.Contains(err.Error(), payload) {
			t.Fatalf("error %q quotes the payload", err)
		}
	})
}

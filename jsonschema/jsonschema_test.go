package jsonschema_test

import (
	"strings"
	"testing"

	"github.com/postbox-go/postbox/jsonschema"
)

const order = `{
  "$schema": "https://json-schema.org/draft/2020-12/schema",
  "title": "order.created",
  "type": "object",
  "required": ["id", "total", "items"],
  "additionalProperties": false,
  "properties": {
    "id":     {"type": "string", "pattern": "^o-[0-9]+$"},
    "total":  {"type": "number", "exclusiveMinimum": 0, "multipleOf": 0.01},
    "status": {"enum": ["new", "paid"]},
    "items":  {"type": "array", "minItems": 1, "uniqueItems": true, "items": {"$ref": "#/$defs/item"}},
    "note":   {"type": ["string", "null"], "maxLength": 5}
  },
  "$defs": {
    "item": {"type": "object", "required": ["sku"], "properties": {"sku": {"type": "string", "minLength": 2}, "qty": {"type": "integer", "minimum": 1}}}
  }
}`

func TestCheck(t *testing.T) {
	s, err := jsonschema.Compile([]byte(order))
	if err != nil {
		t.Fatal(err)
	}
	valid := []string{
		`{"id":"o-1","total":9.99,"items":[{"sku":"ab","qty":2}]}`,
		`{"id":"o-1","total":1,"status":"paid","items":[{"sku":"ab"}],"note":null}`,
		`{"id":"o-1","total":1,"items":[{"sku":"ab","qty":2.0}],"note":"héllo"}`,
	}
	for _, p := range valid {
		if err := s.Check([]byte(p)); err != nil {
			t.Errorf("Check(%s) = %v; want valid", p, err)
		}
	}
	invalid := map[string]string{
		`{"id":"o-1","total":1}`:                                           `payload is missing the required property "items"`,
		`{"id":"x","total":1,"items":[{"sku":"ab"}]}`:                      `payload/id does not match the pattern ^o-[0-9]+$`,
		`{"id":"o-1","total":0,"items":[{"sku":"ab"}]}`:                    `payload/total must be above 0`,
		`{"id":"o-1","total":1.001,"items":[{"sku":"ab"}]}`:                `payload/total is not a multiple of 1/100`,
		`{"id":"o-1","total":"1","items":[{"sku":"ab"}]}`:                  `payload/total is a string; want number`,
		`{"id":"o-1","total":1,"items":[]}`:                                `payload/items has 0 items; the minimum is 1`,
		`{"id":"o-1","total":1,"items":[{"sku":"ab"},{"sku":"ab"}]}`:       `unique`,
		`{"id":"o-1","total":1,"items":[{"sku":"a"}]}`:                     `payload/items/0/sku has 1 characters; the minimum is 2`,
		`{"id":"o-1","total":1,"items":[{"sku":"ab","qty":1.5}]}`:          `payload/items/0/qty is a number; want integer`,
		`{"id":"o-1","total":1,"items":[{"sku":"ab"}],"status":"lost"}`:    `payload/status is not one of the 2 values`,
		`{"id":"o-1","total":1,"items":[{"sku":"ab"}],"extra":true}`:       `property "extra", which the schema does not allow`,
		`{"id":"o-1","total":1,"items":[{"sku":"ab"}],"note":"too long!"}`: `payload/note has 9 characters; the maximum is 5`,
		`[1]`:         `payload is an array; want object`,
		`{"id":"o-1"`: `not valid JSON`,
		`{"id":"o-1","total":1,"items":[{"sku":"ab"}]} {}`: `after the first JSON value`,
		``: `empty`,
	}
	for p, want := range invalid {
		err := s.Check([]byte(p))
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("Check(%s) = %v; want an error containing %q", p, err, want)
		}
	}
}

// TestStandardKeywords: the keywords producers' validators in other languages apply are applied here too, with
// the same results: combinators, references, and patterns in ECMA-262 syntax.
func TestStandardKeywords(t *testing.T) {
	cases := []struct {
		schema      string
		valid, fail string
	}{
		{`{"oneOf":[{"type":"integer"},{"type":"number","minimum":10}]}`, `3`, `12`},
		{`{"anyOf":[{"required":["a"]},{"required":["b"]}]}`, `{"b":1}`, `{}`},
		{`{"$defs":{"id":{"type":"string"}},"properties":{"id":{"$ref":"#/$defs/id"}}}`, `{"id":"x"}`, `{"id":1}`},
		{`{"if":{"properties":{"kind":{"const":"card"}}},"then":{"required":["last4"]}}`, `{"kind":"cash"}`, `{"kind":"card"}`},
		// \d and \p{L} are ECMA-262; the lookahead is not RE2 at all.
		{`{"type":"string","pattern":"^(?=.*\\d)[a-z\\d]{3}$"}`, `"ab1"`, `"abc"`},
		{`{"dependentRequired":{"card":["cvv"]}}`, `{"cash":1}`, `{"card":1}`},
	}
	for _, c := range cases {
		s, err := jsonschema.Compile([]byte(c.schema))
		if err != nil {
			t.Errorf("Compile(%s): %v", c.schema, err)
			continue
		}
		if err := s.Check([]byte(c.valid)); err != nil {
			t.Errorf("schema %s refused %s: %v", c.schema, c.valid, err)
		}
		if err := s.Check([]byte(c.fail)); err == nil {
			t.Errorf("schema %s accepted %s", c.schema, c.fail)
		}
	}
}

func TestCompileRefusesInvalidSchemas(t *testing.T) {
	bad := map[string]string{
		`{"type":"decimal"}`: `type`,
		`{"minLength":-1}`:   `minLength`,
		`{"pattern":"("}`:    `pattern`,
		`{"multipleOf":0}`:   `multipleOf`,
		`"object"`:           `jsonschema: `,
		`{"type":"object",}`: `not valid JSON`,
		`{"additionalProperties":{"type":"strin"}}`: `additionalProperties`,
		`{"required":"id"}`:                         `required`,
		// Nothing is loaded from outside the schema: no files, no network.
		`{"$ref":"file:///etc/passwd"}`:                    `outside the schema`,
		`{"$ref":"https://example.com/order.schema.json"}`: `outside the schema`,
	}
	for doc, want := range bad {
		_, err := jsonschema.Compile([]byte(doc))
		if err == nil || !strings.Contains(err.Error(), want) || !strings.HasPrefix(err.Error(), "jsonschema: ") {
			t.Errorf("Compile(%s) = %v; want an error containing %q", doc, err, want)
		}
	}
}

func TestBooleanSchemasAndConst(t *testing.T) {
	s := jsonschema.MustCompile(`{"properties":{"v":{"const":{"a":[1,2]}},"never":false},"additionalProperties":{"type":"integer"}}`)
	if err := s.Check([]byte(`{"v":{"a":[1,2.0]},"n":3}`)); err != nil {
		t.Fatalf("valid payload refused: %v", err)
	}
	for p, want := range map[string]string{
		`{"v":{"a":[2,1]}}`: `payload/v does not equal the constant`,
		`{"never":1}`:       `payload/never is not allowed`,
		`{"n":"x"}`:         `payload/n is a string; want integer`,
	} {
		if err := s.Check([]byte(p)); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("Check(%s) = %v; want %q", p, err, want)
		}
	}
}

// TestErrorsNeverQuoteValues: a payload may hold personal data, and the error goes to logs and dead letters.
func TestErrorsNeverQuoteValues(t *testing.T) {
	s := jsonschema.MustCompile(`{"properties":{"ssn":{"type":"string","pattern":"^[0-9]{3}$","maxLength":3},"age":{"maximum":150},"c":{"enum":["a"]},"k":{"const":"a"}}}`)
	for _, p := range []string{`{"ssn":"123-45-6789"}`, `{"age":123456789}`, `{"c":"secret-value"}`, `{"k":"secret-value"}`} {
		err := s.Check([]byte(p))
		if err == nil {
			t.Fatalf("Check(%s) passed", p)
		}
		for _, v := range []string{"123-45-6789", "123456789", "secret-value"} {
			if strings.Contains(err.Error(), v) {
				t.Errorf("Check(%s) error %q quotes the value", p, err)
			}
		}
	}
}

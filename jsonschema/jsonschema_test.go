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
    "items":  {"type": "array", "minItems": 1, "uniqueItems": true,
               "items": {"type": "object", "required": ["sku"], "properties": {"sku": {"type": "string", "minLength": 2}, "qty": {"type": "integer", "minimum": 1}}}},
    "note":   {"type": ["string", "null"], "maxLength": 5}
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
		`{"id":"o-1","total":1}`:                                           `missing the required property "items"`,
		`{"id":"x","total":1,"items":[{"sku":"ab"}]}`:                      `payload/id does not match`,
		`{"id":"o-1","total":0,"items":[{"sku":"ab"}]}`:                    `payload/total is 0; it must be above 0`,
		`{"id":"o-1","total":1.001,"items":[{"sku":"ab"}]}`:                `multiple of`,
		`{"id":"o-1","total":"1","items":[{"sku":"ab"}]}`:                  `payload/total is a string; want number`,
		`{"id":"o-1","total":1,"items":[]}`:                                `has 0 items; the minimum is 1`,
		`{"id":"o-1","total":1,"items":[{"sku":"ab"},{"sku":"ab"}]}`:       `unique`,
		`{"id":"o-1","total":1,"items":[{"sku":"a"}]}`:                     `payload/items/0/sku has 1 characters`,
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

func TestCompileRefusesWhatItCannotCheck(t *testing.T) {
	bad := map[string]string{
		`{"type":"object","oneOf":[{"required":["a"]}]}`:    `keyword "oneOf" is not supported`,
		`{"properties":{"a":{"$ref":"#/defs/a"}}}`:          `#/properties/a/$ref: keyword "$ref" is not supported`,
		`{"type":"decimal"}`:                                `unknown type "decimal"`,
		`{"minLength":-1}`:                                  `must be a non-negative integer`,
		`{"pattern":"("}`:                                   `#/pattern`,
		`{"multipleOf":0}`:                                  `positive number`,
		`"object"`:                                          `must be an object or a boolean`,
		`{"type":"object",}`:                                `not valid JSON`,
		`{"enum":[]}`:                                       `non-empty list`,
		`{"additionalProperties":{"type":"strin"}}`:         `unknown type "strin"`,
		`{"required":"id"}`:                                 `list of property names`,
		`{"properties":{"a":{"items":{"minimum":"zero"}}}}`: `#/properties/a/items/minimum must be a number`,
	}
	for doc, want := range bad {
		_, err := jsonschema.Compile([]byte(doc))
		if err == nil || !strings.Contains(err.Error(), want) {
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

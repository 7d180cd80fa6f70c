// Package jsonschema checks event payloads against a JSON Schema, for the Postbox event registry. It validates with
// github.com/santhosh-tekuri/jsonschema/v6, which passes the JSON-Schema-Test-Suite, so a payload is judged as the
// validators of producers in other languages judge it:
//
//   - drafts 4, 6, 7, 2019-09 and 2020-12, chosen by the schema's $schema (default: 2020-12);
//   - every validation keyword, $ref and $defs included; a $ref must point inside the schema, since nothing is
//     loaded from files or the network;
//   - pattern and patternProperties in ECMA-262 syntax, the syntax the standard names;
//   - format as an annotation, not an assertion, as the 2020-12 draft prescribes.
//
// Errors say where the payload breaks the schema and which rule it breaks, without quoting the payload's values,
// which may be personal data.
//
// A compiled *Schema is a postbox.Contract:
//
//	schema, err := jsonschema.Compile([]byte(`{"type":"object","required":["id"],"properties":{"id":{"type":"string"}}}`))
//	reg, err := postbox.NewRegistry(postbox.EventType{Type: "order.created", Topic: "orders", Payload: schema})
package jsonschema

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/dlclark/regexp2"
	sjs "github.com/santhosh-tekuri/jsonschema/v6"
	"github.com/santhosh-tekuri/jsonschema/v6/kind"
	"golang.org/x/text/language"
	"golang.org/x/text/message"
)

// Schema is a compiled schema. It is safe for concurrent use.
type Schema struct {
	s *sjs.Schema
}

// schemaURL names the schema being compiled; errors about the schema show locations relative to it.
const schemaURL = "postbox:schema.json"

// Compile parses and compiles a JSON Schema document. It returns an error saying where a document is not a valid
// schema, or refers to anything outside itself.
func Compile(doc []byte) (*Schema, error) {
	v, err := decode(doc)
	if err != nil {
		return nil, fmt.Errorf("jsonschema: the schema is not valid JSON: %v", err)
	}
	c := sjs.NewCompiler()
	c.UseLoader(noLoader{})
	c.UseRegexpEngine(ecmaRegexp)
	if err := c.AddResource(schemaURL, v); err != nil {
		return nil, fmt.Errorf("jsonschema: %v", err)
	}
	s, err := c.Compile(schemaURL)
	var sve *sjs.SchemaValidationError
	var ve *sjs.ValidationError
	switch {
	case errors.As(err, &sve) && errors.As(sve.Err, &ve):
		// The document breaks its draft's metaschema: say where, once, rather than the whole tree.
		leaf := first(ve)
		return nil, fmt.Errorf("jsonschema: the schema at %s: %s", pointer("#", leaf.InstanceLocation),
			leaf.ErrorKind.LocalizedString(message.NewPrinter(language.English)))
	case err != nil:
		return nil, fmt.Errorf("jsonschema: %s", strings.ReplaceAll(err.Error(), schemaURL, "schema"))
	}
	return &Schema{s: s}, nil
}

// MustCompile is Compile for schemas fixed in the program; it panics on an error.
func MustCompile(doc string) *Schema {
	s, err := Compile([]byte(doc))
	if err != nil {
		panic(err)
	}
	return s
}

// Check validates a payload against the schema. The error names the first violation and where it is, as a JSON
// Pointer below "payload".
func (s *Schema) Check(payload []byte) error {
	v, err := decode(payload)
	if err != nil {
		return fmt.Errorf("payload is not valid JSON: %v", err)
	}
	err = s.s.Validate(v)
	var ve *sjs.ValidationError
	if errors.As(err, &ve) {
		return describe(first(ve))
	}
	return err
}

// decode reads exactly one JSON value, numbers kept exact.
func decode(b []byte) (any, error) {
	if len(bytes.TrimSpace(b)) == 0 {
		return nil, errors.New("it is empty")
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return nil, err
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return nil, errors.New("it has data after the first JSON value")
	}
	return v, nil
}

// first returns the first leaf of the error tree: the innermost rule that failed.
func first(ve *sjs.ValidationError) *sjs.ValidationError {
	for len(ve.Causes) > 0 {
		ve = ve.Causes[0]
	}
	return ve
}

// describe words one violation without the payload's values.
func describe(ve *sjs.ValidationError) error {
	at := pointer("payload", ve.InstanceLocation)
	var msg string
	switch k := ve.ErrorKind.(type) {
	case *kind.Type:
		msg = fmt.Sprintf("is %s; want %s", article(k.Got), strings.Join(k.Want, " or "))
	case *kind.Required:
		msg = fmt.Sprintf("is missing the required property %q", k.Missing[0])
	case *kind.AdditionalProperties:
		msg = fmt.Sprintf("has the property %q, which the schema does not allow", k.Properties[0])
	case *kind.Enum:
		msg = fmt.Sprintf("is not one of the %d values the schema allows", len(k.Want))
	case *kind.Const:
		msg = "does not equal the constant the schema sets"
	case *kind.Pattern:
		msg = fmt.Sprintf("does not match the pattern %s", k.Want)
	case *kind.MinLength:
		msg = bound(k.Got, "characters", "minimum", k.Want)
	case *kind.MaxLength:
		msg = bound(k.Got, "characters", "maximum", k.Want)
	case *kind.MinItems:
		msg = bound(k.Got, "items", "minimum", k.Want)
	case *kind.MaxItems:
		msg = bound(k.Got, "items", "maximum", k.Want)
	case *kind.MinProperties:
		msg = bound(k.Got, "properties", "minimum", k.Want)
	case *kind.MaxProperties:
		msg = bound(k.Got, "properties", "maximum", k.Want)
	case *kind.UniqueItems:
		msg = fmt.Sprintf("has equal items at %d and %d; the schema wants them unique", k.Duplicates[0], k.Duplicates[1])
	case *kind.Minimum:
		msg = fmt.Sprintf("is below the minimum %s", k.Want.RatString())
	case *kind.Maximum:
		msg = fmt.Sprintf("is above the maximum %s", k.Want.RatString())
	case *kind.ExclusiveMinimum:
		msg = fmt.Sprintf("must be above %s", k.Want.RatString())
	case *kind.ExclusiveMaximum:
		msg = fmt.Sprintf("must be below %s", k.Want.RatString())
	case *kind.MultipleOf:
		msg = fmt.Sprintf("is not a multiple of %s", k.Want.RatString())
	case *kind.FalseSchema:
		msg = "is not allowed by the schema"
	default:
		msg = fmt.Sprintf("fails the schema's %q rule", strings.Join(k.KeywordPath(), "/"))
	}
	return fmt.Errorf("%s %s", at, msg)
}

// bound words a count outside its limit: "has 0 items; the minimum is 1".
func bound(got int, what, limit string, want int) string {
	return fmt.Sprintf("has %d %s; the %s is %d", got, what, limit, want)
}

// pointer returns the JSON Pointer of tokens below root.
func pointer(root string, tokens []string) string {
	for _, tok := range tokens {
		root += "/" + strings.NewReplacer("~", "~0", "/", "~1").Replace(tok)
	}
	return root
}

func article(typ string) string {
	if strings.IndexByte("aeiou", typ[0]) >= 0 {
		return "an " + typ
	}
	return "a " + typ
}

// noLoader refuses every reference outside the schema: a schema from a config file must not make the process read
// files or fetch URLs.
type noLoader struct{}

func (noLoader) Load(url string) (any, error) {
	return nil, fmt.Errorf("%s is outside the schema; only references within it (#/$defs/...) are allowed", url)
}

// matchTimeout bounds one pattern match: ECMA-262 patterns backtrack, and a payload must not stall a producer.
// A match that runs out of time fails.
const matchTimeout = 100 * time.Millisecond

// ecmaRegexp compiles patterns as ECMA-262 regular expressions, the dialect JSON Schema specifies.
func ecmaRegexp(s string) (sjs.Regexp, error) {
	re, err := regexp2.Compile(s, regexp2.ECMAScript)
	if err != nil {
		return nil, err
	}
	re.MatchTimeout = matchTimeout
	return (*ecma)(re), nil
}

type ecma regexp2.Regexp

func (re *ecma) MatchString(s string) bool {
	ok, err := (*regexp2.Regexp)(re).MatchString(s)
	return err == nil && ok
}

func (re *ecma) String() string { return (*regexp2.Regexp)(re).String() }

// Package jsonschema checks event payloads against a JSON Schema, for the Postbox event registry. It implements the
// validation keywords event contracts use, and refuses a schema that uses any other, so that no rule is silently
// ignored:
//
//   - type (one name or a list), enum, const
//   - object: properties, required, additionalProperties (boolean or schema), minProperties, maxProperties
//   - array: items (one schema), minItems, maxItems, uniqueItems
//   - string: minLength, maxLength (in characters), pattern (Go regexp syntax)
//   - number: minimum, maximum, exclusiveMinimum, exclusiveMaximum (numbers, as in draft 2020-12), multipleOf
//   - annotations, which are accepted and not checked: $schema, $id, $comment, title, description, default,
//     examples, format, deprecated, readOnly, writeOnly
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
	"math/big"
	"regexp"
	"slices"
	"sort"
	"strings"
	"unicode/utf8"
)

// Schema is a compiled schema. It is safe for concurrent use.
type Schema struct {
	types      []string // empty: any
	enum       []any
	constant   *any
	properties map[string]*Schema
	required   []string
	addl       *Schema // nil: any additional property
	noAddl     bool    // additionalProperties: false
	minProps   *int
	maxProps   *int
	items      *Schema
	minItems   *int
	maxItems   *int
	unique     bool
	minLen     *int
	maxLen     *int
	pattern    *regexp.Regexp
	min, max   *big.Rat
	exMin      *big.Rat
	exMax      *big.Rat
	multipleOf *big.Rat
	never      bool // the schema false
}

var annotations = map[string]bool{"$schema": true, "$id": true, "$comment": true, "title": true, "description": true,
	"default": true, "examples": true, "format": true, "deprecated": true, "readOnly": true, "writeOnly": true}

var typeNames = []string{"object", "array", "string", "number", "integer", "boolean", "null"}

// Compile parses a JSON Schema document. It returns an error naming the first keyword it does not support or
// whose value is malformed, with the path to it.
func Compile(doc []byte) (*Schema, error) {
	v, err := decode(doc)
	if err != nil {
		return nil, fmt.Errorf("jsonschema: the schema is not valid JSON: %w", err)
	}
	return compile(v, "#")
}

// MustCompile is Compile for schemas fixed in the program; it panics on an error.
func MustCompile(doc string) *Schema {
	s, err := Compile([]byte(doc))
	if err != nil {
		panic(err)
	}
	return s
}

func decode(b []byte) (any, error) {
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		if errors.Is(err, io.EOF) {
			return nil, errors.New("it is empty")
		}
		return nil, err
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return nil, errors.New("it has data after the first JSON value")
	}
	return v, nil
}

func compile(v any, path string) (*Schema, error) {
	if b, ok := v.(bool); ok {
		return &Schema{never: !b}, nil
	}
	m, ok := v.(map[string]any)
	if !ok {
		return nil, fmt.Errorf("jsonschema: %s: a schema must be an object or a boolean", path)
	}
	s := &Schema{}
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		if err := s.keyword(k, m[k], path+"/"+k); err != nil {
			return nil, err
		}
	}
	return s, nil
}

func (s *Schema) keyword(k string, v any, path string) error {
	bad := func(want string) error { return fmt.Errorf("jsonschema: %s must be %s", path, want) }
	var err error
	switch k {
	case "type":
		switch t := v.(type) {
		case string:
			s.types = []string{t}
		case []any:
			for _, e := range t {
				name, ok := e.(string)
				if !ok {
					return bad("a type name or a list of them")
				}
				s.types = append(s.types, name)
			}
		default:
			return bad("a type name or a list of them")
		}
		for _, t := range s.types {
			if !slices.Contains(typeNames, t) {
				return fmt.Errorf("jsonschema: %s: unknown type %q; use one of %s", path, t, strings.Join(typeNames, ", "))
			}
		}
	case "enum":
		list, ok := v.([]any)
		if !ok || len(list) == 0 {
			return bad("a non-empty list")
		}
		s.enum = list
	case "const":
		s.constant = &v
	case "properties":
		props, ok := v.(map[string]any)
		if !ok {
			return bad("an object of schemas")
		}
		s.properties = map[string]*Schema{}
		for name, ps := range props {
			if s.properties[name], err = compile(ps, path+"/"+name); err != nil {
				return err
			}
		}
	case "required":
		list, ok := v.([]any)
		if !ok {
			return bad("a list of property names")
		}
		for _, e := range list {
			name, ok := e.(string)
			if !ok {
				return bad("a list of property names")
			}
			s.required = append(s.required, name)
		}
	case "additionalProperties":
		if b, ok := v.(bool); ok {
			s.noAddl = !b
			return nil
		}
		s.addl, err = compile(v, path)
	case "items":
		s.items, err = compile(v, path)
	case "uniqueItems":
		b, ok := v.(bool)
		if !ok {
			return bad("a boolean")
		}
		s.unique = b
	case "pattern":
		str, ok := v.(string)
		if !ok {
			return bad("a regular expression")
		}
		if s.pattern, err = regexp.Compile(str); err != nil {
			return fmt.Errorf("jsonschema: %s: %w", path, err)
		}
	case "minProperties", "maxProperties", "minItems", "maxItems", "minLength", "maxLength":
		n, ok := count(v)
		if !ok {
			return bad("a non-negative integer")
		}
		*map[string]**int{"minProperties": &s.minProps, "maxProperties": &s.maxProps, "minItems": &s.minItems,
			"maxItems": &s.maxItems, "minLength": &s.minLen, "maxLength": &s.maxLen}[k] = &n
	case "minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum", "multipleOf":
		r, ok := number(v)
		if !ok {
			return bad("a number")
		}
		if k == "multipleOf" && r.Sign() <= 0 {
			return bad("a positive number")
		}
		*map[string]**big.Rat{"minimum": &s.min, "maximum": &s.max, "exclusiveMinimum": &s.exMin,
			"exclusiveMaximum": &s.exMax, "multipleOf": &s.multipleOf}[k] = r
	default:
		if annotations[k] {
			return nil
		}
		return fmt.Errorf("jsonschema: %s: keyword %q is not supported; see the package documentation for the keywords Postbox checks", path, k)
	}
	return err
}

func count(v any) (int, bool) {
	r, ok := number(v)
	if !ok || !r.IsInt() || r.Sign() < 0 || !r.Num().IsInt64() {
		return 0, false
	}
	return int(r.Num().Int64()), true
}

func number(v any) (*big.Rat, bool) {
	n, ok := v.(json.Number)
	if !ok {
		return nil, false
	}
	return new(big.Rat).SetString(n.String())
}

// Check validates a payload against the schema. The error names the first violation and where it is, as a JSON
// pointer; it does not quote the payload.
func (s *Schema) Check(payload []byte) error {
	v, err := decode(payload)
	if err != nil {
		return fmt.Errorf("payload is not valid JSON: %v", err)
	}
	return s.validate(v, "")
}

func where(path string) string {
	if path == "" {
		return "payload"
	}
	return "payload" + path
}

func (s *Schema) validate(v any, path string) error {
	if s.never {
		return fmt.Errorf("%s is not allowed", where(path))
	}
	if len(s.types) > 0 && !slices.ContainsFunc(s.types, func(t string) bool { return hasType(v, t) }) {
		return fmt.Errorf("%s is %s; want %s", where(path), typeOf(v), strings.Join(s.types, " or "))
	}
	if s.constant != nil && !equal(v, *s.constant) {
		return fmt.Errorf("%s does not equal the constant the schema requires", where(path))
	}
	if s.enum != nil && !slices.ContainsFunc(s.enum, func(e any) bool { return equal(v, e) }) {
		return fmt.Errorf("%s is not one of the %d values the schema allows", where(path), len(s.enum))
	}
	switch x := v.(type) {
	case map[string]any:
		return s.validateObject(x, path)
	case []any:
		return s.validateArray(x, path)
	case string:
		n := utf8.RuneCountInString(x)
		if s.minLen != nil && n < *s.minLen {
			return fmt.Errorf("%s has %d characters; the minimum is %d", where(path), n, *s.minLen)
		}
		if s.maxLen != nil && n > *s.maxLen {
			return fmt.Errorf("%s has %d characters; the maximum is %d", where(path), n, *s.maxLen)
		}
		if s.pattern != nil && !s.pattern.MatchString(x) {
			return fmt.Errorf("%s does not match the pattern %s", where(path), s.pattern)
		}
	case json.Number:
		return s.validateNumber(x, path)
	}
	return nil
}

func (s *Schema) validateObject(o map[string]any, path string) error {
	for _, name := range s.required {
		if _, ok := o[name]; !ok {
			return fmt.Errorf("%s is missing the required property %q", where(path), name)
		}
	}
	if s.minProps != nil && len(o) < *s.minProps {
		return fmt.Errorf("%s has %d properties; the minimum is %d", where(path), len(o), *s.minProps)
	}
	if s.maxProps != nil && len(o) > *s.maxProps {
		return fmt.Errorf("%s has %d properties; the maximum is %d", where(path), len(o), *s.maxProps)
	}
	names := make([]string, 0, len(o))
	for k := range o {
		names = append(names, k)
	}
	sort.Strings(names) // report the same violation every time
	for _, k := range names {
		sub := path + "/" + pointerEscape(k)
		if ps, ok := s.properties[k]; ok {
			if err := ps.validate(o[k], sub); err != nil {
				return err
			}
			continue
		}
		if s.noAddl {
			return fmt.Errorf("%s has the property %q, which the schema does not allow", where(path), k)
		}
		if s.addl != nil {
			if err := s.addl.validate(o[k], sub); err != nil {
				return err
			}
		}
	}
	return nil
}

func (s *Schema) validateArray(a []any, path string) error {
	if s.minItems != nil && len(a) < *s.minItems {
		return fmt.Errorf("%s has %d items; the minimum is %d", where(path), len(a), *s.minItems)
	}
	if s.maxItems != nil && len(a) > *s.maxItems {
		return fmt.Errorf("%s has %d items; the maximum is %d", where(path), len(a), *s.maxItems)
	}
	for i, e := range a {
		if s.items != nil {
			if err := s.items.validate(e, fmt.Sprintf("%s/%d", path, i)); err != nil {
				return err
			}
		}
		if s.unique {
			for j := range i {
				if equal(a[j], e) {
					return fmt.Errorf("%s has equal items at %d and %d; the schema wants them unique", where(path), j, i)
				}
			}
		}
	}
	return nil
}

func (s *Schema) validateNumber(n json.Number, path string) error {
	r, _ := new(big.Rat).SetString(n.String())
	switch {
	case s.min != nil && r.Cmp(s.min) < 0:
		return fmt.Errorf("%s is %s; the minimum is %s", where(path), n, s.min.RatString())
	case s.max != nil && r.Cmp(s.max) > 0:
		return fmt.Errorf("%s is %s; the maximum is %s", where(path), n, s.max.RatString())
	case s.exMin != nil && r.Cmp(s.exMin) <= 0:
		return fmt.Errorf("%s is %s; it must be above %s", where(path), n, s.exMin.RatString())
	case s.exMax != nil && r.Cmp(s.exMax) >= 0:
		return fmt.Errorf("%s is %s; it must be below %s", where(path), n, s.exMax.RatString())
	case s.multipleOf != nil && !new(big.Rat).Quo(r, s.multipleOf).IsInt():
		return fmt.Errorf("%s is %s; it must be a multiple of %s", where(path), n, s.multipleOf.RatString())
	}
	return nil
}

func pointerEscape(s string) string {
	return strings.ReplaceAll(strings.ReplaceAll(s, "~", "~0"), "/", "~1")
}

func typeOf(v any) string {
	switch x := v.(type) {
	case nil:
		return "null"
	case bool:
		return "a boolean"
	case string:
		return "a string"
	case json.Number:
		if hasType(x, "integer") {
			return "an integer"
		}
		return "a number"
	case []any:
		return "an array"
	default:
		return "an object"
	}
}

func hasType(v any, t string) bool {
	switch x := v.(type) {
	case nil:
		return t == "null"
	case bool:
		return t == "boolean"
	case string:
		return t == "string"
	case json.Number:
		if t == "number" {
			return true
		}
		r, ok := new(big.Rat).SetString(x.String())
		return t == "integer" && ok && r.IsInt()
	case []any:
		return t == "array"
	case map[string]any:
		return t == "object"
	}
	return false
}

// equal compares two decoded JSON values, numbers by value (1 equals 1.0).
func equal(a, b any) bool {
	switch x := a.(type) {
	case json.Number:
		y, ok := b.(json.Number)
		if !ok {
			return false
		}
		ra, ok1 := new(big.Rat).SetString(x.String())
		rb, ok2 := new(big.Rat).SetString(y.String())
		return ok1 && ok2 && ra.Cmp(rb) == 0
	case []any:
		y, ok := b.([]any)
		if !ok || len(x) != len(y) {
			return false
		}
		for i := range x {
			if !equal(x[i], y[i]) {
				return false
			}
		}
		return true
	case map[string]any:
		y, ok := b.(map[string]any)
		if !ok || len(x) != len(y) {
			return false
		}
		for k, v := range x {
			w, ok := y[k]
			if !ok || !equal(v, w) {
				return false
			}
		}
		return true
	default:
		return a == b
	}
}

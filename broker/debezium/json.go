package debezium

import (
	"encoding/base64"
	"encoding/json"
	"errors"
	"math"
	"strconv"
	"strings"
	"unicode/utf8"
)

// jsonValue is a value as Kafka's JsonConverter (schemas disabled) writes it: scalar, object or array.
type jsonValue interface{ isJSON() }

type scalar struct{ v any } // nil, string, []byte, bool, int, int32, int64, float64

type field struct {
	name string
	v    jsonValue
}

type object []field

type array []jsonValue

func (scalar) isJSON() {}
func (object) isJSON() {}
func (array) isJSON()  {}

// appendJSON writes v compactly, as Jackson writes the tree JsonConverter builds: fields in schema order, a
// null for an absent optional field, strings escaped as Jackson escapes them, doubles as Java prints them and
// bytes in base64.
func appendJSON(b []byte, v jsonValue) []byte {
	switch x := v.(type) {
	case nil:
		return append(b, "null"...)
	case object:
		b = append(b, '{')
		for i, f := range x {
			if i > 0 {
				b = append(b, ',')
			}
			b = appendQuoted(b, f.name)
			b = append(b, ':')
			b = appendJSON(b, f.v)
		}
		return append(b, '}')
	case array:
		b = append(b, '[')
		for i, e := range x {
			if i > 0 {
				b = append(b, ',')
			}
			b = appendJSON(b, e)
		}
		return append(b, ']')
	case scalar:
		switch s := x.v.(type) {
		case nil:
			return append(b, "null"...)
		case string:
			return appendQuoted(b, s)
		case []byte:
			return appendQuoted(b, base64.StdEncoding.EncodeToString(s))
		case float64:
			if math.IsInf(s, 0) || math.IsNaN(s) {
				return appendQuoted(b, javaDouble(s)) // Jackson quotes non-numeric numbers
			}
			return append(b, javaDouble(s)...)
		default:
			return append(b, text(s)...)
		}
	}
	panic("debezium: unknown JSON value")
}

// appendQuoted writes s as a JSON string the way Jackson does: only '"', '\\' and control characters are
// escaped, the usual five by letter and the others as \u00XX in upper case; everything else is written as is.
// Text that is not UTF-8 has each bad byte replaced by U+FFFD, as Java's decoder does.
func appendQuoted(b []byte, s string) []byte {
	const hex = "0123456789ABCDEF"
	if !utf8.ValidString(s) {
		s = strings.ToValidUTF8(s, "\uFFFD")
	}
	b = append(b, '"')
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c == '"' || c == '\\':
			b = append(b, '\\', c)
		case c == '\b':
			b = append(b, '\\', 'b')
		case c == '\t':
			b = append(b, '\\', 't')
		case c == '\n':
			b = append(b, '\\', 'n')
		case c == '\f':
			b = append(b, '\\', 'f')
		case c == '\r':
			b = append(b, '\\', 'r')
		case c < 0x20:
			b = append(b, '\\', 'u', '0', '0', hex[c>>4], hex[c&0xF])
		default:
			b = append(b, c)
		}
	}
	return append(b, '"')
}

// javaDouble formats f as Java's Double.toString does (JDK 19 and later, which print the shortest digits that
// read back as f, like Go): plain notation with at least one fractional digit for 1e-3 <= |f| < 1e7, otherwise
// d.dddE±n.
func javaDouble(f float64) string {
	switch {
	case math.IsNaN(f):
		return "NaN"
	case math.IsInf(f, 1):
		return "Infinity"
	case math.IsInf(f, -1):
		return "-Infinity"
	case f == 0:
		if math.Signbit(f) {
			return "-0.0"
		}
		return "0.0"
	}
	e := strconv.FormatFloat(f, 'e', -1, 64) // -d.ddde±xx
	sign := ""
	if e[0] == '-' {
		sign, e = "-", e[1:]
	}
	mant, expText, _ := strings.Cut(e, "e")
	exp, _ := strconv.Atoi(expText)
	digits := strings.Replace(mant, ".", "", 1)
	abs := math.Abs(f)
	if abs >= 1e-3 && abs < 1e7 {
		var out string
		if exp >= 0 {
			if len(digits) <= exp+1 {
				out = digits + strings.Repeat("0", exp+1-len(digits)) + ".0"
			} else {
				out = digits[:exp+1] + "." + digits[exp+1:]
			}
		} else {
			out = "0." + strings.Repeat("0", -exp-1) + digits
		}
		return sign + out
	}
	frac := digits[1:]
	if frac == "" {
		frac = "0"
	}
	return sign + digits[:1] + "." + frac + "E" + strconv.Itoa(exp)
}

// The expansion of table.expand.json.payload: the router parses the payload with Jackson, infers a Connect
// schema from the document and converts it into a Struct; JsonConverter then writes the Struct. Any failure
// leaves the payload a string.

type node struct {
	kind  byte // 'o', 'a', 's', 'n', 'b', 'z' (null)
	s     string
	b     bool
	keys  []string
	vals  []*node
	elems []*node
}

// schema kinds: 's' string, 'b' boolean, 'i' int32, 'l' int64, 'f' float64, 'a' array, 'o' struct.
type schema struct {
	kind   byte
	elem   *schema
	fields []schemaField
}

type schemaField struct {
	name string
	s    *schema
}

type expandError struct{}

// expandJSON returns the value the router writes for an expanded payload, and false when the router keeps the
// payload a string: text that does not start with '{' or '[' (no leading space allowed), JSON Jackson cannot
// read, an array at the top, or a document no schema fits (mixed arrays, numbers of different sizes).
func expandJSON(payload string) (v jsonValue, ok bool) {
	if !strings.HasPrefix(payload, "{") {
		return nil, false // a top-level array parses, but it does not fit the Struct the router builds
	}
	dec := json.NewDecoder(strings.NewReader(payload))
	dec.UseNumber()
	n, err := parseNode(dec)
	if err != nil {
		return nil, false
	}
	defer func() {
		if r := recover(); r != nil {
			if _, is := r.(expandError); !is {
				panic(r)
			}
			v, ok = nil, false
		}
	}()
	s := schemaOf(n)
	return dataOf(n, s), true
}

func parseNode(dec *json.Decoder) (*node, error) {
	tok, err := dec.Token()
	if err != nil {
		return nil, err
	}
	switch t := tok.(type) {
	case json.Delim:
		if t == '{' {
			n := &node{kind: 'o'}
			for dec.More() {
				kt, err := dec.Token()
				if err != nil {
					return nil, err
				}
				k, _ := kt.(string)
				v, err := parseNode(dec)
				if err != nil {
					return nil, err
				}
				if i := indexOf(n.keys, k); i >= 0 { // Jackson keeps the first position and the last value
					n.vals[i] = v
					continue
				}
				n.keys = append(n.keys, k)
				n.vals = append(n.vals, v)
			}
			_, err := dec.Token()
			return n, err
		}
		n := &node{kind: 'a'}
		for dec.More() {
			e, err := parseNode(dec)
			if err != nil {
				return nil, err
			}
			n.elems = append(n.elems, e)
		}
		_, err := dec.Token()
		return n, err
	case string:
		return &node{kind: 's', s: t}, nil
	case json.Number:
		return &node{kind: 'n', s: string(t)}, nil
	case bool:
		return &node{kind: 'b', b: t}, nil
	}
	return &node{kind: 'z'}, nil
}

func indexOf(keys []string, k string) int {
	for i, x := range keys {
		if x == k {
			return i
		}
	}
	return -1
}

// numberKind is the schema Jackson's node gives a number: int32 or int64 for integers that fit, float64
// for the rest (a wider integer becomes a BigInteger, which no Connect field accepts: 'x').
func numberKind(lit string) byte {
	if strings.ContainsAny(lit, ".eE") {
		return 'f'
	}
	i, err := strconv.ParseInt(lit, 10, 64)
	switch {
	case err != nil:
		return 'x'
	case i >= math.MinInt32 && i <= math.MaxInt32:
		return 'i'
	}
	return 'l'
}

// schemaOf infers the schema the router does with its default null and empty-array behaviours ("ignore"):
// NULL fields and empty arrays are left out of a struct; an array's elements take the schema of its first
// non-null element, or, for objects, the union of the elements' fields.
func schemaOf(n *node) *schema {
	switch n.kind {
	case 's':
		return &schema{kind: 's'}
	case 'b':
		return &schema{kind: 'b'}
	case 'n':
		k := numberKind(n.s)
		if k == 'x' {
			k = 'f'
		}
		return &schema{kind: k}
	case 'a':
		if len(n.elems) == 0 {
			return nil
		}
		return &schema{kind: 'a', elem: elemSchema(n)}
	case 'o':
		s := &schema{kind: 'o'}
		for i, k := range n.keys {
			if fs := schemaOf(n.vals[i]); fs != nil {
				s.fields = append(s.fields, schemaField{k, fs})
			}
		}
		return s
	}
	return nil
}

func elemSchema(n *node) *schema {
	var sample *node
	var numKind byte
	for _, e := range n.elems {
		if e.kind == 'z' {
			continue
		}
		if sample == nil {
			sample = e
		}
		if e.kind != sample.kind {
			panic(expandError{}) // not a homogenous array
		}
		if e.kind == 'n' {
			k := schemaOf(e).kind
			if numKind == 0 {
				numKind = k
			} else if k != numKind {
				panic(expandError{}) // numbers of different types
			}
		}
	}
	if sample == nil {
		panic(expandError{}) // only nulls: no member schema
	}
	if sample.kind != 'o' {
		s := schemaOf(sample)
		if s == nil {
			panic(expandError{})
		}
		return s
	}
	var merged *schema
	for _, e := range n.elems {
		if e.kind != 'o' {
			continue
		}
		s := schemaOf(e)
		if merged == nil {
			merged = s
			continue
		}
		for _, f := range s.fields {
			if !hasSchemaField(merged, f.name) {
				merged.fields = append(merged.fields, f)
			}
		}
	}
	return merged
}

func hasSchemaField(s *schema, name string) bool {
	for _, f := range s.fields {
		if f.name == name {
			return true
		}
	}
	return false
}

// dataOf converts n into a value of schema s, failing where Connect's Struct.put would refuse the value.
func dataOf(n *node, s *schema) jsonValue {
	if n.kind == 'z' {
		return nil
	}
	switch s.kind {
	case 'o':
		if n.kind != 'o' {
			panic(expandError{})
		}
		out := make(object, 0, len(s.fields))
		for _, f := range s.fields {
			var v jsonValue
			if i := indexOf(n.keys, f.name); i >= 0 {
				v = dataOf(n.vals[i], f.s)
			}
			out = append(out, field{f.name, v})
		}
		return out
	case 'a':
		if n.kind != 'a' {
			panic(expandError{})
		}
		out := make(array, 0, len(n.elems))
		for _, e := range n.elems {
			out = append(out, dataOf(e, s.elem))
		}
		return out
	case 's':
		if n.kind != 's' {
			panic(expandError{})
		}
		return scalar{n.s}
	case 'b':
		if n.kind != 'b' {
			panic(expandError{})
		}
		return scalar{n.b}
	}
	if n.kind != 'n' || numberKind(n.s) != s.kind {
		panic(expandError{})
	}
	switch s.kind {
	case 'i', 'l':
		i, _ := strconv.ParseInt(n.s, 10, 64)
		return scalar{i}
	}
	f, err := strconv.ParseFloat(n.s, 64)
	if err != nil && !isRange(err) {
		panic(expandError{})
	}
	return scalar{f}
}

// isRange reports a number too large for a double, which Jackson reads as an infinity.
func isRange(err error) bool { return errors.Is(err, strconv.ErrRange) }

package cli

import (
	"bytes"
	"fmt"
	"io"
	"strings"
	"unicode/utf8"
)

// unsafeRune reports the characters a terminal may act on instead of showing: C0 and C1 controls, DEL, and the
// bidirectional embeddings, overrides and isolates, which make text read differently from its bytes. The core
// refuses the same characters in message text; rows written before it did, a broker's error text in last_error,
// or another writer of the tables may still hold them.
func unsafeRune(r rune) bool {
	return r < 0x20 || r >= 0x7f && r <= 0x9f || r >= 0x202a && r <= 0x202e || r >= 0x2066 && r <= 0x2069
}

// printable returns s with every unsafe character and every byte of invalid UTF-8 written as a Go escape
// (\x1b, \u202e), so that text from the database printed to a terminal shows as text and does nothing else.
func printable(s string) string {
	if utf8.ValidString(s) && !strings.ContainsFunc(s, unsafeRune) {
		return s
	}
	var b strings.Builder
	for len(s) > 0 {
		r, size := utf8.DecodeRuneInString(s)
		switch {
		case r == utf8.RuneError && size == 1, r < 0x80 && unsafeRune(r):
			fmt.Fprintf(&b, `\x%02x`, s[0])
		case unsafeRune(r):
			fmt.Fprintf(&b, `\u%04x`, r)
		default:
			b.WriteString(s[:size])
		}
		s = s[size:]
	}
	return b.String()
}

// printableLines is printable for text of several lines, such as an error: its line breaks and tabs stay.
func printableLines(s string) string {
	lines := strings.Split(s, "\n")
	for i, l := range lines {
		parts := strings.Split(l, "\t")
		for j, p := range parts {
			parts[j] = printable(p)
		}
		lines[i] = strings.Join(parts, "\t")
	}
	return strings.Join(lines, "\n")
}

// checkFlagText refuses a flag's value that the core would refuse as message text, in the words the user typed.
func checkFlagText(flag, v string) error {
	switch {
	case !utf8.ValidString(v):
		return usageErrorf("%s %s: not valid UTF-8", flag, printable(v))
	case strings.ContainsFunc(v, unsafeRune):
		return usageErrorf("%s %s: contains a control character or a bidirectional override", flag, printable(v))
	}
	return nil
}

// escapeJSON rewrites the unsafe characters encoding/json leaves raw (C1 controls, DEL, bidirectional controls) as
// \u escapes. It is exact on JSON: outside strings, JSON has only ASCII punctuation, digits and letters.
func escapeJSON(b []byte) []byte {
	if !bytes.ContainsFunc(b, func(r rune) bool { return r >= 0x7f && unsafeRune(r) }) {
		return b
	}
	out := make([]byte, 0, len(b)+16)
	for len(b) > 0 {
		r, size := utf8.DecodeRune(b)
		if r >= 0x7f && unsafeRune(r) {
			out = fmt.Appendf(out, `\u%04x`, r)
		} else {
			out = append(out, b[:size]...)
		}
		b = b[size:]
	}
	return out
}

// jsonEscaper writes JSON through escapeJSON. The JSON log handler writes one whole record per Write.
type jsonEscaper struct{ w io.Writer }

func (j jsonEscaper) Write(p []byte) (int, error) {
	if _, err := j.w.Write(escapeJSON(p)); err != nil {
		return 0, err
	}
	return len(p), nil
}

package driver

import (
	"strings"
	"testing"
)

// FuzzIdentifier: an accepted identifier is plain ASCII letters, digits and underscores, so quoting it can never
// change the SQL around it; derived names never exceed the limit.
func FuzzIdentifier(f *testing.F) {
	for _, s := range []string{"postbox_outbox", "1bad", `x"; DROP TABLE t; --`, strings.Repeat("a", 64), "", "é"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		if err := ValidateIdentifier("table", s); err != nil {
			return
		}
		if s == "" || len(s) > MaxIdentifierLen || s[0] >= '0' && s[0] <= '9' {
			t.Fatalf("accepted %q", s)
		}
		for _, r := range s {
			if !(r == '_' || r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9') {
				t.Fatalf("accepted %q with %q", s, r)
			}
		}
		if q := QuoteIdent(s); q != `"`+s+`"` {
			t.Fatalf("QuoteIdent(%q) = %s", s, q)
		}
		for _, suffix := range []string{"_pending_idx", "_migrations"} {
			d := Derived(s, suffix)
			if len(d) > MaxIdentifierLen || !strings.HasSuffix(d, suffix) || ValidateIdentifier("derived", d) != nil {
				t.Fatalf("Derived(%q, %q) = %q", s, suffix, d)
			}
		}
	})
}

func TestDerivedKeepsDistinctNamesDistinct(t *testing.T) {
	a, b := strings.Repeat("a", 60)+"x", strings.Repeat("a", 60)+"y"
	if Derived(a, "_pending_idx") == Derived(b, "_pending_idx") {
		t.Fatal("two long table names derived the same index name")
	}
}

// FuzzQuoteIdent: whatever the name, quoting yields one quoted identifier that reads back as the name, so even a
// name that skipped validation could not end the identifier and add SQL.
func FuzzQuoteIdent(f *testing.F) {
	for _, s := range []string{"postbox_outbox", `x"; DROP TABLE t; --`, `""`, `"`, "", "é\x00"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		q := QuoteIdent(s)
		if len(q) < 2 || q[0] != '"' || q[len(q)-1] != '"' {
			t.Fatalf("QuoteIdent(%q) = %s is not enclosed in double quotes", s, q)
		}
		inner := q[1 : len(q)-1]
		var back strings.Builder
		for i := 0; i < len(inner); i++ {
			if inner[i] == '"' {
				if i+1 >= len(inner) || inner[i+1] != '"' {
					t.Fatalf("QuoteIdent(%q) = %s has a lone quote at %d: the identifier would end early", s, q, i+1)
				}
				i++
			}
			back.WriteByte(inner[i])
		}
		if back.String() != s {
			t.Fatalf("QuoteIdent(%q) = %s reads back as %q", s, q, back.String())
		}
	})
}

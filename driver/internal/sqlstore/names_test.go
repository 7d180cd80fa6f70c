package sqlstore

import (
	"strings"
	"testing"

	"github.com/postbox-go/postbox/driver"
)

// New is the last stop before SQL is built from names: it must refuse a name that is not a plain identifier,
// whoever calls it, and never build a statement from it.
func TestNewRefusesInvalidNames(t *testing.T) {
	for _, tc := range []struct {
		d Dialect
		n driver.Names
	}{
		{Postgres, driver.Names{Outbox: `evil"; DROP TABLE accounts; --`, Inbox: "inbox"}},
		{MySQL, driver.Names{Outbox: "outbox", Inbox: "inbox`; DROP TABLE accounts; --"}},
		{Postgres, driver.Names{Schema: "a'b", Outbox: "outbox", Inbox: "inbox"}},
		{SQLite, driver.Names{Outbox: "", Inbox: "inbox"}},
		{SQLite, driver.Names{Schema: "main", Outbox: "outbox", Inbox: "inbox"}},         // SQLite has no schemas
		{SQLite, driver.Names{Outbox: "outbox", Inbox: "inbox", Partitioned: true}},      // nor partitions
		{MySQL, driver.Names{Outbox: "same", Inbox: "same"}},                             // one table for both
		{Postgres, driver.Names{Outbox: strings.Repeat("x", 64), Inbox: "inbox"}},        // longer than 63
		{Postgres, driver.Names{Outbox: "outbox", Inbox: "inbox\x00"}},                   // a NUL
		{MySQL, driver.Names{Outbox: "outbox", Inbox: "inbox", Schema: "db\\'; --"}},     // a backslash escape
		{Postgres, driver.Names{Outbox: "1outbox", Inbox: "inbox"}},                      // a leading digit
		{SQLite, driver.Names{Outbox: "out box", Inbox: "inbox"}},                        // a space
		{MySQL, driver.Names{Outbox: "outbox", Inbox: "inbox", Schema: "information-s"}}, // a hyphen
	} {
		s, err := New[struct{}](nil, tc.d, tc.n)
		if err == nil || s != nil {
			t.Errorf("New(%s, %+v) = %v, %v; want an error and no store", tc.d.Capabilities().Dialect, tc.n, s, err)
		}
	}
	if _, err := New[struct{}](nil, MySQL, driver.Names{Schema: "app", Outbox: "outbox", Inbox: "inbox"}); err != nil {
		t.Fatalf("New with valid names: %v", err)
	}
}

// Names that migrations put into string literals are escaped for the dialect, so that a name can never end the
// literal, whatever reached the template.
func TestTemplateNamesAreEscaped(t *testing.T) {
	n := driver.Names{Schema: `s'\`, Outbox: `o'x\`, Inbox: "inbox"}
	for _, tc := range []struct {
		d                   Dialect
		schema, outbox, idx string
	}{
		{MySQL, `'s''\\'`, `'o''x\\'`, `'o''x\\_key_idx'`},
		{Postgres, `'s''\'`, `'o''x\'`, `'o''x\_key_idx'`},
		{SQLite, `'s''\'`, `'o''x\'`, `'o''x\_key_idx'`},
	} {
		data := templateData{d: tc.d, n: n}
		if got := data.SchemaName(); got != tc.schema {
			t.Errorf("%s SchemaName = %s, want %s", tc.d.Capabilities().Dialect, got, tc.schema)
		}
		if got := data.OutboxName(); got != tc.outbox {
			t.Errorf("%s OutboxName = %s, want %s", tc.d.Capabilities().Dialect, got, tc.outbox)
		}
		if got := data.IndexName("_key_idx"); got != tc.idx {
			t.Errorf("%s IndexName = %s, want %s", tc.d.Capabilities().Dialect, got, tc.idx)
		}
	}
}

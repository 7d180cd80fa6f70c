package sqlstore

import (
	"fmt"
	"strings"

	"github.com/postbox-go/postbox/driver"
)

// The SQL enqueue API (migration 6, with driver.Names.SQLAPI) validates messages in the database as Enqueue does
// in Go. Its limits are rendered into the migration from the driver package's constants, which the core's checks
// use too, so that the two cannot drift apart.

// sqlLimits are the limits the SQL API's templates see.
type sqlLimits struct {
	Topic, Type, Key, Headers, HeaderName, Header, Payload, NotifyMillis int
}

// Limits returns the message limits of driver, for the templates.
func (templateData) Limits() sqlLimits {
	return sqlLimits{Topic: driver.MaxTopicLen, Type: driver.MaxTypeLen, Key: driver.MaxKeyLen,
		Headers: driver.MaxHeaders, HeaderName: driver.MaxHeaderNameLen, Header: driver.MaxHeaderLen,
		Payload: driver.DefaultMaxPayloadBytes, NotifyMillis: driver.DefaultNotifyIntervalMillis}
}

// Func returns the quoted, qualified name of a routine of the SQL API: the outbox table's name with suffix, in
// the table's schema, so that every table set has its own.
func (t templateData) Func(suffix string) string { return t.OutboxTable(suffix) }

// FuncLiteral is the qualified name Func returns, as a string literal (for regclass casts).
func (t templateData) FuncLiteral(suffix string) string { return t.d.stringLiteral(t.Func(suffix)) }

// Channel is the table set's notification channel (driver.Names.Channel), as a string literal.
func (t templateData) Channel() string { return t.d.stringLiteral(t.n.Channel()) }

// WakeSetting is the name of the session setting in which PostgreSQL's SQL API remembers the last wake-up slot it
// found taken for this table set, as a string literal.
func (t templateData) WakeSetting() string {
	return t.d.stringLiteral("postbox.wake_" + strings.ToLower(t.n.Channel()))
}

// ControlClass is a PostgreSQL regular expression bracket matching the characters no text field may hold
// (driver.ControlRanges). NUL is left out: PostgreSQL text cannot hold it.
func (templateData) ControlClass() string {
	var b strings.Builder
	b.WriteString("[")
	for _, r := range driver.ControlRanges {
		lo := max(r[0], 1)
		fmt.Fprintf(&b, `\u%04x-\u%04x`, lo, r[1])
	}
	b.WriteString("]")
	return b.String()
}

// MySQLControlClass is ControlClass for MySQL and MariaDB regular expressions (PCRE), which write a character
// by its code point as \x{...}.
func (templateData) MySQLControlClass() string {
	var b strings.Builder
	b.WriteString("[")
	for _, r := range driver.ControlRanges {
		fmt.Fprintf(&b, `\\x{%04x}-\\x{%04x}`, r[0], r[1])
	}
	b.WriteString("]")
	return b.String()
}

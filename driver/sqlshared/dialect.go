// Package sqlshared holds the SQL that Postbox's drivers share: migrations, queries per dialect and a store built
// on a small connection interface. Drivers wrap their client library's connection and transaction types in Conn
// and Tx and get every store operation from NewStore.
package sqlshared

import (
	"fmt"
	"hash/fnv"
	"strconv"
	"strings"
	"time"

	"github.com/postbox-go/postbox/driver"
)

// Dialect is the SQL flavour of a database.
type Dialect struct {
	name string
}

// The supported dialects.
var (
	Postgres = Dialect{name: "postgres"}
	SQLite   = Dialect{name: "sqlite"}
	// MySQL is MySQL 8.0 and later, and MariaDB 10.6 and later: the versions with FOR UPDATE SKIP LOCKED. Tables
	// are InnoDB, schemas are databases, IDs are BINARY(16) and times are Unix microseconds (see docs/MYSQL.md).
	MySQL = Dialect{name: "mysql"}
)

// Name is the dialect's name as reported in driver.Capabilities.
func (d Dialect) Name() string { return d.name }

// Capabilities reports what the dialect supports.
func (d Dialect) Capabilities() driver.Capabilities {
	server := d == Postgres || d == MySQL
	return driver.Capabilities{Dialect: d.name, SkipLocked: server, Schemas: server, Partitions: server}
}

func (d Dialect) pg() bool { return d == Postgres }
func (d Dialect) my() bool { return d == MySQL }

// QuoteIdent quotes one identifier for the dialect: with backticks on MySQL, whose default SQL mode reads double
// quotes as strings, and with double quotes elsewhere.
func (d Dialect) QuoteIdent(s string) string {
	if d.my() {
		return "`" + strings.ReplaceAll(s, "`", "``") + "`"
	}
	return driver.QuoteIdent(s)
}

// ph returns the placeholder for the 1-based argument n.
func (d Dialect) ph(n int) string {
	if d.pg() {
		return "$" + strconv.Itoa(n)
	}
	return "?"
}

// Time converts t to the dialect's column value. SQLite and MySQL store Unix microseconds (UTC) so that
// comparisons are numeric and no connection setting (MySQL's parseTime, time_zone) can change a value.
func (d Dialect) Time(t time.Time) any {
	if d.pg() {
		return t.UTC()
	}
	return t.UnixMicro()
}

// table returns the quoted, schema-qualified name of table.
func (d Dialect) table(n driver.Names, table string) string {
	if n.Schema != "" {
		return d.QuoteIdent(n.Schema) + "." + d.QuoteIdent(table)
	}
	return d.QuoteIdent(table)
}

// lockKey derives the advisory lock key for one purpose on one table set.
func lockKey(n driver.Names, purpose string) int64 {
	h := fnv.New64a()
	fmt.Fprintf(h, "postbox\x00%s\x00%s\x00%s", n.Schema, n.Outbox, purpose)
	return int64(h.Sum64())
}

// inList renders "col IN (...)" for the record IDs ids starting at argument n, returning the SQL and its arguments.
func (d Dialect) inList(col string, ids []string, n int) (string, []any) {
	if d.pg() {
		return col + " = ANY(" + d.ph(n) + "::uuid[])", []any{ids}
	}
	var b strings.Builder
	args := make([]any, len(ids))
	b.WriteString(col + " IN (")
	for i, id := range ids {
		if i > 0 {
			b.WriteByte(',')
		}
		b.WriteByte('?')
		args[i] = d.idArg(id)
	}
	b.WriteByte(')')
	return b.String(), args
}

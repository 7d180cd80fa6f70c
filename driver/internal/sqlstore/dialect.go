package sqlstore

import (
	"context"
	"encoding/json"
	"fmt"
	"hash/fnv"
	"strings"
	"time"

	"github.com/postbox-go/postbox/driver"
)

// Dialect is the SQL of one database: Postgres, MySQL or SQLite. Each implementation holds every statement and
// conversion in which its database differs from the others.
type Dialect interface {
	// Capabilities reports what the database supports.
	Capabilities() driver.Capabilities
	// QuoteIdent quotes one identifier.
	QuoteIdent(s string) string
	// TryLock takes the lock for purpose on the table set n on the session c without waiting, and reports
	// whether it got it. The lock is held until Unlock or the end of the session (on PostgreSQL, in a transaction
	// that Unlock commits, so that it holds behind a transaction pooler too). SQLite has no such locks and always
	// gets it.
	TryLock(ctx context.Context, c Conn, n driver.Names, purpose string) (bool, error)
	// Unlock releases a lock TryLock took in the same session.
	Unlock(ctx context.Context, c Conn, n driver.Names, purpose string) error

	// ph returns the placeholder of the 1-based argument n.
	ph(n int) string
	// timeArg converts t to a time column's value; timeDest and nullTimeDest return a scan destination for one
	// and a function reading the scanned time (NULL reads as the zero time).
	timeArg(t time.Time) any
	timeDest() (func() time.Time, any)
	nullTimeDest() (func() time.Time, any)
	// idArg converts a canonical text UUID to an ID column's value; idDest scans one back as canonical text.
	idArg(id string) any
	idDest() (func() string, any)
	// inList renders "col IN (...)" for the IDs ids from argument n, with its arguments.
	inList(col string, ids []string, n int) (string, []any)
	// stringLiteral renders s as a string literal, for migration templates.
	stringLiteral(s string) string

	// recordCols is the select list of a record from the outbox aliased o.
	recordCols() string
	// claimQuery is the query claiming a batch from outbox, skipping skip topics; claimArgs returns its
	// arguments.
	claimQuery(outbox string, skip int) string
	// orderedClaimQuery is claimQuery for ordered relays: it takes only the head of each key (see
	// driver.OrderedClaimer), with the same arguments. Its cost must not depend on the planner's statistics
	// (DESIGN.md, "No cost by luck"): each dialect's says how it keeps to the records it walks.
	orderedClaimQuery(t orderedTable, deadHoldsKey bool, skip int) string
	// claimArgs are the arguments of claimQuery and orderedClaimQuery: the time, the limit and the topics to
	// skip, in the order their placeholders take them.
	claimArgs(now any, limit int, skip []string) []any
	// containsText renders the condition "col contains the text of argument n", literal and case-sensitive.
	containsText(col string, n int) string
	// minuteOf renders the Unix minute of the time column col, as an integer.
	minuteOf(col string) string
	// insertIgnore renders an insert of one row into table's cols (a parenthesised list) from arguments 1..n that
	// does nothing, and affects no row, when the primary key is taken.
	insertIgnore(table, cols string, n int) string
	// upsertTail renders what follows an insert of one row so that a row whose primary key, key, is taken has its
	// cols set to the inserted row's instead.
	upsertTail(key string, cols ...string) string
	// statusScan renders the outbox aliased o for a query that reads the records of one status in id order.
	statusScan(outbox string) string
	// insert writes recs into outbox inside the caller's transaction c.
	insert(ctx context.Context, c Conn, outbox string, recs []driver.Record) error
	// settle applies st to the claimed records recs inside the claim's transaction.
	settle(ctx context.Context, tx Conn, outbox string, st driver.Settlement, recs []driver.Record) error
	// cleanup runs the deletes of one cleanup batch under the cleanup lock of n, setting each delete's count.
	cleanup(ctx context.Context, db DB, n driver.Names, deletes []cleanupDelete, limit int) error
	// cleanupQuery deletes at most the second argument of the rows of table whose column where is before the first
	// argument, oldest first by order; key is the table's primary key.
	cleanupQuery(table, key, where, order string) string
	// inboxQueries are the inbox statements of n.
	inboxQueries(n driver.Names) inboxSQL
	// lockInboxKey serialises claimers of one (consumer, message ID) inside the caller's transaction, where the
	// database needs it.
	lockInboxKey(ctx context.Context, c Conn, n driver.Names, consumer, messageID string) error
	// migrate applies the migrations of n not yet applied, and returns their versions.
	migrate(ctx context.Context, db DB, n driver.Names) ([]int, error)
	// tableExists returns the query counting the tables named table in n's schema, and its arguments.
	tableExists(n driver.Names, table string) (string, []any)
	// timeColumn is the column type of a time in the migrations table.
	timeColumn() string
}

// The dialects.
var (
	Postgres Dialect = postgres{}
	MySQL    Dialect = mysql{}
	SQLite   Dialect = sqlite{}
)

// Lock purposes: each names one maintenance lock per table set.
const (
	LockCleanup = "cleanup"
	lockMigrate = "migrate"
)

// table returns the quoted, schema-qualified name of table.
func table(d Dialect, n driver.Names, table string) string {
	if n.Schema != "" {
		return d.QuoteIdent(n.Schema) + "." + d.QuoteIdent(table)
	}
	return d.QuoteIdent(table)
}

// orderedTable is what an ordered claim reads: the outbox, quoted and qualified, and the quoted names of its
// index of pending records (migration 1 of PostgreSQL and SQLite) and of its index by key (migration 3, with
// Config.Ordered), for the dialects that name them in index hints.
type orderedTable struct{ outbox, pendingIndex, keyIndex string }

func newOrderedTable(d Dialect, n driver.Names) orderedTable {
	return orderedTable{outbox: table(d, n, n.Outbox), pendingIndex: d.QuoteIdent(driver.Derived(n.Outbox, "_pending_idx")),
		keyIndex: d.QuoteIdent(driver.Derived(n.Outbox, "_key_idx"))}
}

// lockKey derives the advisory lock key for one purpose on one table set.
func lockKey(n driver.Names, purpose string) int64 {
	h := fnv.New64a()
	fmt.Fprintf(h, "postbox\x00%s\x00%s\x00%s", n.Schema, n.Outbox, purpose)
	return int64(h.Sum64())
}

// micros stores times as Unix microseconds (UTC), so that comparisons are numeric and no connection setting
// (MySQL's parseTime, time_zone) can change a value. MySQL and SQLite embed it.
type micros struct{}

func (micros) timeArg(t time.Time) any { return t.UnixMicro() }

func (micros) timeDest() (func() time.Time, any) {
	var us int64
	return func() time.Time { return time.UnixMicro(us).UTC() }, &us
}

func (micros) nullTimeDest() (func() time.Time, any) {
	var us *int64
	return func() time.Time {
		if us == nil {
			return time.Time{}
		}
		return time.UnixMicro(*us).UTC()
	}, &us
}

// questionMarks numbers no argument: every placeholder is "?". MySQL and SQLite embed it.
type questionMarks struct{}

func (questionMarks) ph(int) string { return "?" }

// claimArgs puts the skipped topics between the time and the limit, where skipTopics places them in the query.
func (questionMarks) claimArgs(now any, limit int, skip []string) []any {
	args := make([]any, 0, 2+len(skip))
	args = append(args, now)
	for _, t := range skip {
		args = append(args, t)
	}
	return append(args, limit)
}

// skipTopics renders the condition leaving out n topics of the outbox aliased alias, for "?" placeholders.
func skipTopics(alias string, n int) string {
	if n == 0 {
		return ""
	}
	return " AND " + alias + ".topic NOT IN (?" + strings.Repeat(", ?", n-1) + ")"
}

func (questionMarks) upsertTail(key string, cols ...string) string {
	return onConflictUpdate(key, cols)
}

// onConflictUpdate is upsertTail in the INSERT ... ON CONFLICT form of PostgreSQL and SQLite.
func onConflictUpdate(key string, cols []string) string {
	set := make([]string, len(cols))
	for i, c := range cols {
		set[i] = c + " = excluded." + c
	}
	return "ON CONFLICT (" + key + ") DO UPDATE SET " + strings.Join(set, ", ")
}

func (questionMarks) insertIgnore(table, cols string, n int) string {
	return "INSERT INTO " + table + " " + cols + " VALUES (?" + strings.Repeat(", ?", n-1) + ") ON CONFLICT DO NOTHING"
}

// inQuestionMarks renders "col IN (?, ...)" with one argument per ID, converted by idArg.
func inQuestionMarks(col string, ids []string, idArg func(string) any) (string, []any) {
	var b strings.Builder
	args := make([]any, len(ids))
	b.WriteString(col + " IN (")
	for i, id := range ids {
		if i > 0 {
			b.WriteByte(',')
		}
		b.WriteByte('?')
		args[i] = idArg(id)
	}
	b.WriteByte(')')
	return b.String(), args
}

// encodeHeaders returns the headers as JSON text, or nil for none.
func encodeHeaders(h map[string]string) (any, error) {
	if len(h) == 0 {
		return nil, nil
	}
	b, err := json.Marshal(h)
	if err != nil {
		return nil, err
	}
	return string(b), nil
}

// payloadArg never passes a nil slice, which drivers would write as NULL.
func payloadArg(p []byte) []byte {
	if p == nil {
		return []byte{}
	}
	return p
}

// ByName returns the dialect whose Capabilities().Dialect is name.
func ByName(name string) (Dialect, bool) {
	for _, d := range []Dialect{Postgres, MySQL, SQLite} {
		if d.Capabilities().Dialect == name {
			return d, true
		}
	}
	return nil, false
}

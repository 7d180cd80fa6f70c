package sqlstore

import (
	"context"
	"strings"

	"github.com/postbox-go/postbox/driver"
)

// sqlite is the SQL of SQLite: one writer, so no row locks and no named locks; text IDs; times as Unix
// microseconds. Transactions that write begin with BEGIN IMMEDIATE (see DB.BeginTx), so writers take turns.
type sqlite struct {
	micros
	questionMarks
}

func (sqlite) Capabilities() driver.Capabilities { return driver.Capabilities{Dialect: "sqlite"} }

func (sqlite) QuoteIdent(s string) string { return driver.QuoteIdent(s) }

// TryLock always gets the lock: SQLite has a single writer, so maintenance simply takes turns.
func (sqlite) TryLock(context.Context, Conn, driver.Names, string) (bool, error) { return true, nil }

func (sqlite) Unlock(context.Context, Conn, driver.Names, string) error { return nil }

func (sqlite) idArg(id string) any { return id }

func (sqlite) idDest() (func() string, any) {
	var s string
	return func() string { return s }, &s
}

func (s sqlite) inList(col string, ids []string, _ int) (string, []any) {
	return inQuestionMarks(col, ids, s.idArg)
}

func (sqlite) stringLiteral(s string) string { return "'" + strings.ReplaceAll(s, "'", "''") + "'" }

func (sqlite) recordCols() string {
	return "id, topic, key, type, payload, headers, status, attempts, last_error, available_at, created_at, published_at"
}

// claimQuery locks nothing itself: the claim's transaction holds the database's write lock (BEGIN IMMEDIATE).
func (s sqlite) claimQuery(outbox string, skip int) string {
	return "SELECT " + s.recordCols() + " FROM " + outbox + " AS o WHERE o.status = 'pending' AND o.available_at <= ?" +
		skipTopics("o", skip) + " ORDER BY o.id LIMIT ?"
}

// orderedClaimQuery is claimQuery keeping only the records that head their key: no earlier record of the key
// blocks them. INDEXED BY fixes both indexes, whatever ANALYZE left in sqlite_stat1: the claim reads pending
// records in id order from the pending index and answers each record's check with one probe of the key index
// (migration 3). The check repeats that index's condition word for word, because SQLite uses a partial index
// only for a query whose WHERE clause contains it; without it, or the hint, the check read every earlier
// pending record for each record (about 340 million VM steps for one claim of 100 records with 100,000 pending).
// Without DeadHoldsKey the probe passes over the dead records at the head of a key.
func (s sqlite) orderedClaimQuery(t orderedTable, deadHoldsKey bool, skip int) string {
	blocks := " AND p.status = 'pending'"
	if deadHoldsKey {
		blocks = ""
	}
	return "SELECT " + s.recordCols() + " FROM " + t.outbox + " AS o INDEXED BY " + t.pendingIndex +
		" WHERE o.status = 'pending' AND o.available_at <= ?" + skipTopics("o", skip) +
		" AND (o.key = '' OR NOT EXISTS (SELECT 1 FROM " + t.outbox + " AS p INDEXED BY " + t.keyIndex +
		" WHERE p.key = o.key AND p.status <> 'published' AND p.key <> ''" + blocks + " AND p.id < o.id))" +
		" ORDER BY o.id LIMIT ?"
}

// sqliteMaxRowsPerInsert keeps a multi-row insert under SQLite's limit of 32766 bound variables.
const sqliteMaxRowsPerInsert = 1000

func (s sqlite) insert(ctx context.Context, c Conn, outbox string, recs []driver.Record) error {
	return insertValues(ctx, c, s, outbox, "(id, topic, key, type, payload, headers, available_at, created_at)", recs,
		func(recs []driver.Record) int { return min(len(recs), sqliteMaxRowsPerInsert) })
}

// settle runs one statement per failed record: SQLite runs in-process, so that costs no round trips.
func (s sqlite) settle(ctx context.Context, tx Conn, outbox string, st driver.Settlement, _ []driver.Record) error {
	if len(st.Published) > 0 {
		in, args := s.inList("id", st.Published, 1)
		q := "DELETE FROM " + outbox + " WHERE " + in
		if st.Keep {
			q = "UPDATE " + outbox + " SET status = 'published', published_at = ?, attempts = attempts + 1 WHERE " + in
			args = append([]any{s.timeArg(st.Now)}, args...)
		}
		if _, err := tx.Exec(ctx, q, args...); err != nil {
			return err
		}
	}
	for _, f := range st.Failed {
		if _, err := tx.Exec(ctx, "UPDATE "+outbox+" SET attempts = ?, last_error = ?, available_at = ?,"+
			" status = CASE WHEN ? THEN 'dead' ELSE 'pending' END WHERE id = ?",
			f.Attempts, f.LastError, s.timeArg(f.AvailableAt), f.Dead, f.ID); err != nil {
			return err
		}
	}
	return nil
}

// cleanup runs the batch in one immediate transaction: cleaners take turns at the write lock.
func (s sqlite) cleanup(ctx context.Context, db DB, _ driver.Names, deletes []cleanupDelete, limit int) error {
	return cleanupInTx(ctx, db, s, deletes, limit, nil)
}

func (s sqlite) cleanupQuery(table, key, where, order string) string {
	return deleteInSubquery(s, table, key, where, order)
}

func (s sqlite) inboxQueries(n driver.Names) inboxSQL { return onConflictInboxQueries(s, n) }

// lockInboxKey locks nothing: the claim's transaction holds the write lock.
func (sqlite) lockInboxKey(context.Context, Conn, driver.Names, string, string) error { return nil }

// migrate applies migrations in one immediate transaction, which keeps concurrent migrators apart.
func (s sqlite) migrate(ctx context.Context, db DB, n driver.Names) ([]int, error) {
	return migrateInTx(ctx, db, s, n, nil)
}

func (sqlite) tableExists(_ driver.Names, table string) (string, []any) {
	return "SELECT count(*) FROM sqlite_master WHERE type = 'table' AND name = ?", []any{table}
}

func (sqlite) timeColumn() string { return "INTEGER" }

// containsText uses instr: SQLite's LIKE ignores ASCII case and reads % and _ as wildcards.
func (sqlite) containsText(col string, _ int) string { return "instr(" + col + ", ?) > 0" }

func (sqlite) minuteOf(col string) string { return col + " / 60000000" }

func (sqlite) statusScan(outbox string) string { return outbox + " AS o" }

package sqlstore

import (
	"context"
	"encoding/hex"
	"errors"
	"fmt"
	"github.com/postbox-go/postbox/internal/uuid"
	"hash/fnv"
	"strings"

	"github.com/postbox-go/postbox/driver"
)

// mysql is the SQL of MySQL 8.0 and later and MariaDB 10.6 and later, the versions with FOR UPDATE SKIP LOCKED.
// Tables are InnoDB, schemas are databases, IDs are BINARY(16) and times are Unix microseconds (see
// docs/MYSQL.md). DDL commits implicitly and there is no transaction-level named lock, so migrations and cleanup
// run on a session of their own holding GET_LOCK.
type mysql struct {
	micros
	questionMarks
}

func (mysql) Capabilities() driver.Capabilities {
	return driver.Capabilities{Dialect: "mysql", SkipLocked: true, Schemas: true, Partitions: true}
}

// QuoteIdent quotes with backticks: MySQL's default SQL mode reads double quotes as strings.
func (mysql) QuoteIdent(s string) string { return "`" + strings.ReplaceAll(s, "`", "``") + "`" }

// mysqlSchema is the SQL for the table set's schema: the configured one (the first argument), or else the
// connection's default database.
const mysqlSchema = "COALESCE(NULLIF(?, ''), DATABASE())"

// mysqlLockName is the SQL for a named lock of one purpose on one table set; mysqlLockArgs gives its arguments.
// GET_LOCK names are server-wide and at most 64 characters, so the database, table and purpose are hashed.
const mysqlLockName = "CONCAT('postbox_', MD5(CONCAT_WS('/', COALESCE(NULLIF(?, ''), DATABASE(), ''), ?, ?)))"

func mysqlLockArgs(n driver.Names, purpose string) []any { return []any{n.Schema, n.Outbox, purpose} }

// mysqlMigrateLockWait is how long, in seconds, Migrate waits for another migrator's lock.
const mysqlMigrateLockWait = 300

func (mysql) TryLock(ctx context.Context, c Conn, n driver.Names, purpose string) (bool, error) {
	return mysqlGetLock(ctx, c, n, purpose, 0)
}

// mysqlGetLock waits up to wait seconds for the lock. GET_LOCK returns NULL on error.
func mysqlGetLock(ctx context.Context, c Conn, n driver.Names, purpose string, wait int) (bool, error) {
	var got *int64
	err := c.Query(ctx, fmt.Sprintf("SELECT GET_LOCK(%s, %d)", mysqlLockName, wait), mysqlLockArgs(n, purpose),
		func(scan func(...any) error) error { return scan(&got) })
	if err != nil {
		return false, fmt.Errorf("postbox: take %s lock: %w", purpose, err)
	}
	return got != nil && *got == 1, nil
}

func (mysql) Unlock(ctx context.Context, c Conn, n driver.Names, purpose string) error {
	if _, err := c.Exec(ctx, "DO RELEASE_LOCK("+mysqlLockName+")", mysqlLockArgs(n, purpose)...); err != nil {
		return fmt.Errorf("postbox: release %s lock: %w", purpose, err)
	}
	return nil
}

// idArg converts a canonical text UUID to the 16 bytes of a BINARY(16) column.
func (mysql) idArg(id string) any {
	b, err := uuid.Parse(id)
	if err != nil {
		return id // not a UUID: the database refuses it, naming the value
	}
	return b[:]
}

func (mysql) idDest() (func() string, any) {
	var b []byte
	return func() string {
		if len(b) != 16 {
			return hex.EncodeToString(b)
		}
		return uuid.Format([16]byte(b))
	}, &b
}

func (m mysql) inList(col string, ids []string, _ int) (string, []any) {
	return inQuestionMarks(col, ids, m.idArg)
}

// stringLiteral doubles quotes and backslashes, which MySQL reads as escapes unless NO_BACKSLASH_ESCAPES is set.
func (mysql) stringLiteral(s string) string {
	return "'" + strings.NewReplacer(`\`, `\\`, "'", "''").Replace(s) + "'"
}

// recordCols quotes key, a reserved word in MySQL.
func (mysql) recordCols() string {
	return "id, topic, `key`, type, payload, headers, status, attempts, last_error, available_at, created_at, published_at"
}

// mysqlClaimIndex is the name of the index that serves the claim query (migrations/mysql/0001_outbox.sql).
const mysqlClaimIndex = "claim_idx"

// claimQuery forces the (status, id) index. Pending rows are the newest: a scan of the primary key in id order
// would first pass every published and dead row, which the optimizer, assuming an even spread, may still prefer
// (TestMySQLClaimUsesIndex shows MariaDB doing so). The index yields pending rows already in id order: no filesort.
func (m mysql) claimQuery(outbox string, skip int) string {
	return "SELECT " + m.recordCols() + " FROM " + m.statusScan(outbox) + " WHERE o.status = 'pending' AND o.available_at <= ?" +
		skipTopics("o", skip) + " ORDER BY o.id LIMIT ? FOR UPDATE SKIP LOCKED"
}

// orderedClaimQuery is claimQuery keeping only the records that head their key: no earlier record of the key
// blocks them. Both indexes are forced, so that the statistics (InnoDB's, sampled when the table was small, or
// never) choose nothing: the claim reads pending records in id order from claim_idx, and answers each record's
// check with one probe of the key index (migration 3), whose (key, status, id) order puts a key's earliest
// record of one status first. Without the hint the check may read claim_idx instead, every earlier pending record
// for each record. A dead record that holds its key is a second probe of its own, as one probe for "pending or
// dead" would read a key's pending records, and in retention mode its published ones, before its dead ones.
//
// The skipped topics are tested before the head check, which the server evaluates in the order written: a
// paused topic's records then cost a read each, not a probe each.
//
// A locking clause does not reach into the subqueries, so rows locked by another claim are skipped, and so are
// the rows behind them, because a locked head is still pending: several relays share the keys without ever
// holding two records of one key.
func (m mysql) orderedClaimQuery(t orderedTable, deadHoldsKey bool, skip int) string {
	earlier := func(status string) string {
		return "NOT EXISTS (SELECT 1 FROM " + t.outbox + " AS p FORCE INDEX (" + t.keyIndex + ") WHERE p.`key` = o.`key`" +
			" AND p.status = '" + status + "' AND p.id < o.id)"
	}
	head := earlier("pending")
	if deadHoldsKey {
		head += " AND " + earlier("dead")
	}
	return "SELECT " + m.recordCols() + " FROM " + m.statusScan(t.outbox) + " WHERE o.status = 'pending' AND o.available_at <= ?" +
		skipTopics("o", skip) + " AND (o.`key` = '' OR (" + head + ")) ORDER BY o.id LIMIT ? FOR UPDATE SKIP LOCKED"
}

// Limits of one multi-row statement: a prepared statement takes at most 65535 arguments, and a packet at most
// max_allowed_packet bytes (4 MiB by default on the oldest supported servers; 16 MiB on MariaDB 10.11 and 64 MiB on
// MySQL 8), which escaping may double.
const (
	mysqlMaxRowsPerStatement  = 1000
	mysqlMaxBytesPerStatement = 1 << 20
)

// insert writes multi-row VALUES statements cut to stay under the limits above.
func (m mysql) insert(ctx context.Context, c Conn, outbox string, recs []driver.Record) error {
	return insertValues(ctx, c, m, outbox, "(id, topic, `key`, type, payload, headers, available_at, created_at)", recs,
		func(recs []driver.Record) int {
			size := 0
			for i, r := range recs {
				size += len(r.Payload) + len(r.Topic) + len(r.Key) + len(r.Type) + 64
				for k, v := range r.Headers {
					size += len(k) + len(v) + 6
				}
				if i > 0 && (i == mysqlMaxRowsPerStatement || size > mysqlMaxBytesPerStatement) {
					return i
				}
			}
			return len(recs)
		})
}

// settle reaches each row by its whole primary key through a join to a derived table of keys. A plain
// "id IN (...)" is a range read, which locks the row after each range to find its end: a row of another relay's
// batch, so two relays settling at once would deadlock. The key carries created_at, which the partitioned
// layout's primary key holds, so the lookups stay unique there too.
func (m mysql) settle(ctx context.Context, tx Conn, outbox string, st driver.Settlement, recs []driver.Record) error {
	created := make(map[string]int64, len(recs))
	for _, r := range recs {
		created[r.ID] = r.CreatedAt.UnixMicro()
	}
	join := " STRAIGHT_JOIN " + outbox + " AS t ON t.id = f.id AND t.created_at = f.created_at"
	for pub := st.Published; len(pub) > 0; {
		chunk := pub[:min(len(pub), mysqlMaxRowsPerStatement)]
		pub = pub[len(chunk):]
		keys, args := m.keys(len(chunk), func(i int) []any { return []any{m.idArg(chunk[i]), created[chunk[i]]} })
		q := "DELETE t FROM " + keys + join
		if st.Keep {
			q = "UPDATE " + keys + join + " SET t.status = 'published', t.published_at = ?, t.attempts = t.attempts + 1"
			args = append(args, m.timeArg(st.Now))
		}
		if _, err := tx.Exec(ctx, q, args...); err != nil {
			return err
		}
	}
	for failed := st.Failed; len(failed) > 0; {
		chunk := failed[:min(len(failed), mysqlMaxRowsPerStatement)]
		failed = failed[len(chunk):]
		keys, args := m.keys(len(chunk), func(i int) []any {
			f := chunk[i]
			return []any{m.idArg(f.ID), created[f.ID], f.Attempts, f.LastError, m.timeArg(f.AvailableAt), f.Dead}
		}, "attempts", "last_error", "available_at", "dead")
		q := "UPDATE " + keys + join +
			" SET t.attempts = f.attempts, t.last_error = f.last_error, t.available_at = f.available_at," +
			" t.status = CASE WHEN f.dead THEN 'dead' ELSE 'pending' END"
		if _, err := tx.Exec(ctx, q, args...); err != nil {
			return err
		}
	}
	return nil
}

// keys renders a derived table f of n rows with columns id, created_at and then cols, and its arguments; row
// returns one row's values in that order. (MySQL has no unnest, and MariaDB and MySQL spell row constructors
// differently, so the rows are a UNION ALL.)
func (mysql) keys(n int, row func(i int) []any, cols ...string) (string, []any) {
	var b strings.Builder
	args := make([]any, 0, n*(2+len(cols)))
	b.WriteString("(")
	for i := range n {
		if i > 0 {
			b.WriteString(" UNION ALL ")
		}
		// The cast keeps the ID binary: a bare parameter would be typed as text in the connection's charset.
		b.WriteString("SELECT CAST(? AS BINARY(16))")
		if i == 0 {
			b.WriteString(" AS id")
		}
		b.WriteString(", ?")
		if i == 0 {
			b.WriteString(" AS created_at")
		}
		for _, c := range cols {
			b.WriteString(", ?")
			if i == 0 {
				b.WriteString(" AS " + c)
			}
		}
		args = append(args, row(i)...)
	}
	b.WriteString(") AS f")
	return b.String(), args
}

// cleanup holds GET_LOCK on a session of its own, and each delete commits on its own at READ COMMITTED, so no gap
// locks stall producers. The counts of the deletes that ran stand even when a later one fails.
func (m mysql) cleanup(ctx context.Context, db DB, n driver.Names, deletes []cleanupDelete, limit int) error {
	return m.withLock(ctx, db, n, LockCleanup, 0, func(sess driver.Session) error {
		if _, err := sess.Exec(ctx, "SET SESSION TRANSACTION ISOLATION LEVEL READ COMMITTED"); err != nil {
			return err
		}
		return runDeletes(ctx, sess, m, deletes, limit)
	})
}

// withLock runs fn on a session of its own holding the lock for purpose, waiting up to wait seconds for it. It
// returns driver.ErrLocked when the wait is 0 and another session holds the lock.
func (mysql) withLock(ctx context.Context, db DB, n driver.Names, purpose string, wait int, fn func(sess driver.Session) error) (err error) {
	sess, err := db.Session(ctx)
	if err != nil {
		return err
	}
	// Closing the session releases the lock even when an explicit release fails.
	defer func() { err = errors.Join(err, sess.Close()) }()
	got, err := mysqlGetLock(ctx, sess, n, purpose, wait)
	switch {
	case err != nil:
		return err
	case !got && wait == 0:
		return driver.ErrLocked
	case !got:
		return fmt.Errorf("postbox: another instance held the %s lock for %ds; try again when it is done", purpose, wait)
	}
	// Releasing the lock before closing hands it over at once.
	defer func() { err = errors.Join(err, mysql{}.Unlock(context.WithoutCancel(ctx), sess, n, purpose)) }()
	return fn(sess)
}

// cleanupQuery uses DELETE's own ORDER BY and LIMIT: MySQL cannot delete from a table it selects from in a
// subquery, nor take LIMIT in an IN subquery.
func (mysql) cleanupQuery(table, _, where, order string) string {
	return "DELETE FROM " + table + " WHERE " + where + " < ? ORDER BY " + order + " LIMIT ?"
}

// mysqlInboxStripes is the number of rows in the inbox's stripes table (see migrations/mysql/0002_inbox.sql).
const mysqlInboxStripes = 4096

// inboxQueries use INSERT IGNORE, which makes a duplicate claim a no-op that affects no row, whatever the DSN's
// clientFoundRows, which would make ON DUPLICATE KEY UPDATE report one. IGNORE also turns other errors into
// warnings, but the inputs cannot cause any: consumer names and message IDs are checked to be UTF-8 text of at
// most 255 bytes, and errors are cut to MaxLastErrorLen, before they reach the store.
func (m mysql) inboxQueries(n driver.Names) inboxSQL {
	inbox := table(m, n, n.Inbox)
	failures := table(m, n, driver.Derived(n.Inbox, "_failures"))
	return inboxSQL{
		claim: "INSERT IGNORE INTO " + inbox + " (consumer, message_id, received_at) VALUES (?, ?, ?)",
		// VALUES() in ON DUPLICATE KEY UPDATE is deprecated on MySQL 8.0.20+ but works on both servers; the
		// newer row alias is MySQL-only. There is no RETURNING: readFailures reads the count back.
		countFailure: "INSERT INTO " + failures + " (consumer, message_id, failures, last_error, updated_at) VALUES (?, ?, 1, ?, ?)" +
			" ON DUPLICATE KEY UPDATE failures = failures + 1, last_error = VALUES(last_error), updated_at = VALUES(updated_at)",
		readFailures: "SELECT failures FROM " + failures + " WHERE consumer = ? AND message_id = ?",
		markFailed: "INSERT IGNORE INTO " + inbox + " (consumer, message_id, status, received_at, failures, last_error)" +
			" VALUES (?, ?, 'failed', ?, ?, ?)",
		dropFailures: "DELETE FROM " + failures + " WHERE consumer = ? AND message_id = ?",
	}
}

// lockInboxKey locks the key's stripe row, held until the caller's transaction ends. InnoDB deadlocks concurrent
// inserts of one key when the first inserter rolls back (its waiters hold shared locks and then all upgrade): a
// failing handler's delivery racing its redeliveries did exactly that. Queued on one exclusive lock instead, each
// claimer learns the outcome of the one before. Two keys share a stripe one time in 4096, and then merely wait for
// each other.
func (m mysql) lockInboxKey(ctx context.Context, c Conn, n driver.Names, consumer, messageID string) error {
	h := fnv.New32a()
	h.Write([]byte(consumer))
	h.Write([]byte{0})
	h.Write([]byte(messageID))
	found := false
	err := c.Query(ctx, "SELECT stripe FROM "+table(m, n, driver.Derived(n.Inbox, "_stripes"))+" WHERE stripe = ? FOR UPDATE",
		[]any{h.Sum32() % mysqlInboxStripes}, func(func(...any) error) error {
			found = true
			return nil
		})
	if err == nil && !found {
		err = errors.New("postbox: the inbox stripes table is empty; run Migrate")
	}
	return err
}

// migrate applies migrations on one session under GET_LOCK. MySQL commits DDL implicitly, so a transaction cannot
// make a migration all-or-nothing: the lock keeps migrators apart, a migration is recorded only after all its
// statements ran, and every statement is idempotent (CREATE ... IF NOT EXISTS, indexes inside CREATE TABLE because
// MySQL 8 has no CREATE INDEX IF NOT EXISTS), so a migration cut short is simply run again.
func (m mysql) migrate(ctx context.Context, db DB, n driver.Names) (done []int, err error) {
	err = m.withLock(ctx, db, n, lockMigrate, mysqlMigrateLockWait, func(sess driver.Session) error {
		if n.Schema != "" {
			if _, err := sess.Exec(ctx, "CREATE DATABASE IF NOT EXISTS "+m.QuoteIdent(n.Schema)); err != nil {
				return fmt.Errorf("postbox: create database %s: %w", n.Schema, err)
			}
		}
		var err error
		done, err = applyMigrations(ctx, m, sess, n, splitStatements)
		return err
	})
	return done, err
}

// splitStatements splits a migration into its statements, which end with a semicolon at the end of a line:
// go-sql-driver/mysql runs one statement per call unless the DSN sets multiStatements, which Postbox does not
// require. A stored routine (a line starting CREATE PROCEDURE or CREATE FUNCTION) holds statements of its own and
// ends at a line that is END; alone.
func splitStatements(sql string) []string {
	var out []string
	var cur strings.Builder
	routine := false
	for line := range strings.Lines(sql) {
		cur.WriteString(line)
		trimmed := strings.TrimRight(line, " \t\r\n")
		if strings.HasPrefix(trimmed, "CREATE PROCEDURE ") || strings.HasPrefix(trimmed, "CREATE FUNCTION ") {
			routine = true
		}
		if routine && trimmed != "END;" {
			continue
		}
		routine = false
		if strings.HasSuffix(trimmed, ";") {
			if stmt := strings.TrimSpace(cur.String()); stmt != ";" {
				out = append(out, strings.TrimSuffix(stmt, ";"))
			}
			cur.Reset()
		}
	}
	if rest := strings.TrimSpace(cur.String()); rest != "" && !onlyComments(rest) {
		out = append(out, rest)
	}
	return out
}

func onlyComments(s string) bool {
	for line := range strings.Lines(s) {
		if l := strings.TrimSpace(line); l != "" && !strings.HasPrefix(l, "--") {
			return false
		}
	}
	return true
}

func (mysql) tableExists(n driver.Names, table string) (string, []any) {
	return "SELECT count(*) FROM information_schema.tables WHERE table_name = ? AND table_schema = " + mysqlSchema,
		[]any{table, n.Schema}
}

// timeColumn is BIGINT: MySQL's INTEGER has 32 bits, too few for microseconds.
func (mysql) timeColumn() string { return "BIGINT" }

// containsText uses LOCATE, which compares in the column's binary collation: case-sensitive, no wildcards.
func (mysql) containsText(col string, _ int) string { return "LOCATE(?, " + col + ") > 0" }

// minuteOf divides microseconds with DIV: MySQL's "/" gives a decimal.
func (mysql) minuteOf(col string) string { return col + " DIV 60000000" }

// upsertTail uses ON DUPLICATE KEY UPDATE with VALUES(), which MySQL 8.0.20+ deprecates but both servers run.
func (mysql) upsertTail(_ string, cols ...string) string {
	set := make([]string, len(cols))
	for i, c := range cols {
		set[i] = c + " = VALUES(" + c + ")"
	}
	return "ON DUPLICATE KEY UPDATE " + strings.Join(set, ", ")
}

// insertIgnore uses INSERT IGNORE; its inputs are checked text that cannot raise the errors IGNORE would hide.
func (mysql) insertIgnore(table, cols string, n int) string {
	return "INSERT IGNORE INTO " + table + " " + cols + " VALUES (?" + strings.Repeat(", ?", n-1) + ")"
}

// statusScan forces the (status, id) index, as the claim does (see claimQuery).
func (mysql) statusScan(outbox string) string {
	return outbox + " AS o FORCE INDEX (" + mysqlClaimIndex + ")"
}

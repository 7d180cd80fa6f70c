package sqlshared

import (
	"context"
	"encoding/hex"
	"errors"
	"fmt"
	"hash/fnv"
	"strings"
	"time"

	"github.com/postbox-go/postbox/driver"
	"github.com/postbox-go/postbox/internal/uuid"
)

// mysqlSchema is the SQL for the table set's schema on MySQL: the configured one (the first argument), or else the
// connection's default database.
const mysqlSchema = "COALESCE(NULLIF(?, ''), DATABASE())"

// mysqlLockName is the SQL for a named lock of one purpose on one table set; mysqlLockArgs gives its arguments.
// GET_LOCK names are server-wide and at most 64 characters, so the database, table and purpose are hashed.
const mysqlLockName = "CONCAT('postbox_', MD5(CONCAT_WS('/', COALESCE(NULLIF(?, ''), DATABASE(), ''), ?, ?)))"

func mysqlLockArgs(n driver.Names, purpose string) []any { return []any{n.Schema, n.Outbox, purpose} }

// mysqlMigrateLockWait is how long, in seconds, Migrate waits for another migrator's lock.
const mysqlMigrateLockWait = 300

// Limits of one multi-row statement on MySQL: a prepared statement takes at most 65535 arguments, and a packet
// at most max_allowed_packet bytes (4 MiB by default on the oldest supported servers; 16 MiB on MariaDB 10.11 and
// 64 MiB on MySQL 8), which escaping may double.
const (
	mysqlMaxRowsPerStatement  = 1000
	mysqlMaxBytesPerStatement = 1 << 20
)

// idArg converts a canonical text UUID to the dialect's column value: 16 bytes for MySQL's BINARY(16).
func (d Dialect) idArg(id string) any {
	if !d.my() {
		return id
	}
	b, err := hex.DecodeString(strings.ReplaceAll(id, "-", ""))
	if err != nil || len(b) != 16 {
		return id // not a UUID: the database refuses it, naming the value
	}
	return b
}

// idDest returns a scan destination for an ID column and a function reading the scanned ID as canonical text.
func (d Dialect) idDest() (func() string, any) {
	if !d.my() {
		var s string
		return func() string { return s }, &s
	}
	var b []byte
	return func() string {
		if len(b) != 16 {
			return hex.EncodeToString(b)
		}
		return uuid.Format([16]byte(b))
	}, &b
}

// migrateMySQL applies migrations on one session under GET_LOCK. MySQL commits DDL implicitly, so a transaction
// cannot make a migration all-or-nothing: the lock keeps migrators apart, a migration is recorded only after all
// its statements ran, and every statement is idempotent (CREATE ... IF NOT EXISTS, indexes inside CREATE TABLE
// because MySQL 8 has no CREATE INDEX IF NOT EXISTS), so a migration cut short is simply run again.
func (s *store[TTx]) migrateMySQL(ctx context.Context) (done []int, err error) {
	d, n := s.d, s.n
	sess, err := s.b.Session(ctx)
	if err != nil {
		return nil, err
	}
	defer func() { err = errors.Join(err, sess.Close()) }()
	var got *int64
	err = sess.Query(ctx, fmt.Sprintf("SELECT GET_LOCK(%s, %d)", mysqlLockName, mysqlMigrateLockWait),
		mysqlLockArgs(n, lockMigrate), func(scan func(...any) error) error { return scan(&got) })
	if err != nil {
		return nil, fmt.Errorf("postbox: take migration lock: %w", err)
	}
	if got == nil || *got != 1 {
		return nil, fmt.Errorf("postbox: another migrator held the migration lock for %ds; try again when it is done", mysqlMigrateLockWait)
	}
	// Closing the session releases the lock too; releasing it first hands it over at once.
	defer func() { err = errors.Join(err, d.Unlock(context.WithoutCancel(ctx), sess, n, lockMigrate)) }()

	if n.Schema != "" {
		if _, err := sess.Exec(ctx, "CREATE DATABASE IF NOT EXISTS "+d.QuoteIdent(n.Schema)); err != nil {
			return nil, fmt.Errorf("postbox: create database %s: %w", n.Schema, err)
		}
	}
	if _, err := sess.Exec(ctx, d.createVersionTable(n)); err != nil {
		return nil, fmt.Errorf("postbox: create migrations table: %w", err)
	}
	applied, err := d.appliedVersions(ctx, sess, n)
	if err != nil {
		return nil, fmt.Errorf("postbox: read applied migrations: %w", err)
	}
	for _, m := range d.Migrations(n) {
		if _, ok := applied[m.Version]; ok {
			continue
		}
		for _, stmt := range splitStatements(m.SQL) {
			if _, err := sess.Exec(ctx, stmt); err != nil {
				return done, fmt.Errorf("postbox: migration %d (%s): %w", m.Version, m.Name, err)
			}
		}
		if _, err := sess.Exec(ctx, "INSERT INTO "+d.versionTable(n)+" (version, name, applied_at) VALUES (?, ?, ?)",
			m.Version, m.Name, d.Time(time.Now())); err != nil {
			return done, fmt.Errorf("postbox: record migration %d: %w", m.Version, err)
		}
		done = append(done, m.Version)
	}
	return done, nil
}

// splitStatements splits a migration into its statements, which end with a semicolon at the end of a line:
// go-sql-driver/mysql runs one statement per call unless the DSN sets multiStatements, which Postbox does not
// require.
func splitStatements(sql string) []string {
	var out []string
	var cur strings.Builder
	for line := range strings.Lines(sql) {
		cur.WriteString(line)
		if strings.HasSuffix(strings.TrimRight(line, " \t\r\n"), ";") {
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

// settleMySQL settles a batch with statements that reach each row by its whole primary key through a join to a
// derived table of keys. A plain "id IN (...)" is a range read, which locks the row after each range to find its
// end: a row of another relay's batch, so two relays settling at once would deadlock. The key carries created_at,
// which the partitioned layout's primary key holds, so the lookups stay unique there too.
func (s *store[TTx]) settleMySQL(ctx context.Context, tx Conn, st driver.Settlement, recs []driver.Record) error {
	created := make(map[string]int64, len(recs))
	for _, r := range recs {
		created[r.ID] = r.CreatedAt.UnixMicro()
	}
	set := " SET t.status = 'published', t.published_at = ?, t.attempts = t.attempts + 1"
	for pub := st.Published; len(pub) > 0; {
		chunk := pub[:min(len(pub), mysqlMaxRowsPerStatement)]
		pub = pub[len(chunk):]
		keys, args := s.mysqlKeys(len(chunk), func(i int) []any { return []any{s.d.idArg(chunk[i]), created[chunk[i]]} })
		q := "DELETE t FROM " + keys + " STRAIGHT_JOIN " + s.outbox + " AS t ON t.id = f.id AND t.created_at = f.created_at"
		if st.Keep {
			q = "UPDATE " + keys + " STRAIGHT_JOIN " + s.outbox + " AS t ON t.id = f.id AND t.created_at = f.created_at" + set
			args = append(args, s.d.Time(st.Now))
		}
		if _, err := tx.Exec(ctx, q, args...); err != nil {
			return err
		}
	}
	for failed := st.Failed; len(failed) > 0; {
		chunk := failed[:min(len(failed), mysqlMaxRowsPerStatement)]
		failed = failed[len(chunk):]
		keys, args := s.mysqlKeys(len(chunk), func(i int) []any {
			f := chunk[i]
			return []any{s.d.idArg(f.ID), created[f.ID], f.Attempts, f.LastError, s.d.Time(f.AvailableAt), f.Dead}
		}, "attempts", "last_error", "available_at", "dead")
		q := "UPDATE " + keys + " STRAIGHT_JOIN " + s.outbox + " AS t ON t.id = f.id AND t.created_at = f.created_at" +
			" SET t.attempts = f.attempts, t.last_error = f.last_error, t.available_at = f.available_at," +
			" t.status = CASE WHEN f.dead THEN 'dead' ELSE 'pending' END"
		if _, err := tx.Exec(ctx, q, args...); err != nil {
			return err
		}
	}
	return nil
}

// mysqlKeys renders a derived table f of n rows with columns id, created_at and then cols, and its arguments;
// row returns one row's values in that order. (MySQL has no unnest, and MariaDB and MySQL spell row constructors
// differently, so the rows are a UNION ALL.)
func (s *store[TTx]) mysqlKeys(n int, row func(i int) []any, cols ...string) (string, []any) {
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

// mysqlInboxStripes is the number of rows in the MySQL inbox's stripes table (see migrations/mysql/0002_inbox.sql).
const mysqlInboxStripes = 4096

// mysqlInboxQueries are the inbox statements on MySQL. INSERT IGNORE makes a duplicate claim a no-op that affects
// no row, whatever the DSN's clientFoundRows, which would make ON DUPLICATE KEY UPDATE report one. IGNORE also
// turns other errors into warnings, but the inputs cannot cause any: consumer names and message IDs are checked
// to be UTF-8 text of at most 255 bytes, and errors are cut to MaxLastErrorLen, before they reach the store.
//
// Claims and failure counts first lock the key's stripe row, held until the caller's transaction ends. InnoDB
// deadlocks concurrent inserts of one key when the first inserter rolls back (its waiters hold shared locks and
// then all upgrade): a failing handler's delivery racing its redeliveries did exactly that. Queued on one
// exclusive lock instead, each claimer learns the outcome of the one before. Two keys share a stripe one time in
// 4096, and then merely wait for each other.
func (d Dialect) mysqlInboxQueries(n driver.Names) inboxSQL {
	inbox := d.table(n, n.Inbox)
	failures := d.table(n, driver.Derived(n.Inbox, "_failures"))
	return inboxSQL{
		lockKey: "SELECT stripe FROM " + d.table(n, driver.Derived(n.Inbox, "_stripes")) + " WHERE stripe = ? FOR UPDATE",
		claim:   "INSERT IGNORE INTO " + inbox + " (consumer, message_id, received_at) VALUES (?, ?, ?)",
		// VALUES() in ON DUPLICATE KEY UPDATE is deprecated on MySQL 8.0.20+ but works on both servers; the
		// newer row alias is MySQL-only.
		countFailure: "INSERT INTO " + failures + " (consumer, message_id, failures, last_error, updated_at) VALUES (?, ?, 1, ?, ?)" +
			" ON DUPLICATE KEY UPDATE failures = failures + 1, last_error = VALUES(last_error), updated_at = VALUES(updated_at)",
		readFailures: "SELECT failures FROM " + failures + " WHERE consumer = ? AND message_id = ?",
		markFailed: "INSERT IGNORE INTO " + inbox + " (consumer, message_id, status, received_at, failures, last_error)" +
			" VALUES (?, ?, 'failed', ?, ?, ?)",
		dropFailures: "DELETE FROM " + failures + " WHERE consumer = ? AND message_id = ?",
		cleanClaims:  "DELETE FROM " + inbox + " WHERE received_at < ? ORDER BY received_at LIMIT ?",
		cleanCounts:  "DELETE FROM " + failures + " WHERE updated_at < ? ORDER BY updated_at LIMIT ?",
	}
}

// inboxCleanupMySQL deletes one batch of old claims and one of old failure counts under the inbox's GET_LOCK, on
// a session of its own at READ COMMITTED, each delete committing on its own.
func (s *store[TTx]) inboxCleanupMySQL(ctx context.Context, before time.Time, limit int) (deleted int64, err error) {
	q := s.d.inboxQueries(s.n)
	purpose := "inbox-cleanup/" + s.n.Inbox
	sess, err := s.b.Session(ctx)
	if err != nil {
		return 0, err
	}
	defer func() { err = errors.Join(err, sess.Close()) }()
	got, err := s.d.TryLock(ctx, sess, s.n, purpose)
	if err != nil {
		return 0, err
	}
	if !got {
		return 0, driver.ErrLocked
	}
	defer func() {
		if uerr := s.d.Unlock(context.WithoutCancel(ctx), sess, s.n, purpose); err == nil {
			err = uerr
		}
	}()
	if _, err := sess.Exec(ctx, "SET SESSION TRANSACTION ISOLATION LEVEL READ COMMITTED"); err != nil {
		return 0, err
	}
	for _, stmt := range []string{q.cleanClaims, q.cleanCounts} {
		n, err := sess.Exec(ctx, stmt, s.d.Time(before), limit)
		deleted += n
		if err != nil {
			return deleted, err
		}
	}
	return deleted, nil
}

// lockInboxKey locks the stripe of (consumer, messageID) inside the caller's transaction, where the dialect has
// one (MySQL).
func lockInboxKey(ctx context.Context, c Conn, q inboxSQL, consumer, messageID string) error {
	if q.lockKey == "" {
		return nil
	}
	h := fnv.New32a()
	h.Write([]byte(consumer))
	h.Write([]byte{0})
	h.Write([]byte(messageID))
	found := false
	err := c.Query(ctx, q.lockKey, []any{h.Sum32() % mysqlInboxStripes}, func(func(...any) error) error {
		found = true
		return nil
	})
	if err == nil && !found {
		err = errors.New("postbox: the inbox stripes table is empty; run Migrate")
	}
	return err
}

package sqlstore

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/postbox-go/postbox/driver"
)

// postgres is the SQL of PostgreSQL: native uuid, timestamptz and jsonb columns, arrays for batches, numbered
// placeholders, transaction-level advisory locks.
type postgres struct{}

func (postgres) Capabilities() driver.Capabilities {
	return driver.Capabilities{Dialect: "postgres", SkipLocked: true, Schemas: true, Partitions: true}
}

func (postgres) QuoteIdent(s string) string { return driver.QuoteIdent(s) }

// The store takes transaction-level locks, which PgBouncer's transaction mode cannot strand on a server
// connection. TryLock, which tests use to stand in for another instance, holds the same lock in a transaction of
// its own on the session c, and Unlock ends it: a transaction keeps its server connection behind a transaction
// pooler, where a bare session lock would go back to the pool with the connection and be shared by its next client.
func (postgres) TryLock(ctx context.Context, c Conn, n driver.Names, purpose string) (bool, error) {
	var got bool
	_, err := c.Exec(ctx, "BEGIN")
	if err == nil {
		err = c.Query(ctx, "SELECT pg_try_advisory_xact_lock($1)", []any{lockKey(n, purpose)},
			func(scan func(...any) error) error { return scan(&got) })
	}
	if err != nil || !got {
		if _, rerr := c.Exec(context.WithoutCancel(ctx), "ROLLBACK"); rerr != nil {
			err = errors.Join(err, rerr)
		}
	}
	if err != nil {
		return false, fmt.Errorf("postbox: take %s lock: %w", purpose, err)
	}
	return got, nil
}

func (postgres) Unlock(ctx context.Context, c Conn, n driver.Names, purpose string) error {
	if _, err := c.Exec(ctx, "COMMIT"); err != nil {
		return fmt.Errorf("postbox: release %s lock: %w", purpose, err)
	}
	return nil
}

// xactLock takes the lock for purpose until the end of tx, and returns driver.ErrLocked when another holds it.
func (postgres) xactLock(ctx context.Context, tx Conn, n driver.Names, purpose string) error {
	got := false
	err := tx.Query(ctx, "SELECT pg_try_advisory_xact_lock($1)", []any{lockKey(n, purpose)},
		func(scan func(...any) error) error { return scan(&got) })
	if err == nil && !got {
		err = driver.ErrLocked
	}
	return err
}

func (postgres) ph(n int) string         { return "$" + strconv.Itoa(n) }
func (postgres) timeArg(t time.Time) any { return t.UTC() }

func (postgres) timeDest() (func() time.Time, any) {
	var t time.Time
	return func() time.Time { return t }, &t
}

func (postgres) nullTimeDest() (func() time.Time, any) {
	var t *time.Time
	return func() time.Time {
		if t == nil {
			return time.Time{}
		}
		return *t
	}, &t
}

func (postgres) idArg(id string) any { return id }

func (postgres) idDest() (func() string, any) {
	var s string
	return func() string { return s }, &s
}

func (p postgres) inList(col string, ids []string, n int) (string, []any) {
	return col + " = ANY(" + p.ph(n) + "::uuid[])", []any{ids}
}

// stringLiteral doubles quotes; with standard_conforming_strings (the default since 9.1) a backslash is a
// character like any other.
func (postgres) stringLiteral(s string) string { return "'" + strings.ReplaceAll(s, "'", "''") + "'" }

func (postgres) recordCols() string {
	return "id::text, topic, key, type, payload, headers::text, status, attempts, last_error, available_at, created_at, published_at"
}

// claimQuery orders by the table's column: a bare "id" would mean the select list's id::text, which no index has,
// and every claim would sort the whole table.
func (p postgres) claimQuery(outbox string, skip int) string {
	return "SELECT " + p.recordCols() + " FROM " + outbox + " AS o WHERE o.status = 'pending' AND o.available_at <= $1" +
		pgSkipTopics("o", skip) + " ORDER BY o.id LIMIT $2 FOR UPDATE SKIP LOCKED"
}

// orderedClaimQuery walks the claimable records (pending, due, of topics not skipped) in id order, one LIMIT 1
// probe of the pending index per record (the recursive walk), and locks those that head their key until it holds
// a batch. A record heads its key when it is the key's first record that blocks (one probe of the key index,
// migration 3), whatever its topic or due time: a record of a skipped topic, or one not yet due, still holds
// its key. Records another claim holds are skipped (SKIP LOCKED), and so are the records behind them, whose head
// is still pending: several relays share the keys without ever holding two records of one key.
//
// The walk is spelled out because the plain form, one SELECT ... ORDER BY id LIMIT n with the head check in its
// WHERE, leaves PostgreSQL to guess how many records it must read to fill the batch. On a table never analysed
// it guessed few, and chose to read and sort every pending record, checking each against every earlier one: a
// claim's cost grew with the square of the backlog (issue 30: 3.6 s for 14,000 records, 71 ms after ANALYZE).
// Here every step is a LIMIT 1 probe whose order is its index's, a record is locked through its primary key
// inside a LATERAL that cannot be flattened (it locks), and nothing sorts: no plan the statistics could pick
// reads more than the walk, which is the batch and the records of held keys among it, one probe each, and the
// index entries of the records the probes pass over (docs/PERFORMANCE.md, "The ordered claim without
// statistics").
//
// The key probe names its blocking statuses as inequalities so that only the key index serves it: "status =
// 'pending'" would let the pending index, read in id order, answer it too, at the cost of every earlier record.
// Without DeadHoldsKey the probe passes over the dead records at the head of a key.
func (p postgres) orderedClaimQuery(t orderedTable, deadHoldsKey bool, skip int) string {
	blocks := "p.status <> 'published' AND p.status <> 'dead'"
	if deadHoldsKey {
		blocks = "p.status <> 'published'"
	}
	next := "SELECT i.id, i.created_at, i.key FROM " + t.outbox + " AS i WHERE i.status = 'pending' AND i.available_at <= $1" +
		pgSkipTopics("i", skip)
	return "WITH RECURSIVE walk (id, created_at, key) AS ((" + next + " ORDER BY i.id LIMIT 1)" +
		" UNION ALL SELECT n.* FROM walk AS w, LATERAL (" + next + " AND i.id > w.id ORDER BY i.id LIMIT 1) AS n)" +
		" SELECT c.* FROM walk AS w, LATERAL (SELECT " + qualify("o", p.recordCols()) + " FROM " + t.outbox + " AS o" +
		" WHERE o.id = w.id AND o.created_at = w.created_at AND o.status = 'pending' AND o.available_at <= $1" +
		" FOR UPDATE SKIP LOCKED) AS c" +
		" WHERE w.key = '' OR w.id = (SELECT p.id FROM " + t.outbox + " AS p WHERE p.key = w.key AND p.key <> '' AND " +
		blocks + " ORDER BY p.key, p.id LIMIT 1) LIMIT $2"
}

// qualify prefixes each column of the select list cols with alias.
func qualify(alias, cols string) string {
	return alias + "." + strings.ReplaceAll(cols, ", ", ", "+alias+".")
}

// pgSkipTopics is the condition leaving out the topics of the array in argument 3, on the outbox aliased alias.
func pgSkipTopics(alias string, skip int) string {
	if skip == 0 {
		return ""
	}
	return " AND " + alias + ".topic <> ALL($3::text[])"
}

func (postgres) claimArgs(now any, limit int, skip []string) []any {
	if len(skip) == 0 {
		return []any{now, limit}
	}
	return []any{now, limit, skip}
}

// deleteClaimQuery deletes the batch the claim would lock. The batch's IDs are locked first (SKIP LOCKED, so
// concurrent relays split the backlog as they do with the locking claim), then deleted through the primary key:
// as an array, the IDs keep the plan a primary-key probe per row whatever the limit, where "id IN (subquery)"
// can make a generic plan hash the whole table.
func (p postgres) deleteClaimQuery(outbox string, skip int) string {
	return "DELETE FROM " + outbox + " AS o WHERE o.id = ANY(ARRAY(SELECT i.id FROM " + outbox + " AS i" +
		" WHERE i.status = 'pending' AND i.available_at <= $1" + pgSkipTopics("i", skip) +
		" ORDER BY i.id LIMIT $2 FOR UPDATE SKIP LOCKED))" +
		" RETURNING " + p.recordCols()
}

func (postgres) mayInsert(outbox string) (string, []any) {
	return "SELECT has_table_privilege($1, 'INSERT')", []any{outbox}
}

// restore inserts recs again, as they were read but for what failed says of each, in one statement; inside the
// claim's transaction that deleted them the primary key is free again.
func (p postgres) restore(outbox string, recs []driver.Record, failed map[string]driver.Failure) (string, []any, error) {
	n := len(recs)
	status, attempts, errs := make([]string, n), make([]int32, n), make([]string, n)
	rows := make([]driver.Record, n)
	for i, r := range recs {
		status[i], attempts[i], errs[i] = string(r.Status), int32(r.Attempts), r.LastError
		if f, ok := failed[r.ID]; ok {
			r.AvailableAt, attempts[i], errs[i] = f.AvailableAt, int32(f.Attempts), f.LastError
			if f.Dead {
				status[i] = string(driver.StatusDead)
			}
		}
		rows[i] = r
	}
	args, err := p.rowArrays(rows)
	if err != nil {
		return "", nil, err
	}
	q := "INSERT INTO " + outbox + " (id, topic, key, type, payload, headers, available_at, created_at, status, attempts, last_error)" +
		" SELECT * FROM unnest($1::uuid[], $2::text[], $3::text[], $4::text[], $5::bytea[], $6::jsonb[]," +
		" $7::timestamptz[], $8::timestamptz[], $9::text[], $10::int[], $11::text[])"
	return q, append(args, status, attempts, errs), nil
}

const pgInsertColumns = "(id, topic, key, type, payload, headers, available_at, created_at)"

// insert writes one record with a VALUES row and several with unnest over arrays: one statement either way.
func (p postgres) insert(ctx context.Context, c Conn, outbox string, recs []driver.Record) error {
	q := "INSERT INTO " + outbox + " " + pgInsertColumns
	args, err := p.rowsArgs(recs)
	if err != nil {
		return err
	}
	if len(recs) == 1 {
		q += " VALUES ($1::uuid, $2, $3, $4, $5, $6::jsonb, $7, $8)"
	} else {
		q += " SELECT * FROM unnest($1::uuid[], $2::text[], $3::text[], $4::text[], $5::bytea[], $6::jsonb[]," +
			" $7::timestamptz[], $8::timestamptz[])"
	}
	_, err = c.Exec(ctx, q, args...)
	return err
}

// insertNotify is insert plus pg_notify on channel, which PostgreSQL delivers at commit, so the wake-up costs no
// round trip of its own.
func (p postgres) insertNotify(ctx context.Context, c Conn, outbox, channel string, recs []driver.Record) error {
	args, err := p.rowsArgs(recs)
	if err != nil {
		return err
	}
	wake := "(SELECT pg_notify($9, '')) AS w"
	q := "INSERT INTO " + outbox + " " + pgInsertColumns + " SELECT "
	if len(recs) == 1 {
		q += "$1::uuid, $2::text, $3::text, $4::text, $5::bytea, $6::jsonb, $7::timestamptz, $8::timestamptz FROM " + wake
	} else {
		q += "u.* FROM " + wake + ", unnest($1::uuid[], $2::text[], $3::text[], $4::text[], $5::bytea[], $6::jsonb[]," +
			" $7::timestamptz[], $8::timestamptz[]) AS u"
	}
	_, err = c.Exec(ctx, q, append(args, channel)...)
	return err
}

// rowsArgs are the eight arguments of insert: one record's values, or arrays of every record's.
func (p postgres) rowsArgs(recs []driver.Record) ([]any, error) {
	if len(recs) == 1 {
		return insertArgs(p, recs[0])
	}
	return p.rowArrays(recs)
}

// rowArrays are the eight arguments of an insert from unnest: one array per column of pgInsertColumns.
func (p postgres) rowArrays(recs []driver.Record) ([]any, error) {
	n := len(recs)
	ids, topics, keys, types := make([]string, n), make([]string, n), make([]string, n), make([]string, n)
	payloads, headers := make([][]byte, n), make([]*string, n)
	avail, created := make([]time.Time, n), make([]time.Time, n)
	for i, r := range recs {
		ids[i], topics[i], keys[i], types[i], payloads[i] = r.ID, r.Topic, r.Key, r.Type, payloadArg(r.Payload)
		h, err := encodeHeaders(r.Headers)
		if err != nil {
			return nil, err
		}
		if h != nil {
			hs := h.(string)
			headers[i] = &hs
		}
		avail[i], created[i] = r.AvailableAt.UTC(), r.CreatedAt.UTC()
	}
	return []any{ids, topics, keys, types, payloads, headers, avail, created}, nil
}

func (p postgres) settle(ctx context.Context, tx Conn, outbox string, st driver.Settlement, _ []driver.Record) error {
	q, args := p.settlement(outbox, st)
	_, err := tx.Exec(ctx, q, args...)
	return err
}

// settlement is the one statement settling a whole batch: the published records deleted or marked, the failed
// ones updated from arrays.
func (postgres) settlement(outbox string, st driver.Settlement) (string, []any) {
	n := len(st.Failed)
	ids, attempts, errs := make([]string, n), make([]int32, n), make([]string, n)
	avail, dead := make([]time.Time, n), make([]bool, n)
	for i, f := range st.Failed {
		ids[i], attempts[i], errs[i], avail[i], dead[i] = f.ID, int32(f.Attempts), f.LastError, f.AvailableAt.UTC(), f.Dead
	}
	published := "DELETE FROM " + outbox + " WHERE id = ANY($1::uuid[])"
	if st.Keep {
		published = "UPDATE " + outbox + " SET status = 'published', published_at = $7, attempts = attempts + 1" +
			" WHERE id = ANY($1::uuid[])"
	}
	q := "WITH published AS (" + published + "), failed AS (UPDATE " + outbox + " AS t" +
		" SET attempts = f.attempts, last_error = f.err, available_at = f.at," +
		" status = CASE WHEN f.dead THEN 'dead' ELSE 'pending' END" +
		" FROM unnest($2::uuid[], $3::int[], $4::text[], $5::timestamptz[], $6::bool[]) AS f(id, attempts, err, at, dead)" +
		" WHERE t.id = f.id) SELECT 1"
	pub := st.Published
	if pub == nil {
		pub = []string{}
	}
	args := []any{pub, ids, attempts, errs, avail, dead}
	if st.Keep {
		args = append(args, st.Now.UTC())
	}
	return q, args
}

// cleanup runs the batch in one transaction holding the cleanup lock as a transaction-level advisory lock, which
// stays correct behind PgBouncer in transaction mode.
func (p postgres) cleanup(ctx context.Context, db DB, n driver.Names, deletes []cleanupDelete, limit int) error {
	return cleanupInTx(ctx, db, p, deletes, limit, func(tx Conn) error { return p.xactLock(ctx, tx, n, LockCleanup) })
}

func (p postgres) cleanupQuery(table, key, where, order string) string {
	return deleteInSubquery(p, table, key, where, order)
}

func (p postgres) inboxQueries(n driver.Names) inboxSQL { return onConflictInboxQueries(p, n) }

// lockInboxKey locks nothing: a claim inserted by an open transaction makes ON CONFLICT wait for its outcome.
func (postgres) lockInboxKey(context.Context, Conn, driver.Names, string, string) error { return nil }

// migrate serialises concurrent migrators before anything else, CREATE SCHEMA IF NOT EXISTS included: concurrent
// IF NOT EXISTS statements can still collide in PostgreSQL's catalogs. DDL is transactional, so a migration
// applies whole or not at all.
func (p postgres) migrate(ctx context.Context, db DB, n driver.Names) ([]int, error) {
	return migrateInTx(ctx, db, p, n, func(tx Conn) error {
		if _, err := tx.Exec(ctx, "SELECT pg_advisory_xact_lock($1)", lockKey(n, lockMigrate)); err != nil {
			return fmt.Errorf("postbox: take migration lock: %w", err)
		}
		if n.Schema != "" {
			if _, err := tx.Exec(ctx, "CREATE SCHEMA IF NOT EXISTS "+p.QuoteIdent(n.Schema)); err != nil {
				return fmt.Errorf("postbox: create schema %s: %w", n.Schema, err)
			}
		}
		return nil
	})
}

func (postgres) tableExists(n driver.Names, table string) (string, []any) {
	q := "SELECT count(*) FROM information_schema.tables WHERE table_name = $1 AND table_schema = "
	if n.Schema == "" {
		return q + "current_schema()", []any{table}
	}
	return q + "$2", []any{table, n.Schema}
}

func (postgres) timeColumn() string { return "timestamptz" }

// containsText uses strpos: LIKE would read % and _ in the text as wildcards.
func (p postgres) containsText(col string, n int) string {
	return "strpos(" + col + ", " + p.ph(n) + ") > 0"
}

func (postgres) minuteOf(col string) string {
	return "floor(extract(epoch FROM " + col + ") / 60)::bigint"
}

func (postgres) upsertTail(key string, cols ...string) string { return onConflictUpdate(key, cols) }

func (p postgres) insertIgnore(table, cols string, n int) string {
	var b strings.Builder
	for i := 1; i <= n; i++ {
		if i > 1 {
			b.WriteString(", ")
		}
		b.WriteString(p.ph(i))
	}
	return "INSERT INTO " + table + " " + cols + " VALUES (" + b.String() + ") ON CONFLICT DO NOTHING"
}

func (postgres) statusScan(outbox string) string { return outbox + " AS o" }

// estimate sums reltuples over the index's leaf partitions, or reads the index's own when the table is not
// partitioned (pg_partition_tree lists nothing then):
// the row count as of the last VACUUM or ANALYZE, -1 while any partition has none.
func (postgres) estimate() string {
	return "SELECT CASE WHEN count(*) = 0 OR bool_or(c.reltuples < 0) THEN -1 ELSE sum(c.reltuples)::bigint END" +
		" FROM pg_class AS c WHERE c.relkind = 'i' AND (c.oid = to_regclass($1)" +
		" OR c.oid IN (SELECT t.relid FROM pg_partition_tree(to_regclass($1)) AS t WHERE t.isleaf))"
}

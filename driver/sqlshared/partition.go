package sqlshared

import (
	"context"
	"errors"
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/postbox-go/postbox/driver"
)

// The partitioned layout (driver.Names.Partitioned) ranges the outbox by created_at and the inbox by message_id,
// whose UUIDv7 text starts with the message's creation time (see IDBound). Each named partition covers one period
// and is labelled by its start, pYYYYMM, pYYYYMMDD or pYYYYMMDDHH in UTC; on PostgreSQL the label ends the
// partition's table name (driver.Derived(table, "_"+label)), on MySQL it is the partition's name. A tail partition
// takes every row no named partition covers, so an insert never fails for want of a partition: pmax (VALUES LESS
// THAN MAXVALUE) on MySQL, the DEFAULT partition on PostgreSQL.

// ErrNotPartitioned is returned by ListPartitions for a table created without the partitioned layout.
var ErrNotPartitioned = errors.New("postbox: table is not partitioned")

// PartitionedTable is a table of a set that the partitioned layout ranges.
type PartitionedTable int

// The partitioned tables of a set.
const (
	// OutboxPartitions is the outbox, ranged by created_at.
	OutboxPartitions PartitionedTable = iota
	// InboxPartitions is the inbox, ranged by message_id: a claim lands in the partition of the time its
	// message's UUIDv7 was made, so the key stays (consumer, message_id) and a duplicate claim meets the first.
	InboxPartitions
)

// String returns "outbox" or "inbox".
func (pt PartitionedTable) String() string {
	if pt == InboxPartitions {
		return "inbox"
	}
	return "outbox"
}

// name returns the table's unquoted name in n.
func (pt PartitionedTable) name(n driver.Names) string {
	if pt == InboxPartitions {
		return n.Inbox
	}
	return n.Outbox
}

// column is the partition column.
func (pt PartitionedTable) column() string {
	if pt == InboxPartitions {
		return "message_id"
	}
	return "created_at"
}

// mysqlMethod is the PARTITION_METHOD MySQL reports for the table.
func (pt PartitionedTable) mysqlMethod() string {
	if pt == InboxPartitions {
		return "RANGE COLUMNS"
	}
	return "RANGE"
}

// IDBound returns the inbox partition bound for time t: the text a UUIDv7 made at t starts with, its 48-bit Unix
// millisecond time as 8 hex digits, a hyphen and 4 more. IDs made at or after t sort bytewise at or after it, and
// IDs made before t sort before it.
func IDBound(t time.Time) string {
	ms := t.UnixMilli()
	return fmt.Sprintf("%08x-%04x", ms>>16, ms&0xffff)
}

// bound renders a partition bound as a literal: digits, hex and punctuation only, so it is safe to inline in DDL.
func (d Dialect) bound(pt PartitionedTable, t time.Time) string {
	switch {
	case pt == InboxPartitions:
		return "'" + IDBound(t) + "'"
	case d.my():
		return strconv.FormatInt(t.UnixMicro(), 10)
	}
	return "'" + pgTime(t) + "'"
}

// PartitionRange is one named partition to create.
type PartitionRange struct {
	Label      string    // pYYYYMM, pYYYYMMDD or pYYYYMMDDHH
	Start, End time.Time // rows with Start <= created_at < End, or message IDs made in that time
}

// PartitionLayout is what ListPartitions found.
type PartitionLayout struct {
	// Labels are the named partitions Postbox manages, in range order on MySQL and in no particular order on
	// PostgreSQL.
	Labels []string
	// Tail is the name of the partition that takes rows beyond the named ones; empty when it is missing.
	Tail string
}

// DDLHook is called with each statement that changes the schema or moves rows, just before it runs, so that a
// maintainer can log it.
type DDLHook func(ctx context.Context, stmt string)

var labelRE = regexp.MustCompile(`^p[0-9]{6}([0-9]{2}([0-9]{2})?)?$`)

// MySQLTail is the name of the tail partition on MySQL.
const MySQLTail = "pmax"

// partitionTable returns the quoted, qualified table of a PostgreSQL partition.
func (d Dialect) partitionTable(n driver.Names, name string) string { return d.table(n, name) }

// BeginMaintenance starts a maintenance run on a session: it bounds how long each later statement waits for a
// table lock, so that maintenance queued behind a long transaction gives up rather than stall producers behind
// it, and takes the table set's lock for purpose without waiting. It reports whether it got the lock; when it did
// not, the run is over and EndMaintenance must not be called.
//
// On PostgreSQL the run is one transaction holding a transaction-level advisory lock, which stays correct behind
// PgBouncer in transaction mode, and whose DDL commits or rolls back as a whole. MySQL commits DDL implicitly and
// has no transaction-level named lock, so the run holds GET_LOCK on the session.
func (d Dialect) BeginMaintenance(ctx context.Context, c Conn, n driver.Names, purpose string, lockTimeout time.Duration) (bool, error) {
	if !d.pg() {
		if d.my() {
			secs := max(int64((lockTimeout+time.Second-1)/time.Second), 1)
			if _, err := c.Exec(ctx, "SET SESSION lock_wait_timeout = "+strconv.FormatInt(secs, 10)); err != nil {
				return false, err
			}
		}
		return d.TryLock(ctx, c, n, purpose)
	}
	if _, err := c.Exec(ctx, "BEGIN"); err != nil {
		return false, err
	}
	got := false
	_, err := c.Exec(ctx, "SET LOCAL lock_timeout = "+strconv.FormatInt(max(lockTimeout.Milliseconds(), 1), 10))
	if err == nil {
		err = c.Query(ctx, "SELECT pg_try_advisory_xact_lock($1)", []any{lockKey(n, purpose)},
			func(scan func(...any) error) error { return scan(&got) })
	}
	if err != nil || !got {
		if _, rerr := c.Exec(context.WithoutCancel(ctx), "ROLLBACK"); rerr != nil {
			err = errors.Join(err, rerr)
		}
		if err != nil {
			return false, fmt.Errorf("postbox: take %s lock: %w", purpose, err)
		}
	}
	return got, nil
}

// EndMaintenance ends a run BeginMaintenance started: on PostgreSQL it commits, or rolls back when cause is not
// nil; on MySQL it releases the lock.
func (d Dialect) EndMaintenance(ctx context.Context, c Conn, n driver.Names, purpose string, cause error) error {
	if !d.pg() {
		return d.Unlock(ctx, c, n, purpose)
	}
	stmt := "COMMIT"
	if cause != nil {
		stmt = "ROLLBACK"
	}
	_, err := c.Exec(ctx, stmt)
	return err
}

// ListPartitions reports the partitions of n's table pt. It returns an error wrapping ErrNotPartitioned when the
// table exists but is not partitioned.
func (d Dialect) ListPartitions(ctx context.Context, c Conn, n driver.Names, pt PartitionedTable) (PartitionLayout, error) {
	switch {
	case d.pg():
		return d.listPostgres(ctx, c, n, pt)
	case d.my():
		return d.listMySQL(ctx, c, n, pt)
	}
	return PartitionLayout{}, fmt.Errorf("postbox: %s has no table partitioning", d.name)
}

func (d Dialect) missing(n driver.Names, pt PartitionedTable) error {
	return fmt.Errorf("postbox: table %s does not exist; run Migrate with Config.Partitioned first", d.table(n, pt.name(n)))
}

func (d Dialect) notPartitioned(n driver.Names, pt PartitionedTable) error {
	return fmt.Errorf("%w: %s was created without Config.Partitioned; drop partitions only from a table migrated with it, or use postbox.Cleaner",
		ErrNotPartitioned, d.table(n, pt.name(n)))
}

func (d Dialect) listMySQL(ctx context.Context, c Conn, n driver.Names, pt PartitionedTable) (PartitionLayout, error) {
	var out PartitionLayout
	rows := 0
	partitioned := false
	err := c.Query(ctx, "SELECT PARTITION_NAME, PARTITION_METHOD FROM information_schema.PARTITIONS"+
		" WHERE TABLE_SCHEMA = "+mysqlSchema+" AND TABLE_NAME = ? ORDER BY PARTITION_ORDINAL_POSITION",
		[]any{n.Schema, pt.name(n)}, func(scan func(...any) error) error {
			var name, method *string
			if err := scan(&name, &method); err != nil {
				return err
			}
			rows++
			switch {
			case name == nil: // the one row of an unpartitioned table
			case method == nil || *method != pt.mysqlMethod():
				return fmt.Errorf("postbox: table %s is partitioned by %v, not %s on %s", pt.name(n), method, pt.mysqlMethod(), pt.column())
			case *name == MySQLTail:
				partitioned, out.Tail = true, *name
			default:
				partitioned = true
				if labelRE.MatchString(*name) {
					out.Labels = append(out.Labels, *name)
				}
			}
			return nil
		})
	switch {
	case err != nil:
		return out, err
	case rows == 0:
		return out, d.missing(n, pt)
	case !partitioned:
		return out, d.notPartitioned(n, pt)
	}
	return out, nil
}

func (d Dialect) listPostgres(ctx context.Context, c Conn, n driver.Names, pt PartitionedTable) (PartitionLayout, error) {
	var out PartitionLayout
	parent := d.table(n, pt.name(n))
	var kind *string
	err := c.Query(ctx, "SELECT relkind::text FROM pg_class WHERE oid = to_regclass($1)", []any{parent},
		func(scan func(...any) error) error { return scan(&kind) })
	switch {
	case err != nil:
		return out, err
	case kind == nil:
		return out, d.missing(n, pt)
	case *kind != "p":
		return out, d.notPartitioned(n, pt)
	}
	err = c.Query(ctx, "SELECT c.relname::text, c.oid = pt.partdefid FROM pg_inherits i"+
		" JOIN pg_class c ON c.oid = i.inhrelid JOIN pg_partitioned_table pt ON pt.partrelid = i.inhparent"+
		" WHERE i.inhparent = to_regclass($1)", []any{parent}, func(scan func(...any) error) error {
		var name string
		var isDefault bool
		if err := scan(&name, &isDefault); err != nil {
			return err
		}
		if isDefault {
			out.Tail = name
			return nil
		}
		// Only partitions named as Postbox names them are Postbox's to manage.
		if i := strings.LastIndexByte(name, '_'); i >= 0 {
			label := name[i+1:]
			if labelRE.MatchString(label) && driver.Derived(pt.name(n), "_"+label) == name {
				out.Labels = append(out.Labels, label)
			}
		}
		return nil
	})
	return out, err
}

// OldestInTail returns the earliest created_at in the outbox's tail partition, and false when it is empty.
func (d Dialect) OldestInTail(ctx context.Context, c Conn, n driver.Names, tail string) (time.Time, bool, error) {
	q := "SELECT MIN(created_at) FROM " + d.partitionTable(n, tail)
	if d.my() {
		q = "SELECT MIN(created_at) FROM " + d.table(n, n.Outbox) + " PARTITION (" + d.QuoteIdent(tail) + ")"
	}
	oldest, dest := d.nullTimeDest()
	err := c.Query(ctx, q, nil, func(scan func(...any) error) error { return scan(dest) })
	t := oldest()
	return t, err == nil && !t.IsZero(), err
}

// AddPartitions creates the named partitions parts of n's table pt, which must be contiguous, ascending and after
// every existing one, moving the rows in their ranges out of the tail partition. It runs inside BeginMaintenance.
func (d Dialect) AddPartitions(ctx context.Context, c Conn, n driver.Names, pt PartitionedTable, tail string, parts []PartitionRange, hook DDLHook) error {
	if len(parts) == 0 {
		return nil
	}
	if d.my() {
		return d.addMySQL(ctx, c, n, pt, tail, parts, hook)
	}
	return d.addPostgres(ctx, c, n, pt, tail, parts, hook)
}

// addMySQL splits pmax: REORGANIZE moves pmax's rows into the new partitions in the same statement.
func (d Dialect) addMySQL(ctx context.Context, c Conn, n driver.Names, pt PartitionedTable, tail string, parts []PartitionRange, hook DDLHook) error {
	maxValue := "MAXVALUE"
	if pt == InboxPartitions {
		maxValue = "(MAXVALUE)" // RANGE COLUMNS takes a list of values
	}
	if tail != MySQLTail {
		return fmt.Errorf("postbox: table %s has no %s partition to split; add PARTITION %s VALUES LESS THAN %s",
			pt.name(n), MySQLTail, MySQLTail, maxValue)
	}
	var b strings.Builder
	b.WriteString("ALTER TABLE " + d.table(n, pt.name(n)) + " REORGANIZE PARTITION " + MySQLTail + " INTO (")
	for _, p := range parts {
		fmt.Fprintf(&b, "PARTITION %s VALUES LESS THAN (%s), ", d.QuoteIdent(p.Label), d.bound(pt, p.End))
	}
	b.WriteString("PARTITION " + MySQLTail + " VALUES LESS THAN " + maxValue + ")")
	stmt := b.String()
	hook(ctx, stmt)
	_, err := c.Exec(ctx, stmt)
	return err
}

// addPostgres creates the partitions holding the table's ACCESS EXCLUSIVE lock until the maintenance transaction
// ends, so that no row can reach the DEFAULT partition between looking into it and creating a partition for its
// range (PostgreSQL refuses a partition whose rows sit in the default one). Rows already there are moved: the
// default partition is detached, the new partitions created, the rows re-inserted through the parent, and the
// partition attached again.
func (d Dialect) addPostgres(ctx context.Context, c Conn, n driver.Names, pt PartitionedTable, tail string, parts []PartitionRange, hook DDLHook) error {
	parent := d.table(n, pt.name(n))
	from, to := parts[0].Start, parts[len(parts)-1].End
	// The inbox's message_id is COLLATE "C", so these comparisons are bytewise, as the partition bounds are.
	rng := fmt.Sprintf(" WHERE %s >= %s AND %s < %s", pt.column(), d.bound(pt, from), pt.column(), d.bound(pt, to))
	if _, err := c.Exec(ctx, "LOCK TABLE "+parent+" IN ACCESS EXCLUSIVE MODE"); err != nil {
		return err
	}
	move := false
	if tail != "" {
		err := c.Query(ctx, "SELECT 1 FROM "+d.partitionTable(n, tail)+rng+" LIMIT 1", nil,
			func(func(...any) error) error { move = true; return nil })
		if err != nil {
			return err
		}
	}
	var stmts []string
	if move {
		stmts = append(stmts, "ALTER TABLE "+parent+" DETACH PARTITION "+d.partitionTable(n, tail))
	}
	for _, p := range parts {
		stmts = append(stmts, fmt.Sprintf("CREATE TABLE %s PARTITION OF %s FOR VALUES FROM (%s) TO (%s)",
			d.partitionTable(n, driver.Derived(pt.name(n), "_"+p.Label)), parent, d.bound(pt, p.Start), d.bound(pt, p.End)))
	}
	if move {
		stmts = append(stmts,
			"INSERT INTO "+parent+" SELECT * FROM "+d.partitionTable(n, tail)+rng,
			"DELETE FROM "+d.partitionTable(n, tail)+rng,
			"ALTER TABLE "+parent+" ATTACH PARTITION "+d.partitionTable(n, tail)+" DEFAULT")
	}
	for _, s := range stmts {
		hook(ctx, s)
		if _, err := c.Exec(ctx, s); err != nil {
			return err
		}
	}
	return nil
}

// pgTime formats a partition bound: digits and punctuation only, so it is safe to inline in DDL.
func pgTime(t time.Time) string { return t.UTC().Format("2006-01-02 15:04:05+00") }

// DropInboxPartition drops the inbox's named partition label, whatever its claims: they are past retention. It
// runs inside BeginMaintenance; on PostgreSQL the table lock DROP TABLE takes is held until the maintenance
// transaction ends.
func (d Dialect) DropInboxPartition(ctx context.Context, c Conn, n driver.Names, label string, hook DDLHook) error {
	drop := "DROP TABLE " + d.partitionTable(n, driver.Derived(n.Inbox, "_"+label))
	if d.my() {
		drop = "ALTER TABLE " + d.table(n, n.Inbox) + " DROP PARTITION " + d.QuoteIdent(label)
	}
	hook(ctx, drop)
	_, err := c.Exec(ctx, drop)
	return err
}

// DropPartition drops the outbox's named partition label unless it holds a pending row, or a dead row when
// keepDead is set, and reports whether it dropped it. The check and the drop happen under a table lock, so no row
// can become pending in between (an operator retrying a dead message, say). It runs inside BeginMaintenance; on
// PostgreSQL the lock is held until the maintenance transaction ends.
func (d Dialect) DropPartition(ctx context.Context, c Conn, n driver.Names, label string, keepDead bool, hook DDLHook) (bool, error) {
	statuses := "('pending')"
	if keepDead {
		statuses = "('pending', 'dead')"
	}
	var from, drop, lock, unlock string
	parent := d.table(n, n.Outbox)
	if d.my() {
		from = parent + " PARTITION (" + d.QuoteIdent(label) + ")"
		drop = "ALTER TABLE " + parent + " DROP PARTITION " + d.QuoteIdent(label)
		lock, unlock = "LOCK TABLES "+parent+" WRITE", "UNLOCK TABLES"
	} else {
		from = d.partitionTable(n, driver.Derived(n.Outbox, "_"+label))
		drop = "DROP TABLE " + from
		lock = "LOCK TABLE " + parent + " IN ACCESS EXCLUSIVE MODE"
	}
	check := "SELECT 1 FROM " + from + " WHERE status IN " + statuses + " LIMIT 1"
	blocked := func() (bool, error) {
		found := false
		err := c.Query(ctx, check, nil, func(func(...any) error) error { found = true; return nil })
		return found, err
	}
	// Look without the lock first: a partition that must stay costs no table lock.
	if found, err := blocked(); err != nil || found {
		return false, err
	}
	run := func() (bool, error) {
		if _, err := c.Exec(ctx, lock); err != nil {
			return false, err
		}
		if found, err := blocked(); err != nil || found {
			return false, err
		}
		hook(ctx, drop)
		_, err := c.Exec(ctx, drop)
		return err == nil, err
	}
	if d.pg() {
		return run()
	}
	dropped, err := run()
	if _, uerr := c.Exec(context.WithoutCancel(ctx), unlock); err == nil && uerr != nil {
		err = uerr
	}
	return dropped && err == nil, err
}

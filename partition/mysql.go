package partition

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/postbox-go/postbox/driver"
)

// mysql is the partition DDL of MySQL 8 and MariaDB 10.6+. DDL commits implicitly and there is no
// transaction-level named lock, so a run holds GET_LOCK on its session. Times are Unix microseconds.
type mysql struct{}

// mysqlTail is the name of the tail partition.
const mysqlTail = "pmax"

// mysqlSchema is the SQL for the table set's schema: the configured one (the first argument), or else the
// connection's default database.
const mysqlSchema = "COALESCE(NULLIF(?, ''), DATABASE())"

// mysqlLockName names the lock as the MySQL store names its own, so that maintainers of every version exclude
// each other: GET_LOCK names are server-wide and at most 64 characters, so the database, table and purpose are
// hashed.
const mysqlLockName = "CONCAT('postbox_', MD5(CONCAT_WS('/', COALESCE(NULLIF(?, ''), DATABASE(), ''), ?, ?)))"

func (mysql) quote(s string) string { return "`" + strings.ReplaceAll(s, "`", "``") + "`" }

func (m mysql) table(n driver.Names, name string) string { return qualify(m.quote, n, name) }

func (mysql) begin(ctx context.Context, s driver.Session, n driver.Names, lockTimeout time.Duration) (bool, error) {
	secs := max(int64((lockTimeout+time.Second-1)/time.Second), 1)
	if _, err := s.Exec(ctx, "SET SESSION lock_wait_timeout = "+strconv.FormatInt(secs, 10)); err != nil {
		return false, err
	}
	var got *int64 // NULL on error
	err := s.Query(ctx, "SELECT GET_LOCK("+mysqlLockName+", 0)", []any{n.Schema, n.Outbox, lockPurpose},
		func(scan func(...any) error) error { return scan(&got) })
	if err != nil {
		return false, fmt.Errorf("postbox: take %s lock: %w", lockPurpose, err)
	}
	return got != nil && *got == 1, nil
}

// end releases the lock.
func (mysql) end(ctx context.Context, s driver.Session, n driver.Names, _ error) error {
	if _, err := s.Exec(ctx, "DO RELEASE_LOCK("+mysqlLockName+")", n.Schema, n.Outbox, lockPurpose); err != nil {
		return fmt.Errorf("postbox: release %s lock: %w", lockPurpose, err)
	}
	return nil
}

// method is the PARTITION_METHOD MySQL reports for the table.
func (mysql) method(t Table) string {
	if t == Inbox {
		return "RANGE COLUMNS"
	}
	return "RANGE"
}

func (m mysql) list(ctx context.Context, s driver.Session, n driver.Names, t Table) (Partitions, error) {
	var out Partitions
	rows := 0
	partitioned := false
	err := s.Query(ctx, "SELECT PARTITION_NAME, PARTITION_METHOD FROM information_schema.PARTITIONS"+
		" WHERE TABLE_SCHEMA = "+mysqlSchema+" AND TABLE_NAME = ? ORDER BY PARTITION_ORDINAL_POSITION",
		[]any{n.Schema, t.name(n)}, func(scan func(...any) error) error {
			var name, method *string
			if err := scan(&name, &method); err != nil {
				return err
			}
			rows++
			switch {
			case name == nil: // the one row of an unpartitioned table
			case method == nil || *method != m.method(t):
				return fmt.Errorf("postbox: table %s is partitioned by %v, not %s on %s", t.name(n), method, m.method(t), t.column())
			case *name == mysqlTail:
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
		return out, missing(m.table(n, t.name(n)))
	case !partitioned:
		return out, notPartitioned(m.table(n, t.name(n)))
	}
	return out, nil
}

func (m mysql) oldestInTail(ctx context.Context, s driver.Session, n driver.Names, tail string) (time.Time, bool, error) {
	var us *int64
	err := s.Query(ctx, "SELECT MIN(created_at) FROM "+m.table(n, n.Outbox)+" PARTITION ("+m.quote(tail)+")", nil,
		func(scan func(...any) error) error { return scan(&us) })
	if err != nil || us == nil {
		return time.Time{}, false, err
	}
	return time.UnixMicro(*us).UTC(), true, nil
}

// bound renders a partition bound as a literal: digits, hex and punctuation only, so it is safe to inline in DDL.
func (mysql) bound(t Table, at time.Time) string {
	if t == Inbox {
		return "'" + IDBound(at) + "'"
	}
	return strconv.FormatInt(at.UnixMicro(), 10)
}

// add splits pmax: REORGANIZE moves pmax's rows into the new partitions in the same statement.
func (m mysql) add(ctx context.Context, s driver.Session, n driver.Names, t Table, tail string, parts []partRange, hook ddlHook) error {
	if len(parts) == 0 {
		return nil
	}
	maxValue := "MAXVALUE"
	if t == Inbox {
		maxValue = "(MAXVALUE)" // RANGE COLUMNS takes a list of values
	}
	if tail != mysqlTail {
		return fmt.Errorf("postbox: table %s has no %s partition to split; add PARTITION %s VALUES LESS THAN %s",
			t.name(n), mysqlTail, mysqlTail, maxValue)
	}
	var b strings.Builder
	b.WriteString("ALTER TABLE " + m.table(n, t.name(n)) + " REORGANIZE PARTITION " + mysqlTail + " INTO (")
	for _, p := range parts {
		fmt.Fprintf(&b, "PARTITION %s VALUES LESS THAN (%s), ", m.quote(p.label), m.bound(t, p.end))
	}
	b.WriteString("PARTITION " + mysqlTail + " VALUES LESS THAN " + maxValue + ")")
	return run(ctx, s, hook, b.String())
}

func (m mysql) dropInbox(ctx context.Context, s driver.Session, n driver.Names, label string, hook ddlHook) error {
	return run(ctx, s, hook, "ALTER TABLE "+m.table(n, n.Inbox)+" DROP PARTITION "+m.quote(label))
}

// drop looks without a lock first, so that a partition that must stay costs no table lock, then looks again and
// drops under LOCK TABLES, released at once.
func (m mysql) drop(ctx context.Context, s driver.Session, n driver.Names, label string, keepDead bool, hook ddlHook) (dropped bool, err error) {
	parent := m.table(n, n.Outbox)
	blocked := blockedBy(s, parent+" PARTITION ("+m.quote(label)+")", keepDead)
	if found, err := blocked(ctx); err != nil || found {
		return false, err
	}
	if _, err := s.Exec(ctx, "LOCK TABLES "+parent+" WRITE"); err != nil {
		return false, err
	}
	defer func() {
		if _, uerr := s.Exec(context.WithoutCancel(ctx), "UNLOCK TABLES"); err == nil && uerr != nil {
			dropped, err = false, uerr
		}
	}()
	if found, err := blocked(ctx); err != nil || found {
		return false, err
	}
	err = run(ctx, s, hook, "ALTER TABLE "+parent+" DROP PARTITION "+m.quote(label))
	return err == nil, err
}

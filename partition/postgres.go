package partition

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/postbox-go/postbox/driver"
)

// postgres is the partition DDL of PostgreSQL. A run is one transaction holding a transaction-level advisory lock,
// which stays correct behind PgBouncer in transaction mode, and whose DDL commits or rolls back as a whole.
type postgres struct{}

func (postgres) table(n driver.Names, name string) string { return qualify(driver.QuoteIdent, n, name) }

func (p postgres) begin(ctx context.Context, s driver.Session, n driver.Names, lockTimeout time.Duration) (bool, error) {
	if _, err := s.Exec(ctx, "BEGIN"); err != nil {
		return false, err
	}
	got := false
	_, err := s.Exec(ctx, "SET LOCAL lock_timeout = "+strconv.FormatInt(max(lockTimeout.Milliseconds(), 1), 10))
	if err == nil {
		err = s.Query(ctx, "SELECT pg_try_advisory_xact_lock($1)", []any{lockKey(n, lockPurpose)},
			func(scan func(...any) error) error { return scan(&got) })
	}
	if err != nil || !got {
		if _, rerr := s.Exec(context.WithoutCancel(ctx), "ROLLBACK"); rerr != nil {
			err = errors.Join(err, rerr)
		}
		if err != nil {
			return false, fmt.Errorf("postbox: take %s lock: %w", lockPurpose, err)
		}
	}
	return got, nil
}

// end commits, or rolls back when cause is not nil.
func (postgres) end(ctx context.Context, s driver.Session, _ driver.Names, cause error) error {
	stmt := "COMMIT"
	if cause != nil {
		stmt = "ROLLBACK"
	}
	_, err := s.Exec(ctx, stmt)
	return err
}

func (p postgres) list(ctx context.Context, s driver.Session, n driver.Names, t Table) (Partitions, error) {
	var out Partitions
	parent := p.table(n, t.name(n))
	var kind *string
	err := s.Query(ctx, "SELECT relkind::text FROM pg_class WHERE oid = to_regclass($1)", []any{parent},
		func(scan func(...any) error) error { return scan(&kind) })
	switch {
	case err != nil:
		return out, err
	case kind == nil:
		return out, missing(parent)
	case *kind != "p":
		return out, notPartitioned(parent)
	}
	err = s.Query(ctx, "SELECT c.relname::text, c.oid = pt.partdefid FROM pg_inherits i"+
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
			if labelRE.MatchString(label) && driver.Derived(t.name(n), "_"+label) == name {
				out.Labels = append(out.Labels, label)
			}
		}
		return nil
	})
	return out, err
}

func (p postgres) oldestInTail(ctx context.Context, s driver.Session, n driver.Names, tail string) (time.Time, bool, error) {
	var oldest *time.Time
	err := s.Query(ctx, "SELECT MIN(created_at) FROM "+p.table(n, tail), nil,
		func(scan func(...any) error) error { return scan(&oldest) })
	if err != nil || oldest == nil {
		return time.Time{}, false, err
	}
	return *oldest, true, nil
}

// bound renders a partition bound as a literal: digits, hex and punctuation only, so it is safe to inline in DDL.
func (postgres) bound(t Table, at time.Time) string {
	if t == Inbox {
		return "'" + IDBound(at) + "'"
	}
	return "'" + at.UTC().Format("2006-01-02 15:04:05+00") + "'"
}

// add creates the partitions holding the table's ACCESS EXCLUSIVE lock until the maintenance transaction ends, so
// that no row can reach the DEFAULT partition between looking into it and creating a partition for its range
// (PostgreSQL refuses a partition whose rows sit in the default one). Rows already there are moved: the default
// partition is detached, the new partitions created, the rows re-inserted through the parent, and the partition
// attached again.
func (p postgres) add(ctx context.Context, s driver.Session, n driver.Names, t Table, tail string, parts []partRange, hook ddlHook) error {
	if len(parts) == 0 {
		return nil
	}
	parent := p.table(n, t.name(n))
	from, to := parts[0].start, parts[len(parts)-1].end
	// The inbox's message_id is COLLATE "C", so these comparisons are bytewise, as the partition bounds are.
	rng := fmt.Sprintf(" WHERE %s >= %s AND %s < %s", t.column(), p.bound(t, from), t.column(), p.bound(t, to))
	if _, err := s.Exec(ctx, "LOCK TABLE "+parent+" IN ACCESS EXCLUSIVE MODE"); err != nil {
		return err
	}
	move := false
	if tail != "" {
		err := s.Query(ctx, "SELECT 1 FROM "+p.table(n, tail)+rng+" LIMIT 1", nil,
			func(func(...any) error) error { move = true; return nil })
		if err != nil {
			return err
		}
	}
	var stmts []string
	if move {
		stmts = append(stmts, "ALTER TABLE "+parent+" DETACH PARTITION "+p.table(n, tail))
	}
	for _, pr := range parts {
		stmts = append(stmts, fmt.Sprintf("CREATE TABLE %s PARTITION OF %s FOR VALUES FROM (%s) TO (%s)",
			p.table(n, driver.Derived(t.name(n), "_"+pr.label)), parent, p.bound(t, pr.start), p.bound(t, pr.end)))
	}
	if move {
		stmts = append(stmts,
			"INSERT INTO "+parent+" SELECT * FROM "+p.table(n, tail)+rng,
			"DELETE FROM "+p.table(n, tail)+rng,
			"ALTER TABLE "+parent+" ATTACH PARTITION "+p.table(n, tail)+" DEFAULT")
	}
	return run(ctx, s, hook, stmts...)
}

// dropInbox drops the partition's table; the table lock DROP TABLE takes is held until the maintenance
// transaction ends.
func (p postgres) dropInbox(ctx context.Context, s driver.Session, n driver.Names, label string, hook ddlHook) error {
	return run(ctx, s, hook, "DROP TABLE "+p.table(n, driver.Derived(n.Inbox, "_"+label)))
}

// drop looks without a lock first, so that a partition that must stay costs no table lock, then takes the
// parent's lock, held until the maintenance transaction ends, looks again and drops.
func (p postgres) drop(ctx context.Context, s driver.Session, n driver.Names, label string, keepDead bool, hook ddlHook) (bool, error) {
	part := p.table(n, driver.Derived(n.Outbox, "_"+label))
	blocked := blockedBy(s, part, keepDead)
	if found, err := blocked(ctx); err != nil || found {
		return false, err
	}
	if _, err := s.Exec(ctx, "LOCK TABLE "+p.table(n, n.Outbox)+" IN ACCESS EXCLUSIVE MODE"); err != nil {
		return false, err
	}
	if found, err := blocked(ctx); err != nil || found {
		return false, err
	}
	err := run(ctx, s, hook, "DROP TABLE "+part)
	return err == nil, err
}

// blockedBy returns a check of whether the rows of from hold a pending message, or a dead one when keepDead is
// set.
func blockedBy(s driver.Session, from string, keepDead bool) func(ctx context.Context) (bool, error) {
	statuses := "('pending')"
	if keepDead {
		statuses = "('pending', 'dead')"
	}
	check := "SELECT 1 FROM " + from + " WHERE status IN " + statuses + " LIMIT 1"
	return func(ctx context.Context) (bool, error) {
		found := false
		err := s.Query(ctx, check, nil, func(func(...any) error) error { found = true; return nil })
		return found, err
	}
}

// run passes each statement to hook and runs it, stopping at the first error.
func run(ctx context.Context, s driver.Session, hook ddlHook, stmts ...string) error {
	for _, stmt := range stmts {
		hook(ctx, stmt)
		if _, err := s.Exec(ctx, stmt); err != nil {
			return err
		}
	}
	return nil
}

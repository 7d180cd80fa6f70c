package sqlshared

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/postbox-go/postbox/driver"
)

// cleanupSet is one kind of row a cleanup batch deletes.
type cleanupSet struct {
	query  string // arguments: before, limit
	before time.Time
	n      *int64
}

// Cleanup deletes one batch of each selected set under the table set's cleanup lock.
//
// PostgreSQL takes the lock as a transaction-level advisory lock, which stays correct behind PgBouncer in
// transaction mode, where a session-level lock could be left behind on a server connection. MySQL has no
// transaction-level named lock: it holds GET_LOCK on a session of its own, and each delete commits on its own at
// READ COMMITTED, so no gap locks stall producers. SQLite has one writer, so cleaners simply take turns.
func (s *store[TTx]) Cleanup(ctx context.Context, p driver.CleanupParams) (driver.CleanupResult, error) {
	var res driver.CleanupResult
	if p.Limit <= 0 {
		return res, fmt.Errorf("postbox: cleanup limit is %d; use a positive number of rows", p.Limit)
	}
	inbox, failures := s.d.table(s.n, s.n.Inbox), s.d.table(s.n, driver.Derived(s.n.Inbox, "_failures"))
	var sets []cleanupSet
	for _, c := range []struct {
		before                   time.Time
		table, key, where, order string
		n                        *int64
	}{
		{p.PublishedBefore, s.outbox, "id", "status = 'published' AND published_at", "published_at", &res.Published},
		{p.DeadBefore, s.outbox, "id", "status = 'dead' AND available_at", "available_at", &res.Dead},
		{p.InboxBefore, inbox, "consumer, message_id", "received_at", "received_at", &res.InboxClaims},
		{p.InboxBefore, failures, "consumer, message_id", "updated_at", "updated_at", &res.InboxFailures},
	} {
		if !c.before.IsZero() {
			sets = append(sets, cleanupSet{s.d.cleanupQuery(c.table, c.key, c.where, c.order), c.before, c.n})
		}
	}
	if len(sets) == 0 {
		return res, nil
	}
	if s.d.my() {
		return res, s.cleanupMySQL(ctx, sets, p.Limit)
	}
	err := s.inTx(ctx, func(tx Conn) error {
		if s.d.pg() {
			got := false
			err := tx.Query(ctx, "SELECT pg_try_advisory_xact_lock($1)", []any{lockKey(s.n, LockCleanup)},
				func(scan func(...any) error) error { return scan(&got) })
			if err != nil {
				return err
			}
			if !got {
				return driver.ErrLocked
			}
		}
		for _, set := range sets {
			n, err := tx.Exec(ctx, set.query, s.d.Time(set.before), p.Limit)
			if err != nil {
				return err
			}
			*set.n = n
		}
		return nil
	})
	if err != nil {
		return driver.CleanupResult{}, err // rolled back: nothing was deleted
	}
	return res, nil
}

// cleanupMySQL runs each set's delete on a session holding the cleanup lock. Each delete commits on its own, so
// the counts of those that ran stand even when a later one fails.
func (s *store[TTx]) cleanupMySQL(ctx context.Context, sets []cleanupSet, limit int) (err error) {
	sess, err := s.b.Session(ctx)
	if err != nil {
		return err
	}
	// Closing the session releases the lock even when an explicit release fails.
	defer func() { err = errors.Join(err, sess.Close()) }()
	got, err := s.d.TryLock(ctx, sess, s.n, LockCleanup)
	if err != nil {
		return err
	}
	if !got {
		return driver.ErrLocked
	}
	defer func() {
		if uerr := s.d.Unlock(context.WithoutCancel(ctx), sess, s.n, LockCleanup); err == nil {
			err = uerr
		}
	}()
	if _, err := sess.Exec(ctx, "SET SESSION TRANSACTION ISOLATION LEVEL READ COMMITTED"); err != nil {
		return err
	}
	for _, set := range sets {
		n, err := sess.Exec(ctx, set.query, s.d.Time(set.before), limit)
		if err != nil {
			return err
		}
		*set.n = n
	}
	return nil
}

// cleanupQuery deletes at most the second argument of the rows of table whose where column is before the first
// argument, oldest by order first. key is the table's primary key. Every part is a constant, never input.
func (d Dialect) cleanupQuery(table, key, where, order string) string {
	cond := " WHERE " + where + " < " + d.ph(1)
	if d.my() {
		// MySQL cannot delete from a table it selects from in a subquery, nor take LIMIT in an IN subquery, but
		// DELETE itself takes ORDER BY and LIMIT.
		return "DELETE FROM " + table + cond + " ORDER BY " + order + " LIMIT " + d.ph(2)
	}
	return "DELETE FROM " + table + " WHERE (" + key + ") IN (SELECT " + key + " FROM " + table + cond +
		" ORDER BY " + order + " LIMIT " + d.ph(2) + ")"
}

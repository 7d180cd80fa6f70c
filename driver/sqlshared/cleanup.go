package sqlshared

import (
	"context"
	"errors"
	"time"

	"github.com/postbox-go/postbox/driver"
)

// Cleanup deletes old published and dead records in batches, each its own transaction.
//
// PostgreSQL takes the table set's cleanup lock per batch as a transaction-level advisory lock, which stays
// correct behind PgBouncer in transaction mode, where a session-level lock could be left behind on a server
// connection. MySQL has no transaction-level named lock: it holds GET_LOCK on a session of its own for the whole
// run, and each delete commits on its own at READ COMMITTED, so no gap locks stall producers. SQLite has one
// writer, so cleaners simply take turns.
func (s *store[TTx]) Cleanup(ctx context.Context, p driver.CleanupParams) (res driver.CleanupResult, err error) {
	if !s.d.my() {
		return s.cleanupBatches(ctx, p, func(q string, args ...any) (n int64, err error) {
			err = s.inTx(ctx, func(tx Conn) error {
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
				n, err = tx.Exec(ctx, q, args...)
				return err
			})
			return n, err
		})
	}
	sess, err := s.b.Session(ctx)
	if err != nil {
		return res, err
	}
	// Closing the session releases the lock even when an explicit release fails.
	defer func() { err = errors.Join(err, sess.Close()) }()
	got, err := s.d.TryLock(ctx, sess, s.n, LockCleanup)
	if err != nil {
		return res, err
	}
	if !got {
		return res, driver.ErrLocked
	}
	if _, err := sess.Exec(ctx, "SET SESSION TRANSACTION ISOLATION LEVEL READ COMMITTED"); err != nil {
		return res, err
	}
	res, err = s.cleanupBatches(ctx, p, func(q string, args ...any) (int64, error) { return sess.Exec(ctx, q, args...) })
	if uerr := s.d.Unlock(context.WithoutCancel(ctx), sess, s.n, LockCleanup); err == nil {
		err = uerr
	}
	return res, err
}

// cleanupBatches runs each selected kind's delete until a batch comes back short, and stops early when ctx is done.
// When exec reports ErrLocked after a first batch, another instance took over between batches: the run ends
// without error.
func (s *store[TTx]) cleanupBatches(ctx context.Context, p driver.CleanupParams, exec func(q string, args ...any) (int64, error)) (driver.CleanupResult, error) {
	var res driver.CleanupResult
	ran := false
	kinds := []struct {
		before      time.Time
		status, col string
		total       *int64
	}{
		{p.PublishedBefore, "published", "published_at", &res.Published},
		{p.DeadBefore, "dead", "available_at", &res.Dead},
	}
	for _, k := range kinds {
		if k.before.IsZero() {
			continue
		}
		q := s.cleanupQuery(k.status, k.col)
		for {
			if err := ctx.Err(); err != nil {
				return res, err
			}
			n, err := exec(q, s.d.Time(k.before), p.BatchSize)
			if errors.Is(err, driver.ErrLocked) && ran {
				return res, nil
			}
			if err != nil {
				return res, err
			}
			ran = true
			if n > 0 {
				*k.total += n
				res.Batches++
			}
			if n < int64(p.BatchSize) {
				break
			}
		}
	}
	return res, nil
}

// cleanupQuery deletes one batch of records in status whose col is before the first argument, at most the second
// argument of them. The status is a constant, never input.
func (s *store[TTx]) cleanupQuery(status, col string) string {
	where := " WHERE status = '" + status + "' AND " + col + " < " + s.d.ph(1)
	if s.d.my() {
		// MySQL cannot delete from a table it selects from in a subquery, nor take LIMIT in an IN subquery, but
		// DELETE itself takes ORDER BY and LIMIT.
		return "DELETE FROM " + s.outbox + where + " ORDER BY " + col + " LIMIT " + s.d.ph(2)
	}
	return "DELETE FROM " + s.outbox + " WHERE id IN (SELECT id FROM " + s.outbox + where +
		" ORDER BY " + col + " LIMIT " + s.d.ph(2) + ")"
}

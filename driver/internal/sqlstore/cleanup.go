package sqlstore

import (
	"context"
	"fmt"
	"time"

	"github.com/postbox-go/postbox/driver"
)

// cleanupDelete is one set of rows a cleanup batch deletes.
type cleanupDelete struct {
	query  string // arguments: before, limit
	before time.Time
	n      *int64 // set to the rows deleted
}

// Cleanup deletes one batch of each selected set under the table set's cleanup lock; the dialect decides how the
// lock is held and the deletes commit.
func (s *store[TTx]) Cleanup(ctx context.Context, p driver.CleanupParams) (driver.CleanupResult, error) {
	var res driver.CleanupResult
	if p.Limit <= 0 {
		return res, fmt.Errorf("postbox: cleanup limit is %d; use a positive number of rows", p.Limit)
	}
	inbox, failures := table(s.d, s.n, s.n.Inbox), table(s.d, s.n, driver.Derived(s.n.Inbox, "_failures"))
	var deletes []cleanupDelete
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
			deletes = append(deletes, cleanupDelete{s.d.cleanupQuery(c.table, c.key, c.where, c.order), c.before, c.n})
		}
	}
	if len(deletes) == 0 {
		return res, nil
	}
	err := s.d.cleanup(ctx, s.b, s.n, deletes, p.Limit)
	return res, err
}

// cleanupInTx runs the deletes in one transaction, after lock when there is one, and counts nothing when the
// transaction rolls back.
func cleanupInTx(ctx context.Context, db DB, d Dialect, deletes []cleanupDelete, limit int, lock func(tx Conn) error) error {
	err := inTx(ctx, db, func(tx Conn) error {
		if lock != nil {
			if err := lock(tx); err != nil {
				return err
			}
		}
		return runDeletes(ctx, tx, d, deletes, limit)
	})
	if err != nil {
		for _, del := range deletes {
			*del.n = 0
		}
	}
	return err
}

// deleteInSubquery is cleanupQuery for databases that delete through a LIMITed subquery (PostgreSQL, SQLite).
func deleteInSubquery(d Dialect, table, key, where, order string) string {
	return "DELETE FROM " + table + " WHERE (" + key + ") IN (SELECT " + key + " FROM " + table +
		" WHERE " + where + " < " + d.ph(1) + " ORDER BY " + order + " LIMIT " + d.ph(2) + ")"
}

// runDeletes runs each delete on c and sets its count, stopping at the first error.
func runDeletes(ctx context.Context, c Conn, d Dialect, deletes []cleanupDelete, limit int) error {
	for _, del := range deletes {
		n, err := c.Exec(ctx, del.query, d.timeArg(del.before), limit)
		if err != nil {
			return err
		}
		*del.n = n
	}
	return nil
}

package sqlstore

import (
	"context"
	"time"

	"github.com/postbox-go/postbox/driver"
)

// inboxSQL holds the inbox statements of one table set.
type inboxSQL struct {
	claim        string // consumer, message id, received at
	countFailure string // consumer, message id, last error, now; returns the new count, unless readFailures is set
	readFailures string // consumer, message id: the count countFailure left, where it cannot return it
	markFailed   string // consumer, message id, received at, failures, last error
	dropFailures string // consumer, message id
}

// onConflictInboxQueries are the inbox statements of databases with INSERT ... ON CONFLICT and RETURNING
// (PostgreSQL, SQLite). DO NOTHING and the affected-row count make a duplicate claim no error, so it never aborts
// the transaction.
func onConflictInboxQueries(d Dialect, n driver.Names) inboxSQL {
	inbox := table(d, n, n.Inbox)
	failures := table(d, n, driver.Derived(n.Inbox, "_failures"))
	p := d.ph
	return inboxSQL{
		claim: "INSERT INTO " + inbox + " (consumer, message_id, received_at) VALUES (" + p(1) + ", " + p(2) + ", " + p(3) + ")" +
			" ON CONFLICT (consumer, message_id) DO NOTHING",
		countFailure: "INSERT INTO " + failures + " AS f (consumer, message_id, failures, last_error, updated_at)" +
			" VALUES (" + p(1) + ", " + p(2) + ", 1, " + p(3) + ", " + p(4) + ")" +
			" ON CONFLICT (consumer, message_id) DO UPDATE SET failures = f.failures + 1," +
			" last_error = excluded.last_error, updated_at = excluded.updated_at RETURNING failures",
		markFailed: "INSERT INTO " + inbox + " (consumer, message_id, status, received_at, failures, last_error)" +
			" VALUES (" + p(1) + ", " + p(2) + ", 'failed', " + p(3) + ", " + p(4) + ", " + p(5) + ")" +
			" ON CONFLICT (consumer, message_id) DO NOTHING",
		dropFailures: "DELETE FROM " + failures + " WHERE consumer = " + p(1) + " AND message_id = " + p(2),
	}
}

func (s *store[TTx]) InboxClaim(ctx context.Context, tx TTx, consumer, messageID string, now time.Time) (bool, error) {
	c := s.b.Conn(tx)
	if err := s.d.lockInboxKey(ctx, c, s.n, consumer, messageID); err != nil {
		return false, err
	}
	n, err := c.Exec(ctx, s.d.inboxQueries(s.n).claim, consumer, messageID, s.d.timeArg(now))
	return n == 1, err
}

func (s *store[TTx]) InboxFail(ctx context.Context, tx TTx, f driver.InboxFailure) (driver.InboxFailResult, error) {
	q, c := s.d.inboxQueries(s.n), s.b.Conn(tx)
	var res driver.InboxFailResult
	if err := s.d.lockInboxKey(ctx, c, s.n, f.Consumer, f.MessageID); err != nil {
		return res, err
	}
	args := []any{f.Consumer, f.MessageID, f.LastError, s.d.timeArg(f.Now)}
	scanCount := func(scan func(...any) error) error { return scan(&res.Failures) }
	var err error
	if q.readFailures != "" {
		// The upsert holds the row's lock until tx ends, so the count read next is the one it wrote.
		if _, err = c.Exec(ctx, q.countFailure, args...); err == nil {
			err = c.Query(ctx, q.readFailures, []any{f.Consumer, f.MessageID}, scanCount)
		}
	} else {
		err = c.Query(ctx, q.countFailure, args, scanCount)
	}
	if err != nil {
		return res, err
	}
	if !f.Give && (f.MaxFailures <= 0 || res.Failures < f.MaxFailures) {
		return res, nil
	}
	// The failed marker is a claim like any other, so every later delivery is a duplicate. If a delivery that
	// succeeded claimed the message meanwhile, its claim stands and nothing is marked.
	marked, err := c.Exec(ctx, q.markFailed, f.Consumer, f.MessageID, s.d.timeArg(f.Now), res.Failures, f.LastError)
	if err != nil {
		return res, err
	}
	res.Failed = marked == 1
	if res.Failed {
		// The count now lives on the claim.
		if _, err := c.Exec(ctx, q.dropFailures, f.Consumer, f.MessageID); err != nil {
			return res, err
		}
	}
	return res, nil
}

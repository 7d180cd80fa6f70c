package sqlshared

import (
	"context"
	"time"

	"github.com/postbox-go/postbox/driver"
)

// InboxTable returns the quoted, qualified name of a table derived from the inbox table's name with suffix, for
// migration templates.
func (t templateData) InboxTable(suffix string) string {
	return t.d.table(t.n, driver.Derived(t.n.Inbox, suffix))
}

// inboxSQL holds the inbox statements of one table set.
type inboxSQL struct {
	claim        string // consumer, message id, received at
	countFailure string // consumer, message id, last error, now; returns the new count, except on MySQL
	readFailures string // consumer, message id: the count countFailure left (MySQL only, which has no RETURNING)
	lockKey      string // stripe: queues claimers of one key (MySQL only; see mysqlInboxQueries)
	markFailed   string // consumer, message id, received at, failures, last error
	dropFailures string // consumer, message id
}

// inboxQueries renders the inbox statements. They are cheap to build, so they are built per call rather than
// stored on the store.
func (d Dialect) inboxQueries(n driver.Names) inboxSQL {
	if d.my() {
		return d.mysqlInboxQueries(n)
	}
	inbox := d.table(n, n.Inbox)
	failures := d.table(n, driver.Derived(n.Inbox, "_failures"))
	p := d.ph
	return inboxSQL{
		// DO NOTHING and the affected-row count: a duplicate is not an error, so it never aborts the transaction.
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
	q, c := s.d.inboxQueries(s.n), s.b.Conn(tx)
	if err := lockInboxKey(ctx, c, q, consumer, messageID); err != nil {
		return false, err
	}
	n, err := c.Exec(ctx, q.claim, consumer, messageID, s.d.Time(now))
	return n == 1, err
}

func (s *store[TTx]) InboxFail(ctx context.Context, tx TTx, f driver.InboxFailure) (driver.InboxFailResult, error) {
	q, c := s.d.inboxQueries(s.n), s.b.Conn(tx)
	var res driver.InboxFailResult
	if err := lockInboxKey(ctx, c, q, f.Consumer, f.MessageID); err != nil {
		return res, err
	}
	args := []any{f.Consumer, f.MessageID, f.LastError, s.d.Time(f.Now)}
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
	marked, err := c.Exec(ctx, q.markFailed, f.Consumer, f.MessageID, s.d.Time(f.Now), res.Failures, f.LastError)
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

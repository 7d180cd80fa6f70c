package sqlshared

import (
	"context"
	"time"

	"github.com/postbox-go/postbox/driver"
)

// withOptional returns s with the optional capabilities of its dialect: every store peeks and claims in order;
// a PostgreSQL store also notifies.
func withOptional[TTx any](s *store[TTx]) driver.Store[TTx] {
	if s.d.pg() {
		return pgStore[TTx]{s}
	}
	return s
}

// pgStore is a store on PostgreSQL, which can notify listening relays.
type pgStore[TTx any] struct{ *store[TTx] }

// InsertNotify implements driver.Notifier: the insert calls pg_notify, which PostgreSQL delivers at commit, so the
// wake-up costs no round trip of its own.
func (s pgStore[TTx]) InsertNotify(ctx context.Context, tx TTx, recs []driver.Record) error {
	var args []any
	var err error
	wake := "(SELECT pg_notify($9, '')) AS w"
	q := "INSERT INTO " + s.outbox + " " + s.insertCols + " SELECT "
	if len(recs) == 1 {
		args, err = s.insertArgs(recs[0])
		q += "$1::uuid, $2::text, $3::text, $4::text, $5::bytea, $6::jsonb, $7::timestamptz, $8::timestamptz FROM " + wake
	} else {
		args, err = unnestArgs(recs)
		q += "u.* FROM " + wake + ", unnest($1::uuid[], $2::text[], $3::text[], $4::text[], $5::bytea[], $6::jsonb[]," +
			" $7::timestamptz[], $8::timestamptz[]) AS u"
	}
	if err != nil {
		return err
	}
	_, err = s.b.Conn(tx).Exec(ctx, q, append(args, s.n.Channel())...)
	return err
}

// Claimable implements driver.Peeker with one statement outside any transaction.
func (s *store[TTx]) Claimable(ctx context.Context, now time.Time) (bool, error) {
	found := false
	err := s.b.Pool().Query(ctx, s.peek, []any{s.d.Time(now)}, func(func(...any) error) error {
		found = true
		return nil
	})
	return found, err
}

// ClaimOrdered implements driver.OrderedClaimer with a head-of-line claim: a pending record is claimable when no
// earlier record of its key blocks it. The index on (key, id) of unpublished records (migration 3; on MySQL on
// (key, status, id)) answers each check with one probe. Rows locked by another claim are skipped, and so are the rows behind them, because a
// locked head is still pending; so several relays share the keys without ever holding two records of one key.
func (s *store[TTx]) ClaimOrdered(ctx context.Context, p driver.ClaimParams, deadHoldsKey bool) (driver.Claim, error) {
	return s.claimWith(ctx, s.orderedClaim(deadHoldsKey), p)
}

func (s *store[TTx]) orderedClaim(deadHoldsKey bool) string {
	blocks := "p.status = 'pending'"
	if deadHoldsKey {
		blocks = "p.status <> 'published'"
	}
	from := s.outbox + " AS o"
	if s.d.my() {
		from += " FORCE INDEX (" + mysqlClaimIndex + ")" // as in ClaimSQL: pending rows in id order, never the others
	}
	q := "SELECT " + s.cols + " FROM " + from + " WHERE o.status = 'pending' AND o.available_at <= " + s.d.ph(1) +
		" AND (o.key = '' OR NOT EXISTS (SELECT 1 FROM " + s.outbox + " AS p WHERE p.key = o.key AND p.key <> '' AND" +
		" p.id < o.id AND " + blocks + ")) ORDER BY o.id LIMIT " + s.d.ph(2)
	if s.d.Capabilities().SkipLocked {
		// Locks only o's rows: a locking clause does not reach into a subquery.
		q += " FOR UPDATE SKIP LOCKED"
	}
	return q
}

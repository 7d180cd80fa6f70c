package sqlshared

import (
	"context"
	"time"

	"github.com/postbox-go/postbox/driver"
)

// Claim locks a batch in a transaction that stays open while the relay publishes. If the relay dies, the
// database ends the transaction with the connection and the rows are claimable again at once.
func (s *store[TTx]) Claim(ctx context.Context, p driver.ClaimParams) (driver.Claim, error) {
	return s.claimWith(ctx, s.claim, p)
}

// claimWith claims with query, whose arguments are the time and the limit.
func (s *store[TTx]) claimWith(ctx context.Context, query string, p driver.ClaimParams) (driver.Claim, error) {
	if s.d == SQLite {
		// SQLite has one writer: look before taking the write lock, so an idle relay never blocks producers.
		found := false
		err := s.b.Pool().Query(ctx, s.peek, []any{s.d.Time(p.Now)}, func(func(...any) error) error {
			found = true
			return nil
		})
		if err != nil || !found {
			return emptyClaim{}, err
		}
	}
	var recs []driver.Record
	tx, err := s.beginQuery(ctx, query, []any{s.d.Time(p.Now), p.Limit}, s.scanRecords(&recs))
	if err != nil {
		return nil, err
	}
	if len(recs) == 0 {
		// Nothing to hold: end the transaction now rather than keep a connection busy.
		if err := tx.Rollback(ctx); err != nil {
			return nil, err
		}
		return emptyClaim{}, nil
	}
	return &claim[TTx]{s: s, tx: tx, recs: recs}, nil
}

type emptyClaim struct{}

func (emptyClaim) Records() []driver.Record                        { return nil }
func (emptyClaim) Settle(context.Context, driver.Settlement) error { return nil }
func (emptyClaim) Release(context.Context) error                   { return nil }

type claim[TTx any] struct {
	s    *store[TTx]
	tx   Tx
	recs []driver.Record
}

func (c *claim[TTx]) Records() []driver.Record { return c.recs }

func (c *claim[TTx]) Release(ctx context.Context) error { return c.tx.Rollback(ctx) }

func (c *claim[TTx]) Settle(ctx context.Context, st driver.Settlement) error {
	if done, err := c.settlePipelined(ctx, st); done {
		return err
	}
	if err := c.s.settle(ctx, c.tx, st, c.recs); err != nil {
		return rollback(ctx, c.tx, err)
	}
	return c.tx.Commit(ctx)
}

// settle applies st to the claimed records recs.
func (s *store[TTx]) settle(ctx context.Context, tx Conn, st driver.Settlement, recs []driver.Record) error {
	switch {
	case s.d.pg():
		return s.settlePostgres(ctx, tx, st)
	case s.d.my():
		return s.settleMySQL(ctx, tx, st, recs)
	}
	if len(st.Published) > 0 {
		in, args := s.d.inList("id", st.Published, 1)
		q := "DELETE FROM " + s.outbox + " WHERE " + in
		if st.Keep {
			in, args = s.d.inList("id", st.Published, 2)
			q = "UPDATE " + s.outbox + " SET status = 'published', published_at = ?, attempts = attempts + 1 WHERE " + in
			args = append([]any{s.d.Time(st.Now)}, args...)
		}
		if _, err := tx.Exec(ctx, q, args...); err != nil {
			return err
		}
	}
	// SQLite runs in-process, so one statement per failed record costs no round trips.
	for _, f := range st.Failed {
		if _, err := tx.Exec(ctx, "UPDATE "+s.outbox+" SET attempts = ?, last_error = ?, available_at = ?,"+
			" status = CASE WHEN ? THEN 'dead' ELSE 'pending' END WHERE id = ?",
			f.Attempts, f.LastError, s.d.Time(f.AvailableAt), f.Dead, f.ID); err != nil {
			return err
		}
	}
	return nil
}

// settlePostgres settles the whole batch in one statement.
func (s *store[TTx]) settlePostgres(ctx context.Context, tx Conn, st driver.Settlement) error {
	q, args := s.postgresSettlement(st)
	_, err := tx.Exec(ctx, q, args...)
	return err
}

// postgresSettlement returns the statement settling the whole batch and its arguments.
func (s *store[TTx]) postgresSettlement(st driver.Settlement) (string, []any) {
	n := len(st.Failed)
	ids, attempts, errs := make([]string, n), make([]int32, n), make([]string, n)
	avail, dead := make([]time.Time, n), make([]bool, n)
	for i, f := range st.Failed {
		ids[i], attempts[i], errs[i], avail[i], dead[i] = f.ID, int32(f.Attempts), f.LastError, f.AvailableAt.UTC(), f.Dead
	}
	published := "DELETE FROM " + s.outbox + " WHERE id = ANY($1::uuid[])"
	if st.Keep {
		published = "UPDATE " + s.outbox + " SET status = 'published', published_at = $7, attempts = attempts + 1" +
			" WHERE id = ANY($1::uuid[])"
	}
	q := "WITH published AS (" + published + "), failed AS (UPDATE " + s.outbox + " AS t" +
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

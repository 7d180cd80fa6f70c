package sqlstore

import (
	"context"

	"github.com/postbox-go/postbox/driver"
)

// Claim locks a batch in a transaction that stays open while the relay publishes. If the relay dies, the
// database ends the transaction with the connection and the rows are claimable again at once.
func (s *store[TTx]) Claim(ctx context.Context, p driver.ClaimParams) (driver.Claim, error) {
	return s.claimWith(ctx, s.claim, p)
}

// ClaimOrdered implements driver.OrderedClaimer with a head-of-line claim: a pending record is claimable when no
// earlier record of its key blocks it (see each dialect's claimQuery).
func (s *store[TTx]) ClaimOrdered(ctx context.Context, p driver.ClaimParams, deadHoldsKey bool) (driver.Claim, error) {
	return s.claimWith(ctx, s.d.claimQuery(s.outbox, true, deadHoldsKey), p)
}

// claimWith claims with query, whose arguments are the time and the limit.
func (s *store[TTx]) claimWith(ctx context.Context, query string, p driver.ClaimParams) (driver.Claim, error) {
	if !s.d.Capabilities().SkipLocked {
		// One writer (SQLite): look before taking the write lock, so an idle relay never blocks producers.
		if found, err := s.Claimable(ctx, p.Now); err != nil || !found {
			return emptyClaim{}, err
		}
	}
	var recs []driver.Record
	tx, err := s.beginQuery(ctx, query, []any{s.d.timeArg(p.Now), p.Limit}, scanRecords(s.d, &recs))
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

// beginQuery begins a transaction and runs query in it, in one round trip where the backend pipelines.
func (s *store[TTx]) beginQuery(ctx context.Context, query string, args []any, row func(scan func(...any) error) error) (Tx, error) {
	if p, ok := s.b.(Pipeliner); ok {
		return p.BeginQuery(ctx, query, args, row)
	}
	tx, err := s.b.BeginTx(ctx)
	if err != nil {
		return nil, err
	}
	if err := tx.Query(ctx, query, args, row); err != nil {
		return nil, rollback(ctx, tx, err)
	}
	return tx, nil
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

// oneStatementSettler is a dialect that settles a whole batch in one statement (PostgreSQL), which a pipelined
// transaction sends together with its commit.
type oneStatementSettler interface {
	settlement(outbox string, st driver.Settlement) (string, []any)
}

func (c *claim[TTx]) Settle(ctx context.Context, st driver.Settlement) error {
	if p, ok := c.tx.(PipelinedTx); ok {
		if one, ok := c.s.d.(oneStatementSettler); ok {
			q, args := one.settlement(c.s.outbox, st)
			return p.ExecCommit(ctx, q, args...)
		}
	}
	if err := c.s.d.settle(ctx, c.tx, c.s.outbox, st, c.recs); err != nil {
		return rollback(ctx, c.tx, err)
	}
	return c.tx.Commit(ctx)
}

// headOfLine is the condition of an ordered claim on the outbox aliased o: no earlier record of o's key blocks it.
// The index on (key, id) of unpublished records (migration 3) answers it with one probe per record. A locking
// clause does not reach into the subquery, so rows locked by another claim are skipped, and so are the rows behind
// them, because a locked head is still pending: several relays share the keys without ever holding two records of
// one key.
func headOfLine(outbox string, deadHoldsKey bool) string {
	blocks := "p.status = 'pending'"
	if deadHoldsKey {
		blocks = "p.status <> 'published'"
	}
	return " AND (o.key = '' OR NOT EXISTS (SELECT 1 FROM " + outbox + " AS p WHERE p.key = o.key AND p.key <> '' AND" +
		" p.id < o.id AND " + blocks + "))"
}

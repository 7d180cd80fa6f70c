package sqlstore

import (
	"context"
	"errors"
	"slices"
	"strings"

	"github.com/postbox-go/postbox/driver"
)

// Claim locks a batch in a transaction that stays open while the relay publishes. If the relay dies, the
// database ends the transaction with the connection and the rows are claimable again at once.
//
// With p.DeletePublished, where the dialect can (PostgreSQL) and the role may insert into the outbox, the claim
// deletes the batch in that transaction instead of locking it, and Settle writes back the records that were not
// published before it commits. Other claims skip the deleted rows until then, and a rollback (a crash, Release, a
// failed settle) restores them all, so the guarantees are a locking claim's; the table takes one write per
// published record instead of two (lock, then delete), as a hand-written DELETE ... RETURNING queue does.
func (s *store[TTx]) Claim(ctx context.Context, p driver.ClaimParams) (driver.Claim, error) {
	if p.DeletePublished && s.deleteClaim != "" && s.mayWriteBack(ctx) {
		return s.claimWith(ctx, s.deleteQuery, p, true, s.Claim)
	}
	return s.claimWith(ctx, s.lockQuery, p, false, s.Claim)
}

// ClaimOrdered implements driver.OrderedClaimer with a head-of-line claim: a pending record is claimable when no
// earlier record of its key blocks it (see each dialect's claimQuery).
func (s *store[TTx]) ClaimOrdered(ctx context.Context, p driver.ClaimParams, deadHoldsKey bool) (driver.Claim, error) {
	again := func(ctx context.Context, p driver.ClaimParams) (driver.Claim, error) {
		return s.ClaimOrdered(ctx, p, deadHoldsKey)
	}
	t := newOrderedTable(s.d, s.n)
	query := func(skip int) string { return s.d.orderedClaimQuery(t, deadHoldsKey, skip) }
	return s.claimWith(ctx, query, p, false, again)
}

// deleteQuery is the deleting claim skipping skip topics, lockQuery the locking one.
func (s *store[TTx]) deleteQuery(skip int) string {
	if skip > 0 {
		return s.d.(deletingDialect).deleteClaimQuery(s.outbox, skip)
	}
	return s.deleteClaim
}

func (s *store[TTx]) lockQuery(skip int) string {
	if skip > 0 {
		return s.d.claimQuery(s.outbox, skip)
	}
	return s.claim
}

// claimWith claims with query(len(p.SkipTopics)), whose arguments are the time, the limit and the topics to skip
// (see claimArgs); deleted says the query deletes what it returns, and again is the claim method that called it,
// which SettleAndClaim calls again when it cannot chain.
func (s *store[TTx]) claimWith(ctx context.Context, query func(skip int) string, p driver.ClaimParams, deleted bool,
	again func(context.Context, driver.ClaimParams) (driver.Claim, error)) (driver.Claim, error) {
	if !s.d.Capabilities().SkipLocked {
		// One writer (SQLite): look before taking the write lock, so an idle relay never blocks producers.
		if found, err := s.Claimable(ctx, p.Now); err != nil || !found {
			return emptyClaim{}, err
		}
	}
	var recs []driver.Record
	tx, err := s.beginQuery(ctx, query(len(p.SkipTopics)), s.claimArgs(p), scanRecords(s.d, &recs))
	if err != nil {
		return nil, err
	}
	return s.held(ctx, tx, recs, &claim[TTx]{query: query, deleted: deleted, again: again})
}

func (s *store[TTx]) claimArgs(p driver.ClaimParams) []any {
	return s.d.claimArgs(s.d.timeArg(p.Now), p.Limit, p.SkipTopics)
}

// held returns the claim of recs in tx, with like's query and kind: tx ended at once when recs is empty, recs
// oldest first. A deleting claim's RETURNING and PostgreSQL's ordered claim, which walks the records in id order
// without an ORDER BY (see its orderedClaimQuery), promise no order of their own.
func (s *store[TTx]) held(ctx context.Context, tx Tx, recs []driver.Record, like *claim[TTx]) (driver.Claim, error) {
	if len(recs) == 0 {
		// Nothing to hold: end the transaction now rather than keep a connection busy.
		if err := tx.Rollback(ctx); err != nil {
			return nil, err
		}
		return emptyClaim{}, nil
	}
	if !slices.IsSortedFunc(recs, byID) {
		slices.SortFunc(recs, byID)
	}
	return &claim[TTx]{s: s, tx: tx, recs: recs, query: like.query, deleted: like.deleted, again: like.again}, nil
}

// byID orders records by ID, which is their age: UUIDv7 text sorts as its time.
func byID(a, b driver.Record) int { return strings.Compare(a.ID, b.ID) }

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
	s       *store[TTx]
	tx      Tx
	recs    []driver.Record
	query   func(skip int) string // the claim's query skipping skip topics, which SettleAndClaim runs again
	deleted bool                  // the claim's query deleted recs (see Claim)
	again   func(context.Context, driver.ClaimParams) (driver.Claim, error)
}

func (c *claim[TTx]) Records() []driver.Record { return c.recs }

func (c *claim[TTx]) Release(ctx context.Context) error { return c.tx.Rollback(ctx) }

// oneStatementSettler is a dialect that settles a whole batch in one statement (PostgreSQL), which a pipelined
// transaction sends together with its commit.
type oneStatementSettler interface {
	settlement(outbox string, st driver.Settlement) (string, []any)
}

func (c *claim[TTx]) Settle(ctx context.Context, st driver.Settlement) error {
	if c.deleted {
		return c.settleDeleted(ctx, st)
	}
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

// mayWriteBack reports whether the store's role may insert into the outbox, which writing back the unpublished
// records of a deleting claim takes. A relay role granted no INSERT (docs/SECURITY.md: a relay that cannot forge
// events) claims by locking instead. The answer is asked once and kept; an error leaves it unknown and this claim
// locking, where the database's trouble shows up again.
func (s *store[TTx]) mayWriteBack(ctx context.Context) bool {
	switch s.writeBack.Load() {
	case 1:
		return true
	case -1:
		return false
	}
	q, args := s.d.(deletingDialect).mayInsert(s.outbox)
	may := false
	err := s.b.Pool().Query(ctx, q, args, func(scan func(...any) error) error { return scan(&may) })
	if err != nil {
		return false
	}
	if may {
		s.writeBack.Store(1)
	} else {
		s.writeBack.Store(-1)
	}
	return may
}

// deletingDialect is a dialect whose claim can delete the records it returns (PostgreSQL's DELETE ... RETURNING).
type deletingDialect interface {
	// deleteClaimQuery deletes and returns the batch claimQuery would lock; its arguments are the same.
	deleteClaimQuery(outbox string, skip int) string
	// mayInsert is the query reporting, as one boolean, whether the current role may insert into outbox.
	mayInsert(outbox string) (string, []any)
	// restore is the one statement writing recs back into outbox, each with its failure applied where failed
	// has one.
	restore(outbox string, recs []driver.Record, failed map[string]driver.Failure) (string, []any, error)
}

// settleDeleted ends a claim whose query deleted its records: the ones not published are written back, failures
// with their new attempt count, in the same transaction, and the commit makes the rest gone for good. A record
// the settlement does not name is written back unchanged, as a locking claim would leave it.
func (c *claim[TTx]) settleDeleted(ctx context.Context, st driver.Settlement) error {
	q, args, err := c.restoreStatement(st)
	if err != nil {
		return rollback(ctx, c.tx, err)
	}
	if q == "" {
		return c.tx.Commit(ctx)
	}
	if p, ok := c.tx.(PipelinedTx); ok {
		err = p.ExecCommit(ctx, q, args...)
	} else if _, err = c.tx.Exec(ctx, q, args...); err != nil {
		err = rollback(ctx, c.tx, err)
	} else {
		err = c.tx.Commit(ctx)
	}
	c.checkDenied(err)
	return err
}

// checkDenied makes the store claim by locking from now on when err says that writing back was refused: INSERT
// was revoked since the store asked.
func (c *claim[TTx]) checkDenied(err error) {
	if c.deleted && denied(err) {
		c.s.writeBack.Store(-1)
	}
}

// restoreStatement is the statement writing back the records of a deleting claim that st does not publish, ""
// when it publishes them all.
func (c *claim[TTx]) restoreStatement(st driver.Settlement) (string, []any, error) {
	if st.Keep {
		return "", nil, errors.New("postbox: a claim made with DeletePublished cannot keep published records")
	}
	var back []driver.Record
	if len(st.Published) != len(c.recs) || len(st.Failed) > 0 {
		published := make(map[string]bool, len(st.Published))
		for _, id := range st.Published {
			published[id] = true
		}
		for _, r := range c.recs {
			if !published[r.ID] {
				back = append(back, r)
			}
		}
	}
	if len(back) == 0 {
		return "", nil, nil
	}
	failed := make(map[string]driver.Failure, len(st.Failed))
	for _, f := range st.Failed {
		failed[f.ID] = f
	}
	return c.s.d.(deletingDialect).restore(c.s.outbox, back, failed)
}

// SettleAndClaim implements driver.ChainClaimer. Where the settle is at most one statement and the transaction
// is pipelined (pgx), the settle, COMMIT, BEGIN and the next claim go to the server in one batch on the
// connection the claim holds; otherwise it settles and claims one after the other.
func (c *claim[TTx]) SettleAndClaim(ctx context.Context, st driver.Settlement, p driver.ClaimParams) (driver.Claim, error, error) {
	ptx, chain := c.tx.(PipelinedTx)
	var q string
	var args []any
	switch {
	case !chain:
	case c.deleted:
		// A deleting claim chains while the store still claims by deleting (see mayWriteBack).
		chain = c.s.writeBack.Load() == 1
		var err error
		if q, args, err = c.restoreStatement(st); err != nil {
			return nil, rollback(ctx, c.tx, err), nil
		}
	default:
		var one oneStatementSettler
		if one, chain = c.s.d.(oneStatementSettler); chain {
			q, args = one.settlement(c.s.outbox, st)
		}
	}
	if !chain {
		if err := c.Settle(ctx, st); err != nil {
			return nil, err, nil
		}
		next, err := c.again(ctx, p)
		return next, nil, err
	}
	var recs []driver.Record
	tx, settleErr, claimErr := ptx.ExecCommitBeginQuery(ctx, q, args, c.query(len(p.SkipTopics)), c.s.claimArgs(p),
		scanRecords(c.s.d, &recs))
	if settleErr != nil {
		c.checkDenied(settleErr)
		return nil, settleErr, nil
	}
	if claimErr != nil {
		return nil, nil, claimErr
	}
	next, err := c.s.held(ctx, tx, recs, c)
	return next, nil, err
}

// denied reports whether err is the database refusing a statement for lack of a privilege (SQLSTATE 42501, as
// pgx reports it, directly or through database/sql).
func denied(err error) bool {
	var se interface{ SQLState() string }
	return errors.As(err, &se) && se.SQLState() == "42501"
}

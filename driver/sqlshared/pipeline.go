package sqlshared

import (
	"context"

	"github.com/postbox-go/postbox/driver"
)

// Pipeliner is implemented by backends that can send several statements in one round trip (pgx batches). A claim
// then begins its transaction together with its query, and settles together with its commit: two round trips a
// batch instead of four, which shortens every relay cycle and so the latency from commit to publish.
type Pipeliner interface {
	// BeginQuery begins a transaction and runs query in it, calling row for each result row, in one round trip.
	// On error it ends the transaction.
	BeginQuery(ctx context.Context, query string, args []any, row func(scan func(dest ...any) error) error) (PipelinedTx, error)
}

// PipelinedTx is a transaction begun by BeginQuery.
type PipelinedTx interface {
	Tx
	// ExecCommit runs a statement and commits, in one round trip. On error it rolls the transaction back.
	ExecCommit(ctx context.Context, query string, args ...any) error
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

// settlePipelined settles a PostgreSQL claim with its commit in one round trip, and reports whether it could.
func (c *claim[TTx]) settlePipelined(ctx context.Context, st driver.Settlement) (bool, error) {
	p, ok := c.tx.(PipelinedTx)
	if !ok || !c.s.d.pg() {
		return false, nil
	}
	q, args := c.s.postgresSettlement(st)
	return true, p.ExecCommit(ctx, q, args...)
}

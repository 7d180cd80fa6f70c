package sqlshared

import (
	"context"
	"errors"
)

// Conn is the part of a connection, pool or transaction that the shared store uses. Drivers adapt their client
// library's types to it.
type Conn interface {
	// Exec runs a statement and returns the number of rows it affected.
	Exec(ctx context.Context, query string, args ...any) (int64, error)
	// Query runs a query and calls row for each result row; row scans with the given function. Query closes the
	// rows and reports their error.
	Query(ctx context.Context, query string, args []any, row func(scan func(dest ...any) error) error) error
}

// Tx is a transaction the store began itself.
type Tx interface {
	Conn
	Commit(ctx context.Context) error
	Rollback(ctx context.Context) error
}

// Backend is what a driver supplies to NewStore.
type Backend[TTx any] interface {
	// Pool runs statements outside any transaction.
	Pool() Conn
	// BeginTx starts a transaction that may write. On SQLite it must take the write lock at once (BEGIN
	// IMMEDIATE), because a read transaction that later writes fails when another connection wrote meanwhile.
	BeginTx(ctx context.Context) (Tx, error)
	// Conn wraps the caller's transaction.
	Conn(tx TTx) Conn
	// Session opens a session on a connection of its own, for session-level locks and MySQL DDL.
	Session(ctx context.Context) (Session, error)
}

// rollback rolls tx back even when ctx is already cancelled, and joins a rollback failure to the original error
// instead of hiding it.
func rollback(ctx context.Context, tx Tx, cause error) error {
	if err := tx.Rollback(context.WithoutCancel(ctx)); err != nil {
		return errors.Join(cause, err)
	}
	return cause
}

// inTx runs fn in a transaction of the store's own and commits it.
func (s *store[TTx]) inTx(ctx context.Context, fn func(tx Conn) error) error {
	tx, err := s.b.BeginTx(ctx)
	if err != nil {
		return err
	}
	if err := fn(tx); err != nil {
		return rollback(ctx, tx, err)
	}
	return tx.Commit(ctx)
}

// Package sqlstore is the store Postbox's SQL drivers share: migrations, and every store operation built on a
// small connection interface. Drivers wrap their client library's connection and transaction types in Conn and Tx
// and get every operation from New.
//
// The SQL of each database sits in a file of its own (postgres.go, mysql.go, sqlite.go), behind Dialect: one file
// shows what its database runs to insert, claim, settle, clean up and migrate. The other files hold what the
// databases share.
package sqlstore

import (
	"context"
	"errors"

	"github.com/postbox-go/postbox/driver"
)

// Conn is the part of a connection, pool or transaction that the store uses. Drivers adapt their client library's
// types to it.
type Conn interface {
	// Exec runs a statement and returns the number of rows it affected.
	Exec(ctx context.Context, query string, args ...any) (int64, error)
	// Query runs a query and calls row for each result row; row scans with the given function. Query closes the
	// rows and reports their error.
	Query(ctx context.Context, query string, args []any, row func(scan func(dest ...any) error) error) error
}

// Rows is the part of a client library's result rows that EachRow reads: database/sql's *sql.Rows and pgx's
// pgx.Rows both have it.
type Rows interface {
	Next() bool
	Scan(dest ...any) error
	Err() error
}

// EachRow calls row with rows' Scan for each of rows, stopping at the first error row returns, and then reports
// rows' own error. It does not close rows: their Close differs between client libraries, so the caller defers it.
// Drivers build Conn.Query on it.
func EachRow(rows Rows, row func(scan func(dest ...any) error) error) error {
	for rows.Next() {
		if err := row(rows.Scan); err != nil {
			return err
		}
	}
	return rows.Err()
}

// Tx is a transaction the store began itself.
type Tx interface {
	Conn
	Commit(ctx context.Context) error
	Rollback(ctx context.Context) error
}

// DB is the database a store works on, outside the caller's transactions.
type DB interface {
	// Pool runs statements outside any transaction.
	Pool() Conn
	// BeginTx starts a transaction that may write. On SQLite it must take the write lock at once (BEGIN
	// IMMEDIATE), because a read transaction that later writes fails when another connection wrote meanwhile.
	BeginTx(ctx context.Context) (Tx, error)
	// Session opens a session on a connection of its own, for session-level locks and MySQL DDL.
	Session(ctx context.Context) (driver.Session, error)
}

// Backend is what a driver supplies to New.
type Backend[TTx any] interface {
	DB
	// Conn wraps the caller's transaction.
	Conn(tx TTx) Conn
}

// rollback rolls tx back even when ctx is already cancelled, and joins a rollback failure to the original error
// instead of hiding it.
func rollback(ctx context.Context, tx Tx, cause error) error {
	if err := tx.Rollback(context.WithoutCancel(ctx)); err != nil {
		return errors.Join(cause, err)
	}
	return cause
}

// inTx runs fn in a transaction of db's own and commits it.
func inTx(ctx context.Context, db DB, fn func(tx Conn) error) error {
	tx, err := db.BeginTx(ctx)
	if err != nil {
		return err
	}
	if err := fn(tx); err != nil {
		return rollback(ctx, tx, err)
	}
	return tx.Commit(ctx)
}

// Pipeliner is implemented by backends that can send several statements in one round trip (pgx batches). A claim
// then begins its transaction together with its query, and settles together with its commit: two round trips a
// batch instead of four, which shortens every relay cycle and so the latency from commit to publish. A relay with
// a backlog settles and claims the next batch together (ExecCommitBeginQuery): one round trip a batch.
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
	// ExecCommitBeginQuery runs stmt (none when it is ""), commits, begins the next transaction and runs query in
	// it, calling row for each result row, in one round trip. commitErr is the error of stmt or COMMIT; the
	// transaction is then rolled back and nothing more ran. queryErr is the error of the next transaction, which
	// is then ended; next is nil.
	ExecCommitBeginQuery(ctx context.Context, stmt string, stmtArgs []any, query string, args []any,
		row func(scan func(dest ...any) error) error) (next PipelinedTx, commitErr, queryErr error)
}

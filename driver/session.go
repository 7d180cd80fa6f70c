package driver

import "context"

// Session is one database connection held for a series of statements that must share it: session-level locks,
// session settings, and DDL on MySQL, which commits implicitly and so cannot lean on a transaction.
type Session interface {
	// Exec runs a statement and returns the number of rows it affected.
	Exec(ctx context.Context, query string, args ...any) (int64, error)
	// Query runs a query and calls row for each result row; row scans with the given function. Query closes the
	// rows and reports their error.
	Query(ctx context.Context, query string, args []any, row func(scan func(dest ...any) error) error) error
	// Close ends the session. The connection is closed rather than returned to a pool, so that no lock or
	// setting taken in the session can outlive it, even when releasing it failed.
	Close() error
}

// SessionOpener is implemented by drivers that can hold a connection of their own for maintenance. Package
// partition finds it by type assertion on the driver and runs its DDL on such a session, in the SQL of
// Capabilities().Dialect.
type SessionOpener interface {
	Session(ctx context.Context) (Session, error)
}

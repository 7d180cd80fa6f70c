package sqlshared

import (
	"context"
	"fmt"

	"github.com/postbox-go/postbox/driver"
)

// Session is one connection held for a series of statements that must share it: session-level locks
// (pg_try_advisory_lock, GET_LOCK), session settings and MySQL DDL, which commits implicitly and so cannot lean on a
// transaction.
type Session interface {
	Conn
	// Close ends the session. The connection is closed rather than returned to a pool, so that no lock or
	// setting taken in the session can outlive it, even when releasing it failed.
	Close() error
}

// Maintainable is implemented by drivers built on this package. Maintenance tools (package partition) find it by
// type assertion on the driver and use it to open sessions of their own.
type Maintainable interface {
	// Dialect is the SQL flavour of the driver's database.
	Dialect() Dialect
	// Session opens a session on a connection of its own.
	Session(ctx context.Context) (Session, error)
}

// Lock purposes: each names one maintenance lock per table set.
const (
	LockCleanup    = "cleanup"
	LockPartitions = "partitions"
	lockMigrate    = "migrate"
)

// TryLock takes the session-level lock for purpose on the table set n without waiting, and reports whether it got
// it. The lock is held until Unlock or the end of the session. SQLite has no such locks and always gets it. The
// store uses it on MySQL only: on PostgreSQL it takes transaction-level locks, which PgBouncer's transaction mode
// cannot strand on a server connection. A PostgreSQL session lock still excludes them, which tests use to stand
// in for another instance.
func (d Dialect) TryLock(ctx context.Context, c Conn, n driver.Names, purpose string) (bool, error) {
	var got *int64 // MySQL's GET_LOCK returns NULL on error
	var q string
	var args []any
	switch {
	case d.pg():
		q, args = "SELECT CASE WHEN pg_try_advisory_lock($1) THEN 1 ELSE 0 END", []any{lockKey(n, purpose)}
	case d.my():
		q, args = "SELECT GET_LOCK("+mysqlLockName+", 0)", mysqlLockArgs(n, purpose)
	default:
		return true, nil
	}
	if err := c.Query(ctx, q, args, func(scan func(...any) error) error { return scan(&got) }); err != nil {
		return false, fmt.Errorf("postbox: take %s lock: %w", purpose, err)
	}
	return got != nil && *got == 1, nil
}

// Unlock releases a lock TryLock took in the same session.
func (d Dialect) Unlock(ctx context.Context, c Conn, n driver.Names, purpose string) error {
	var err error
	switch {
	case d.pg():
		_, err = c.Exec(ctx, "SELECT pg_advisory_unlock($1)", lockKey(n, purpose))
	case d.my():
		_, err = c.Exec(ctx, "DO RELEASE_LOCK("+mysqlLockName+")", mysqlLockArgs(n, purpose)...)
	}
	if err != nil {
		return fmt.Errorf("postbox: release %s lock: %w", purpose, err)
	}
	return nil
}

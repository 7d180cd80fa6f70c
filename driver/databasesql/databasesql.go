// Package databasesql is the Postbox driver for database/sql. Pass New(db, dialect) to postbox.NewClient; the
// client's transaction type is *sql.Tx.
//
// PostgreSQL through pgx's stdlib driver:
//
//	db, err := sql.Open("pgx", "postgres://localhost/app")
//	client, err := postbox.NewClient(databasesql.New(db, databasesql.Postgres), nil)
//
// SQLite through modernc.org/sqlite, the embedded default. Use WAL and a busy timeout, and begin transactions
// with _txlock=immediate so that a transaction that reads before it writes cannot fail with SQLITE_BUSY. With a
// plain file:app.db a second writer fails at once; the driver then appends this fix (SQLiteBusyFix) to the
// SQLITE_BUSY error.
//
//	db, err := sql.Open("sqlite", "file:app.db?_pragma=journal_mode(WAL)&_pragma=busy_timeout(10000)&_txlock=immediate")
//	client, err := postbox.NewClient(databasesql.New(db, databasesql.SQLite), nil)
//
// MySQL 8 and MariaDB 10.6+ through github.com/go-sql-driver/mysql. No DSN option is required: IDs are stored as
// BINARY(16) and times as Unix microseconds, so parseTime and loc do not matter. interpolateParams=true saves a
// round trip per statement. See docs/MYSQL.md.
//
//	db, err := sql.Open("mysql", "app:secret@tcp(localhost:3306)/app?interpolateParams=true")
//	client, err := postbox.NewClient(databasesql.New(db, databasesql.MySQL), nil)
//
// Driver implements driver.SessionOpener, so package partition can maintain partitioned tables through it.
package databasesql

import (
	"context"
	"database/sql"
	sqldriver "database/sql/driver"
	"errors"
	"strings"

	"github.com/postbox-go/postbox/driver"
	"github.com/postbox-go/postbox/driver/internal/sqlstore"
)

// Dialect is the SQL flavour of the database behind a *sql.DB: Postgres, MySQL or SQLite.
type Dialect struct{ d sqlstore.Dialect }

// The supported dialects.
var (
	Postgres = Dialect{sqlstore.Postgres}
	SQLite   = Dialect{sqlstore.SQLite}
	// MySQL is MySQL 8.0 and later, and MariaDB 10.6 and later: the versions with FOR UPDATE SKIP LOCKED. Tables
	// are InnoDB, schemas are databases, IDs are BINARY(16) and times are Unix microseconds (see docs/MYSQL.md).
	MySQL = Dialect{sqlstore.MySQL}
)

// Name is the dialect's name as reported in driver.Capabilities: "postgres", "mysql" or "sqlite"; "" for the zero
// Dialect.
func (d Dialect) Name() string { return d.Capabilities().Dialect }

// Capabilities reports what the dialect supports; nothing for the zero Dialect.
func (d Dialect) Capabilities() driver.Capabilities {
	if d.d == nil {
		return driver.Capabilities{}
	}
	return d.d.Capabilities()
}

// ClaimSQL is the query a relay claims a batch with on the table set n, for review and EXPLAIN. Its arguments are
// the current time (Unix microseconds on MySQL and SQLite) and the batch size.
func (d Dialect) ClaimSQL(n driver.Names) string {
	if d.d == nil {
		return ""
	}
	return sqlstore.ClaimSQL(d.d, n)
}

// OrderedClaimSQL is the query an ordered relay claims a batch with on the table set n, whose Ordered must be set
// (the query reads the index that migration adds), for review and EXPLAIN. deadHoldsKey is
// RelayConfig.DeadHoldsKey. Its arguments are ClaimSQL's.
func (d Dialect) OrderedClaimSQL(n driver.Names, deadHoldsKey bool) string {
	if d.d == nil {
		return ""
	}
	return sqlstore.OrderedClaimSQL(d.d, n, deadHoldsKey)
}

// Driver connects Postbox to a database through database/sql.
type Driver struct {
	db      *sql.DB
	dialect Dialect
}

// New returns a driver using db, whose SQL is dialect. It does no I/O.
func New(db *sql.DB, dialect Dialect) *Driver { return &Driver{db: db, dialect: dialect} }

// Capabilities reports the dialect's.
func (d *Driver) Capabilities() driver.Capabilities { return d.dialect.Capabilities() }

// Store returns the operations on the table set n, or an error when n is invalid.
func (d *Driver) Store(n driver.Names) (driver.Store[*sql.Tx], error) {
	if d.dialect.d == nil {
		return nil, errors.New("postbox: databasesql.New was given no dialect; pass databasesql.Postgres, MySQL or SQLite")
	}
	return sqlstore.New[*sql.Tx](backend{d}, d.dialect.d, n)
}

// Ping implements driver.Pinger with the database's PingContext. A relay that cannot reach the database pings it
// between attempts.
func (d *Driver) Ping(ctx context.Context) error { return d.db.PingContext(ctx) }

// Dialect returns the dialect New was given.
func (d *Driver) Dialect() Dialect { return d.dialect }

// Session opens a connection of its own for maintenance; closing the session closes the connection.
func (d *Driver) Session(ctx context.Context) (driver.Session, error) {
	c, err := d.db.Conn(ctx)
	if err != nil {
		return nil, err
	}
	return session{conn{c}, c}, nil
}

// Begin starts a transaction on db.
func (d *Driver) Begin(ctx context.Context) (*sql.Tx, error) {
	tx, err := d.db.BeginTx(ctx, nil)
	return tx, busyHint(err)
}

// Commit commits tx.
func (d *Driver) Commit(_ context.Context, tx *sql.Tx) error { return busyHint(tx.Commit()) }

// Rollback rolls tx back; a finished transaction is not an error.
func (d *Driver) Rollback(_ context.Context, tx *sql.Tx) error {
	if err := tx.Rollback(); err != nil && !errors.Is(err, sql.ErrTxDone) {
		return err
	}
	return nil
}

var (
	_ driver.SessionOpener = (*Driver)(nil)
	_ driver.Pinger        = (*Driver)(nil)
)

type backend struct{ d *Driver }

func (b backend) Pool() sqlstore.Conn           { return conn{b.d.db} }
func (b backend) Conn(tx *sql.Tx) sqlstore.Conn { return conn{tx} }

func (b backend) Session(ctx context.Context) (driver.Session, error) { return b.d.Session(ctx) }

func (b backend) BeginTx(ctx context.Context) (sqlstore.Tx, error) {
	if b.d.dialect == SQLite {
		return beginImmediate(ctx, b.d.db)
	}
	// database/sql rolls a transaction back when its context ends. A claim must outlive a cancelled relay
	// context until its batch settles, so the transaction gets a context that is never cancelled; the
	// statements in it still take ctx.
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	var opts *sql.TxOptions
	if b.d.dialect == MySQL {
		// READ COMMITTED: a claim locks the rows it returns and no gaps, so producers never wait on it.
		opts = &sql.TxOptions{Isolation: sql.LevelReadCommitted}
	}
	tx, err := b.d.db.BeginTx(context.WithoutCancel(ctx), opts)
	if err != nil {
		return nil, err
	}
	return sqlTx{conn{tx}, tx}, nil
}

// querier is what *sql.DB, *sql.Conn and *sql.Tx share.
type querier interface {
	ExecContext(ctx context.Context, query string, args ...any) (sql.Result, error)
	QueryContext(ctx context.Context, query string, args ...any) (*sql.Rows, error)
}

type conn struct{ q querier }

func (c conn) Exec(ctx context.Context, query string, args ...any) (int64, error) {
	res, err := c.q.ExecContext(ctx, query, args...)
	if err != nil {
		return 0, busyHint(err)
	}
	return res.RowsAffected()
}

func (c conn) Query(ctx context.Context, query string, args []any, row func(scan func(...any) error) error) error {
	rows, err := c.q.QueryContext(ctx, query, args...)
	if err != nil {
		return busyHint(err)
	}
	defer rows.Close()
	return busyHint(sqlstore.EachRow(rows, row))
}

// SQLiteBusyFix is what busyHint adds to SQLite's SQLITE_BUSY ("database is locked") errors: the DSN and pool
// setting under which writers wait for each other instead of failing.
const SQLiteBusyFix = `SQLite was busy: another connection held the database's lock and this one did not wait. ` +
	`Open it with a busy timeout, WAL and immediate transactions, so that writers wait for each other: ` +
	`sql.Open("sqlite", "file:shop.db?_pragma=busy_timeout(10000)&_pragma=journal_mode(WAL)&_txlock=immediate")`

// busyError is an SQLITE_BUSY error with the fix appended; errors.Is and errors.As see the driver's error.
type busyError struct{ err error }

func (e *busyError) Error() string { return e.err.Error() + ": " + SQLiteBusyFix }
func (e *busyError) Unwrap() error { return e.err }

// busyHint appends SQLiteBusyFix to an SQLITE_BUSY error, the error of a DSN such as file:shop.db, which sets no
// busy timeout: a second writer fails at once. Other errors are returned as they are.
func busyHint(err error) error {
	var already *busyError
	if err == nil || errors.As(err, &already) {
		return err
	}
	// modernc.org/sqlite says "database is locked (5) (SQLITE_BUSY)", mattn/go-sqlite3 "database is locked".
	if msg := err.Error(); !strings.Contains(msg, "SQLITE_BUSY") && !strings.Contains(msg, "database is locked") {
		return err
	}
	return &busyError{err}
}

// session is a connection taken out of the pool; Close discards it, so no lock or setting reaches the pool.
type session struct {
	conn
	c *sql.Conn
}

func (s session) Close() error {
	_ = s.c.Raw(func(any) error { return sqldriver.ErrBadConn })
	return nil
}

type sqlTx struct {
	conn
	tx *sql.Tx
}

func (t sqlTx) Commit(context.Context) error   { return t.tx.Commit() }
func (t sqlTx) Rollback(context.Context) error { return t.tx.Rollback() }

// immediateTx is a SQLite transaction begun with BEGIN IMMEDIATE on a connection of its own, so it holds the
// write lock from the start.
type immediateTx struct {
	conn
	c *sql.Conn
}

func beginImmediate(ctx context.Context, db *sql.DB) (sqlstore.Tx, error) {
	c, err := db.Conn(ctx)
	if err != nil {
		return nil, err
	}
	if _, err := c.ExecContext(ctx, "BEGIN IMMEDIATE"); err != nil {
		c.Close()
		return nil, busyHint(err)
	}
	return &immediateTx{conn{c}, c}, nil
}

func (t *immediateTx) Commit(ctx context.Context) error   { return t.end(ctx, "COMMIT") }
func (t *immediateTx) Rollback(ctx context.Context) error { return t.end(ctx, "ROLLBACK") }

func (t *immediateTx) end(ctx context.Context, stmt string) error {
	_, err := t.c.ExecContext(ctx, stmt)
	if err != nil {
		// The transaction may still be open on this connection: never hand it back to the pool.
		_ = t.c.Raw(func(any) error { return sqldriver.ErrBadConn })
		return busyHint(err)
	}
	return t.c.Close()
}

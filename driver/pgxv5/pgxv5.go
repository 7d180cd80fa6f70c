// Package pgxv5 is the Postbox driver for PostgreSQL through pgx v5. Pass New(pool) to postbox.NewClient; the
// client's transaction type is pgx.Tx.
//
//	pool, err := pgxpool.New(ctx, "postgres://localhost/app")
//	client, err := postbox.NewClient(pgxv5.New(pool), nil)
package pgxv5

import (
	"context"
	"errors"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/postbox-go/postbox/driver"
	"github.com/postbox-go/postbox/driver/internal/sqlstore"
)

// Driver connects Postbox to PostgreSQL through a pgx pool. Behind a pooler in transaction mode (PgBouncer's
// pool_mode = transaction), configure the pool with default_query_exec_mode=exec and either turn LISTEN off
// (postbox.RelayConfig.DisableListen) or point it at PostgreSQL itself (WithListenConfig).
type Driver struct {
	pool   *pgxpool.Pool
	listen *pgx.ConnConfig // nil: LISTEN with the pool's settings
}

// New returns a driver using pool. It does no I/O.
func New(pool *pgxpool.Pool) *Driver { return &Driver{pool: pool} }

// Capabilities reports PostgreSQL's: SKIP LOCKED claims and schemas.
func (d *Driver) Capabilities() driver.Capabilities { return sqlstore.Postgres.Capabilities() }

// Store returns the operations on the table set n, or an error when n is invalid.
func (d *Driver) Store(n driver.Names) (driver.Store[pgx.Tx], error) {
	return sqlstore.New[pgx.Tx](backend{d.pool}, sqlstore.Postgres, n)
}

// Session acquires a connection of its own for maintenance; closing the session closes the connection. It makes
// Driver a driver.SessionOpener, so package partition can maintain partitioned tables through it.
func (d *Driver) Session(ctx context.Context) (driver.Session, error) {
	c, err := d.pool.Acquire(ctx)
	if err != nil {
		return nil, err
	}
	return session{conn{c}, c}, nil
}

// Ping implements driver.Pinger: it takes a connection from the pool, which drops connections the server has
// closed, and sends an empty statement. A relay that cannot reach the database pings it between attempts.
func (d *Driver) Ping(ctx context.Context) error { return d.pool.Ping(ctx) }

// Begin starts a transaction on the pool.
func (d *Driver) Begin(ctx context.Context) (pgx.Tx, error) { return d.pool.Begin(ctx) }

// Commit commits tx.
func (d *Driver) Commit(ctx context.Context, tx pgx.Tx) error { return tx.Commit(ctx) }

// Rollback rolls tx back; a finished transaction is not an error.
func (d *Driver) Rollback(ctx context.Context, tx pgx.Tx) error {
	if err := tx.Rollback(ctx); err != nil && !errors.Is(err, pgx.ErrTxClosed) {
		return err
	}
	return nil
}

var (
	_ driver.SessionOpener = (*Driver)(nil)
	_ driver.Pinger        = (*Driver)(nil)
)

type backend struct{ pool *pgxpool.Pool }

func (b backend) Pool() sqlstore.Conn          { return conn{b.pool} }
func (b backend) Conn(tx pgx.Tx) sqlstore.Conn { return conn{tx} }

func (b backend) Session(ctx context.Context) (driver.Session, error) {
	return (&Driver{pool: b.pool}).Session(ctx)
}

func (b backend) BeginTx(ctx context.Context) (sqlstore.Tx, error) {
	tx, err := b.pool.Begin(ctx)
	if err != nil {
		return nil, err
	}
	return txConn{conn{tx}, tx}, nil
}

// querier is what pgxpool.Pool, pgx.Conn and pgx.Tx share.
type querier interface {
	Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error)
	Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error)
}

type conn struct{ q querier }

func (c conn) Exec(ctx context.Context, query string, args ...any) (int64, error) {
	tag, err := c.q.Exec(ctx, query, args...)
	return tag.RowsAffected(), explainPooler(err)
}

func (c conn) Query(ctx context.Context, query string, args []any, row func(scan func(...any) error) error) error {
	rows, err := c.q.Query(ctx, query, args...)
	return explainPooler(scanRows(rows, err, row))
}

// scanRows calls row for each of rows (the result of a query that failed with err, or not) and closes them.
func scanRows(rows pgx.Rows, err error, row func(scan func(...any) error) error) error {
	if err != nil {
		return err
	}
	defer rows.Close()
	return sqlstore.EachRow(rows, row)
}

// session is a connection taken out of the pool; Close closes it, so no lock or setting reaches the pool.
type session struct {
	conn
	c *pgxpool.Conn
}

func (s session) Close() error {
	// A pool connection's Close needs a context; closing must not depend on the caller's, which may be done.
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	return s.c.Hijack().Close(ctx)
}

type txConn struct {
	conn
	tx pgx.Tx
}

func (t txConn) Commit(ctx context.Context) error   { return t.tx.Commit(ctx) }
func (t txConn) Rollback(ctx context.Context) error { return t.tx.Rollback(ctx) }

package bench

import (
	"context"
	"database/sql"
	sqldriver "database/sql/driver"
	"encoding/hex"
	"errors"
	"fmt"
	"net"
	"net/url"
	"os"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/go-sql-driver/mysql"

	"github.com/postbox-go/postbox/driver/databasesql"
)

// DefaultMySQLURL is the database the bench measures with DB set to DBMySQL and no URL (or the environment's
// POSTBOX_BENCH_MYSQL).
const DefaultMySQLURL = "mysql://root@127.0.0.1:3306/postbox_bench"

// mysqlTarget reaches MySQL or MariaDB through database/sql and go-sql-driver/mysql, with interpolated parameters
// unless the URL turns them off. The database is created when missing. Every pool counts the statements it sends.
func mysqlTarget(ctx context.Context, o Options) (*target[*sql.Tx], error) {
	raw := o.URL
	if raw == "" {
		raw = DefaultMySQLURL
		if env := os.Getenv("POSTBOX_BENCH_MYSQL"); env != "" {
			raw = env
		}
	}
	cfg, err := mysqlConfig(raw)
	if err != nil {
		return nil, err
	}
	if err := ensureMySQL(ctx, cfg, raw); err != nil {
		return nil, err
	}
	connector, err := mysql.NewConnector(cfg)
	if err != nil {
		return nil, fmt.Errorf("bench: --db %s: %w", redacted(raw), err)
	}
	open := func(ctx context.Context, maxConns int) (*conns[*sql.Tx], error) {
		counter := &countingConnector{Connector: connector}
		db := sql.OpenDB(counter)
		db.SetMaxOpenConns(maxConns)
		db.SetMaxIdleConns(maxConns)
		if err := db.PingContext(ctx); err != nil {
			db.Close()
			return nil, err
		}
		c := &conns[*sql.Tx]{
			drv: databasesql.New(db, databasesql.MySQL),
			txExec: func(ctx context.Context, tx *sql.Tx, q string, args ...any) error {
				_, err := tx.ExecContext(ctx, q, args...)
				return err
			},
			exec: func(ctx context.Context, q string, args ...any) (int64, error) {
				res, err := db.ExecContext(ctx, q, args...)
				if err != nil {
					return 0, err
				}
				return res.RowsAffected()
			},
			readRecords: func(ctx context.Context, q string, args ...any) (int, error) {
				rows, err := db.QueryContext(ctx, q, args...)
				if err != nil {
					return 0, err
				}
				return scanRecordRows(rows, "mysql", nil)
			},
			claimDelete: func(ctx context.Context, table string, limit int) (int, error) {
				return mysqlClaimDelete(ctx, db, table, limit)
			},
			queries: counter.n.Load,
			close:   func() { db.Close() },
		}
		return c, nil
	}
	return &target[*sql.Tx]{dialect: "mysql", open: open}, nil
}

// mysqlConfig converts mysql://user:pass@host:3306/database?param=value (or mariadb://) to go-sql-driver's
// configuration; parameters are the driver's, or session variables.
func mysqlConfig(raw string) (*mysql.Config, error) {
	fail := func(format string, a ...any) (*mysql.Config, error) {
		return nil, fmt.Errorf("bench: --db %s: "+format+"; write mysql://user:pass@host:3306/database", append([]any{redacted(raw)}, a...)...)
	}
	u, err := url.Parse(raw)
	if err != nil {
		return fail("not a URL")
	}
	if s := strings.ToLower(u.Scheme); s != "mysql" && s != "mariadb" {
		return fail("not a mysql:// URL")
	}
	if u.Host == "" {
		return fail("no host")
	}
	name := strings.TrimPrefix(u.Path, "/")
	if name == "" || strings.Contains(name, "/") {
		return fail("name one database in the path")
	}
	q := u.Query()
	if !q.Has("interpolateParams") {
		q.Set("interpolateParams", "true") // saves the prepare and close round trips of every statement
	}
	addr := u.Host
	if u.Port() == "" {
		addr = net.JoinHostPort(u.Hostname(), "3306")
	}
	cfg, err := mysql.ParseDSN("tcp(" + addr + ")/?" + q.Encode())
	if err != nil {
		return fail("%v", err)
	}
	cfg.User = u.User.Username()
	cfg.Passwd, _ = u.User.Password()
	cfg.DBName = name
	return cfg, nil
}

// redacted is raw with its password written as xxxxx.
func redacted(raw string) string {
	if u, err := url.Parse(raw); err == nil {
		return u.Redacted()
	}
	return "(an unparsable URL)"
}

// ensureMySQL creates cfg's database when it does not exist.
func ensureMySQL(ctx context.Context, cfg *mysql.Config, raw string) error {
	admin := cfg.Clone()
	admin.DBName = ""
	connector, err := mysql.NewConnector(admin)
	if err != nil {
		return fmt.Errorf("bench: --db %s: %w", redacted(raw), err)
	}
	db := sql.OpenDB(connector)
	defer db.Close()
	if err := db.PingContext(ctx); err != nil {
		return fmt.Errorf("bench: MySQL is not reachable at %s (start it, or pass --db): %w", redacted(raw), err)
	}
	if _, err := db.ExecContext(ctx, "CREATE DATABASE IF NOT EXISTS `"+strings.ReplaceAll(cfg.DBName, "`", "``")+"`"); err != nil {
		return fmt.Errorf("bench: create database %s: %w", cfg.DBName, err)
	}
	return nil
}

// mysqlClaimDelete is the relay's baseline on MySQL, which has no DELETE ... RETURNING: in one transaction at READ
// COMMITTED, lock a batch of pending rows with SELECT ... FOR UPDATE SKIP LOCKED (through the claim index, as the
// relay does), read every column, delete them by primary key in one statement and commit. It returns the rows
// deleted.
func mysqlClaimDelete(ctx context.Context, db *sql.DB, table string, limit int) (n int, err error) {
	tx, err := db.BeginTx(ctx, &sql.TxOptions{Isolation: sql.LevelReadCommitted})
	if err != nil {
		return 0, err
	}
	defer func() {
		if err != nil {
			err = errors.Join(err, tx.Rollback())
		}
	}()
	rows, err := tx.QueryContext(ctx, "SELECT "+recordCols("mysql")+" FROM "+table+" FORCE INDEX (claim_idx)"+
		" WHERE status = 'pending' AND available_at <= ? ORDER BY id LIMIT "+strconv.Itoa(limit)+" FOR UPDATE SKIP LOCKED",
		time.Now().UnixMicro())
	if err != nil {
		return 0, err
	}
	var ids []any
	if _, err := scanRecordRows(rows, "mysql", func(d *recordDest) { ids = append(ids, []byte(d.id)) }); err != nil {
		return 0, err
	}
	if len(ids) == 0 {
		return 0, tx.Rollback()
	}
	// Each row is reached by its primary key through a join: "id IN (...)" is a range read that also locks the
	// row after each range, which belongs to the other connection's batch, and two connections deleting at once
	// deadlock (MariaDB reports 1213 within seconds).
	q := "DELETE t FROM (SELECT CAST(? AS BINARY(16)) AS id" + strings.Repeat(" UNION ALL SELECT CAST(? AS BINARY(16))", len(ids)-1) +
		") AS f STRAIGHT_JOIN " + table + " AS t ON t.id = f.id"
	if _, err := tx.ExecContext(ctx, q, ids...); err != nil {
		return 0, err
	}
	return len(ids), tx.Commit()
}

// scanRecordRows is readRecordRows on rows from database/sql, which it closes.
func scanRecordRows(rows *sql.Rows, dialect string, each func(*recordDest)) (int, error) {
	defer rows.Close()
	return readRecordRows(rows, dialect, each)
}

// mysqlID is a UUID's 16 bytes, as a BINARY(16) id column holds it.
func mysqlID(id string) []byte {
	b, err := hex.DecodeString(strings.ReplaceAll(id, "-", ""))
	if err != nil {
		panic("bench: not a UUID: " + id)
	}
	return b
}

// countingConnector counts the statements its connections send: every query and exec, each transaction's start
// (two statements when it sets an isolation level), commit and rollback, prepare and ping. go-sql-driver/mysql
// has no tracing hook, so the count is taken here, between database/sql and the driver.
type countingConnector struct {
	sqldriver.Connector
	n atomic.Int64
}

func (c *countingConnector) Connect(ctx context.Context) (sqldriver.Conn, error) {
	conn, err := c.Connector.Connect(ctx)
	if err != nil {
		return nil, err
	}
	return &countingConn{Conn: conn, n: &c.n}, nil
}

// countingConn passes each call to go-sql-driver's connection, which implements every interface below.
type countingConn struct {
	sqldriver.Conn
	n *atomic.Int64
}

var (
	_ sqldriver.ConnBeginTx        = (*countingConn)(nil)
	_ sqldriver.ConnPrepareContext = (*countingConn)(nil)
	_ sqldriver.ExecerContext      = (*countingConn)(nil)
	_ sqldriver.QueryerContext     = (*countingConn)(nil)
	_ sqldriver.Pinger             = (*countingConn)(nil)
	_ sqldriver.SessionResetter    = (*countingConn)(nil)
	_ sqldriver.Validator          = (*countingConn)(nil)
	_ sqldriver.NamedValueChecker  = (*countingConn)(nil)
)

func (c *countingConn) BeginTx(ctx context.Context, opts sqldriver.TxOptions) (sqldriver.Tx, error) {
	c.n.Add(1)
	if opts.Isolation != 0 {
		c.n.Add(1) // SET TRANSACTION ISOLATION LEVEL, then START TRANSACTION
	}
	tx, err := c.Conn.(sqldriver.ConnBeginTx).BeginTx(ctx, opts)
	if err != nil {
		return nil, err
	}
	return countingTx{Tx: tx, n: c.n}, nil
}

func (c *countingConn) PrepareContext(ctx context.Context, query string) (sqldriver.Stmt, error) {
	c.n.Add(1)
	st, err := c.Conn.(sqldriver.ConnPrepareContext).PrepareContext(ctx, query)
	if err != nil {
		return nil, err
	}
	return countingStmt{Stmt: st, n: c.n}, nil
}

func (c *countingConn) ExecContext(ctx context.Context, query string, args []sqldriver.NamedValue) (sqldriver.Result, error) {
	res, err := c.Conn.(sqldriver.ExecerContext).ExecContext(ctx, query, args)
	if !errors.Is(err, sqldriver.ErrSkip) { // ErrSkip: database/sql prepares instead, counted there
		c.n.Add(1)
	}
	return res, err
}

func (c *countingConn) QueryContext(ctx context.Context, query string, args []sqldriver.NamedValue) (sqldriver.Rows, error) {
	rows, err := c.Conn.(sqldriver.QueryerContext).QueryContext(ctx, query, args)
	if !errors.Is(err, sqldriver.ErrSkip) {
		c.n.Add(1)
	}
	return rows, err
}

func (c *countingConn) Ping(ctx context.Context) error {
	c.n.Add(1)
	return c.Conn.(sqldriver.Pinger).Ping(ctx)
}

func (c *countingConn) ResetSession(ctx context.Context) error {
	return c.Conn.(sqldriver.SessionResetter).ResetSession(ctx)
}

func (c *countingConn) IsValid() bool { return c.Conn.(sqldriver.Validator).IsValid() }

func (c *countingConn) CheckNamedValue(v *sqldriver.NamedValue) error {
	return c.Conn.(sqldriver.NamedValueChecker).CheckNamedValue(v)
}

type countingTx struct {
	sqldriver.Tx
	n *atomic.Int64
}

func (t countingTx) Commit() error {
	t.n.Add(1)
	return t.Tx.Commit()
}

func (t countingTx) Rollback() error {
	t.n.Add(1)
	return t.Tx.Rollback()
}

type countingStmt struct {
	sqldriver.Stmt
	n *atomic.Int64
}

func (s countingStmt) ExecContext(ctx context.Context, args []sqldriver.NamedValue) (sqldriver.Result, error) {
	s.n.Add(1)
	return s.Stmt.(sqldriver.StmtExecContext).ExecContext(ctx, args)
}

func (s countingStmt) QueryContext(ctx context.Context, args []sqldriver.NamedValue) (sqldriver.Rows, error) {
	s.n.Add(1)
	return s.Stmt.(sqldriver.StmtQueryContext).QueryContext(ctx, args)
}

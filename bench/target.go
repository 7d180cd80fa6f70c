package bench

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
	_ "github.com/jackc/pgx/v5/stdlib" // database/sql driver "pgx"
	_ "modernc.org/sqlite"             // database/sql driver "sqlite"

	"github.com/postbox-go/postbox/driver"
	"github.com/postbox-go/postbox/driver/databasesql"
	"github.com/postbox-go/postbox/driver/pgxv5"
)

// target is the database under test, reached through one client library.
type target[TTx any] struct {
	dialect string // "postgres", "mysql" or "sqlite"
	// open returns a new pool of at most maxConns connections. Each relay and each group of producers gets a pool
	// of its own, as it would in a process of its own.
	open func(ctx context.Context, maxConns int) (*conns[TTx], error)
}

// conns is one pool, seen through Postbox's driver and through plain SQL for the baselines.
type conns[TTx any] struct {
	drv driver.Driver[TTx]
	// txExec runs a statement in a transaction of the driver's type.
	txExec func(ctx context.Context, tx TTx, q string, args ...any) error
	// txCopy writes rows through COPY; nil when the client library has no COPY.
	txCopy func(ctx context.Context, tx TTx, table string, cols []string, rows [][]any) error
	// exec runs a statement outside any transaction.
	exec func(ctx context.Context, q string, args ...any) (int64, error)
	// readRecords runs q, scans every returned row into the Go types the relay uses for an outbox record, and
	// returns the number of rows.
	readRecords func(ctx context.Context, q string, args ...any) (int, error)
	// claimDelete, where the database has no DELETE ... RETURNING (MySQL), is the relay's baseline for one batch:
	// lock at most limit pending rows of table, read them, delete them and commit; it returns the rows deleted.
	claimDelete func(ctx context.Context, table string, limit int) (int, error)
	// txDrain, where the client library pipelines (pgx), is the relay's own protocol in plain SQL on one
	// connection: q (a DELETE ... RETURNING) in a transaction, its rows read, then COMMIT, BEGIN and q again in one
	// round trip, while more, told the rows each q deleted, says so; then it commits.
	txDrain func(ctx context.Context, q string, more func(deleted int) bool, args ...any) error
	// queries returns the number of statements sent through this pool so far, or -1 when it cannot be counted.
	queries func() int64
	close   func()
}

func (t *target[TTx]) ph(n int) string {
	if t.dialect == "postgres" {
		return "$" + strconv.Itoa(n)
	}
	return "?"
}

// phList returns the placeholders of arguments 1 to n, comma-separated.
func (t *target[TTx]) phList(n int) string {
	phs := make([]string, n)
	for i := range phs {
		phs[i] = t.ph(i + 1)
	}
	return strings.Join(phs, ", ")
}

// pgxTarget reaches PostgreSQL through pgx v5.
func pgxTarget(ctx context.Context, o Options) (*target[pgx.Tx], error) {
	u, err := ensurePostgres(ctx, o.URL)
	if err != nil {
		return nil, err
	}
	var listen *pgx.ConnConfig
	if o.ListenURL != "" {
		if listen, err = pgx.ParseConfig(o.ListenURL); err != nil {
			return nil, fmt.Errorf("bench: listen URL: %w", err)
		}
	}
	open := func(ctx context.Context, maxConns int) (*conns[pgx.Tx], error) {
		cfg, err := pgxpool.ParseConfig(u)
		if err != nil {
			return nil, err
		}
		counter := &queryCounter{}
		cfg.MaxConns = int32(maxConns)
		cfg.ConnConfig.Tracer = counter
		pool, err := pgxpool.NewWithConfig(ctx, cfg)
		if err != nil {
			return nil, err
		}
		drv := pgxv5.New(pool)
		if listen != nil {
			drv = drv.WithListenConfig(listen)
		}
		return &conns[pgx.Tx]{
			drv: drv,
			txExec: func(ctx context.Context, tx pgx.Tx, q string, args ...any) error {
				_, err := tx.Exec(ctx, q, args...)
				return err
			},
			txCopy: func(ctx context.Context, tx pgx.Tx, table string, cols []string, rows [][]any) error {
				_, err := tx.CopyFrom(ctx, pgx.Identifier{table}, cols, pgx.CopyFromRows(rows))
				return err
			},
			exec: func(ctx context.Context, q string, args ...any) (int64, error) {
				tag, err := pool.Exec(ctx, q, args...)
				return tag.RowsAffected(), err
			},
			readRecords: func(ctx context.Context, q string, args ...any) (int, error) {
				rows, err := pool.Query(ctx, q, args...)
				if err != nil {
					return 0, err
				}
				defer rows.Close()
				return readRecordRows(rows, "postgres", nil)
			},
			txDrain: func(ctx context.Context, q string, more func(int) bool, args ...any) error {
				conn, err := pool.Acquire(ctx)
				if err != nil {
					return err
				}
				defer conn.Release()
				return pipelinedDrain(ctx, conn.Conn(), q, more, args...)
			},
			queries: counter.n.Load,
			close:   pool.Close,
		}, nil
	}
	return &target[pgx.Tx]{dialect: "postgres", open: open}, nil
}

// queryCounter counts the statements a pgx pool sends, BEGIN and COMMIT included.
type queryCounter struct{ n atomic.Int64 }

func (c *queryCounter) TraceQueryStart(ctx context.Context, _ *pgx.Conn, _ pgx.TraceQueryStartData) context.Context {
	c.n.Add(1)
	return ctx
}

func (c *queryCounter) TraceQueryEnd(context.Context, *pgx.Conn, pgx.TraceQueryEndData) {}

// sqlTarget reaches PostgreSQL or SQLite through database/sql.
func sqlTarget(ctx context.Context, o Options) (*target[*sql.Tx], error) {
	dialect, driverName, dsn := "postgres", "pgx", o.URL
	pbDialect := databasesql.Postgres
	if o.DB == DBSQLite {
		dialect, driverName, pbDialect = "sqlite", "sqlite", databasesql.SQLite
		path := o.URL
		if path == "" {
			dir, err := os.MkdirTemp("", "postbox-bench")
			if err != nil {
				return nil, err
			}
			path = filepath.Join(dir, "bench.db")
		}
		dsn = "file:" + path + "?_pragma=journal_mode(WAL)&_pragma=busy_timeout(10000)&_pragma=synchronous(NORMAL)&_txlock=immediate"
	} else {
		var err error
		if dsn, err = ensurePostgres(ctx, o.URL); err != nil {
			return nil, err
		}
	}
	open := func(ctx context.Context, maxConns int) (*conns[*sql.Tx], error) {
		db, err := sql.Open(driverName, dsn)
		if err != nil {
			return nil, err
		}
		db.SetMaxOpenConns(maxConns)
		db.SetMaxIdleConns(maxConns)
		if err := db.PingContext(ctx); err != nil {
			db.Close()
			return nil, err
		}
		return &conns[*sql.Tx]{
			drv: databasesql.New(db, pbDialect),
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
				return scanRecordRows(rows, dialect, nil)
			},
			queries: func() int64 { return -1 },
			close:   func() { db.Close() },
		}, nil
	}
	return &target[*sql.Tx]{dialect: dialect, open: open}, nil
}

// recordDest holds one scanned outbox row in the types the relay scans it into.
type recordDest struct {
	id, topic, key, typ, status, lastErr string
	payload                              []byte
	headers                              *string
	attempts                             int
	avail, created                       any
	published                            any
}

func newRecordDest(dialect string) *recordDest {
	d := &recordDest{}
	if dialect == "postgres" {
		d.avail, d.created, d.published = new(time.Time), new(time.Time), new(*time.Time)
	} else {
		d.avail, d.created, d.published = new(int64), new(int64), new(*int64)
	}
	return d
}

// cols joins column names for a statement, quoting key where it is a reserved word (MySQL).
func (t *target[TTx]) cols(names []string) string {
	if t.dialect != "mysql" {
		return strings.Join(names, ", ")
	}
	q := make([]string, len(names))
	for i, n := range names {
		if n == "key" {
			n = "`key`"
		}
		q[i] = n
	}
	return strings.Join(q, ", ")
}

// rowReader is what readRecordRows takes of *sql.Rows and pgx.Rows.
type rowReader interface {
	Next() bool
	Scan(dest ...any) error
	Err() error
}

// readRecordRows scans every row into the Go types the relay uses for an outbox record, into one recordDest
// reused for every row as a hand-written drain would, passes it to each when each is not nil, and returns the
// number of rows. The caller closes rows.
func readRecordRows(rows rowReader, dialect string, each func(*recordDest)) (int, error) {
	n, d := 0, newRecordDest(dialect)
	dests := d.dests()
	for rows.Next() {
		if err := rows.Scan(dests...); err != nil {
			return n, err
		}
		if each != nil {
			each(d)
		}
		n++
	}
	return n, rows.Err()
}

func (d *recordDest) dests() []any {
	return []any{&d.id, &d.topic, &d.key, &d.typ, &d.payload, &d.headers, &d.status, &d.attempts, &d.lastErr,
		d.avail, d.created, d.published}
}

// ensurePostgres returns the URL to use, creating its database when it does not exist.
func ensurePostgres(ctx context.Context, raw string) (string, error) {
	if raw == "" {
		raw = DefaultPostgresURL
		if env := os.Getenv("POSTBOX_BENCH_POSTGRES"); env != "" {
			raw = env
		}
	}
	conn, err := pgx.Connect(ctx, raw)
	if err == nil {
		return raw, conn.Close(ctx)
	}
	var pgErr *pgconn.PgError
	if !errors.As(err, &pgErr) || pgErr.Code != "3D000" { // 3D000: the database does not exist
		return "", fmt.Errorf("bench: PostgreSQL is not reachable at %s (start it, or pass --db): %w", raw, err)
	}
	u, err := url.Parse(raw)
	if err != nil {
		return "", fmt.Errorf("bench: --db %q: %w", raw, err)
	}
	name := filepath.Base(u.Path)
	u.Path = "/postgres"
	admin, err := pgx.Connect(ctx, u.String())
	if err != nil {
		return "", fmt.Errorf("bench: create database %s: %w", name, err)
	}
	defer admin.Close(ctx)
	if _, err := admin.Exec(ctx, "CREATE DATABASE "+pgx.Identifier{name}.Sanitize()); err != nil {
		return "", fmt.Errorf("bench: create database %s: %w", name, err)
	}
	return raw, nil
}

// pipelinedDrain is conns.txDrain on conn: the relay's round trips (BEGIN and the claim; then COMMIT, BEGIN and the
// next claim), without the relay.
func pipelinedDrain(ctx context.Context, conn *pgx.Conn, q string, more func(int) bool, args ...any) error {
	batch := &pgx.Batch{}
	batch.Queue("BEGIN")
	for {
		batch.Queue(q, args...)
		br := conn.SendBatch(ctx, batch)
		for range batch.Len() - 1 {
			if _, err := br.Exec(); err != nil {
				return errors.Join(err, br.Close())
			}
		}
		rows, err := br.Query()
		n := 0
		if err == nil {
			n, err = readRecordRows(rows, "postgres", nil)
			rows.Close()
		}
		if err = errors.Join(err, br.Close()); err != nil {
			return err
		}
		if !more(n) {
			_, err := conn.Exec(ctx, "COMMIT")
			return err
		}
		batch = &pgx.Batch{}
		batch.Queue("COMMIT")
		batch.Queue("BEGIN")
	}
}

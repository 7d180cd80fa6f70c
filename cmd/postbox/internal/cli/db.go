package cli

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"io/fs"
	"net/url"
	"os"
	"strings"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	_ "modernc.org/sqlite" // the "sqlite" database/sql driver

	"github.com/postbox-go/postbox"
	"github.com/postbox-go/postbox/driver/databasesql"
	"github.com/postbox-go/postbox/partition"
)

// database is a Postbox client on one database, whatever its driver's transaction type.
type database interface {
	Dialect() string
	Ping(ctx context.Context) error
	Close()

	Migrate(ctx context.Context) ([]int, error)
	MigrationStatus(ctx context.Context) ([]postbox.MigrationState, error)
	Migrations() []postbox.Migration

	// Send enqueues m in a transaction of its own and returns its ID.
	Send(ctx context.Context, m postbox.Message) (string, error)
	Stats(ctx context.Context) (postbox.Stats, error)
	ListDead(ctx context.Context, f postbox.DeadFilter) ([]postbox.Record, error)
	CountDead(ctx context.Context, f postbox.DeadFilter, limit int64) (postbox.Count, error)
	RetryDead(ctx context.Context, f postbox.DeadFilter) (int64, error)
	PurgeDead(ctx context.Context, f postbox.DeadFilter) (int64, error)
	PauseTopic(ctx context.Context, topic, actor string) (bool, error)
	ResumeTopic(ctx context.Context, topic, actor string) (bool, error)
	PausedTopics(ctx context.Context) ([]postbox.PausedTopic, error)
	Relays(ctx context.Context) ([]postbox.RelayStatus, error)

	NewRelay(pub postbox.Publisher, cfg *postbox.RelayConfig) (*postbox.Relay, error)
	NewCleaner(cfg *postbox.CleanupConfig) (*postbox.Cleaner, error)
	NewMaintainer(cfg *partition.Config) (*partition.Maintainer, error)
}

// clientDB implements database over a Client of one transaction type.
type clientDB[TTx any] struct {
	*postbox.Client[TTx]
	dialect string
	ping    func(ctx context.Context) error
	close   func()
}

func (d *clientDB[TTx]) Dialect() string                { return d.dialect }
func (d *clientDB[TTx]) Ping(ctx context.Context) error { return d.ping(ctx) }
func (d *clientDB[TTx]) Close()                         { d.close() }

func (d *clientDB[TTx]) Send(ctx context.Context, m postbox.Message) (string, error) {
	var id string
	err := d.InTx(ctx, func(ctx context.Context, tx TTx) (err error) {
		id, err = d.Enqueue(ctx, tx, m)
		return err
	})
	return id, err
}

func (d *clientDB[TTx]) NewRelay(pub postbox.Publisher, cfg *postbox.RelayConfig) (*postbox.Relay, error) {
	return postbox.NewRelay(d.Client, pub, cfg)
}

func (d *clientDB[TTx]) NewCleaner(cfg *postbox.CleanupConfig) (*postbox.Cleaner, error) {
	return postbox.NewCleaner(d.Client, cfg)
}

func (d *clientDB[TTx]) NewMaintainer(cfg *partition.Config) (*partition.Maintainer, error) {
	return partition.New(d.Client, cfg)
}

// dbOptions are the flags naming a database and its tables.
type dbOptions struct {
	url, schema, table, inboxTable string
	partitioned                    bool // only migrate has the flag: it shapes tables yet to be created
	ordered                        bool // migrate adds the key index; relay claims in per-key order
	sqlAPI                         bool // only migrate has the flag: it installs the SQL enqueue API
	pg                             pgOptions
}

func addDBFlags(f *flagSet, o *dbOptions) {
	f.URL(&o.url, "db", "", "database URL: "+dbURLForms+" (required)")
	addTableFlags(f, o)
}

// addTableFlags adds the flags of addDBFlags but --db, for commands that take --db their own way.
func addTableFlags(f *flagSet, o *dbOptions) {
	f.String(&o.schema, "schema", "", "", "NAME", "PostgreSQL schema or MySQL database holding the tables (default: the search path, or the URL's database)")
	f.String(&o.table, "table", "", postbox.DefaultTable, "NAME", "outbox table")
	f.String(&o.inboxTable, "inbox-table", "", postbox.DefaultInboxTable, "NAME", "inbox table")
	addPoolerFlag(f, &o.pg)
}

func (o dbOptions) config(rt *runtime, reg *postbox.Registry) *postbox.Config {
	return &postbox.Config{Schema: o.schema, Table: o.table, InboxTable: o.inboxTable, Logger: rt.log, Registry: reg,
		Partitioned: o.partitioned, Ordered: o.ordered, SQLAPI: o.sqlAPI}
}

// open returns a client on the database; it does no I/O, so a wrong address shows on first use.
func (o dbOptions) open(ctx context.Context, rt *runtime, reg *postbox.Registry) (database, error) {
	if o.url == "" && rt.file != nil && rt.file.sources != nil {
		return nil, usageErrorf("--db is required: this command works on one database and reads no sources list (relay, "+
			"status and migrate do); give --db the URL of one of the sources in %s", rt.file.path)
	}
	if o.url == "" {
		return nil, usageErrorf("--db is required: a database URL such as %s (or set POSTBOX_DB)", dbURLForms)
	}
	if err := o.pg.check(o.url); err != nil {
		return nil, err
	}
	return openDatabase(ctx, o.url, o.config(rt, reg), o.pg)
}

// sqliteMissing refuses a sqlite: URL whose file does not exist, before anything connects: SQLite would create
// an empty database, so a command given a mistyped path would leave a file behind and then suggest migrating it.
// Only migrate up creates the file. Other URLs, and in-memory SQLite, pass.
func (o dbOptions) sqliteMissing() error {
	if dbScheme(o.url) != "sqlite" {
		return nil
	}
	path, query, err := sqlitePath(o.url)
	if err != nil {
		return err
	}
	if strings.HasPrefix(path, ":memory:") || strings.Contains(query, "mode=memory") {
		return nil
	}
	if _, err := os.Stat(path); errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("the database file %s does not exist (--db %s), so the outbox tables do not exist either: "+
			"check the path, or run `%s` to create both", path, RedactURL(o.url), o.migrateCommand())
	}
	return nil
}

// dbURLForms are the database URLs the CLI takes, for help and errors.
const dbURLForms = "postgres://user:pass@host:5432/db, mysql://user:pass@host:3306/db or sqlite:path/to/file.db"

// openDatabase makes a client for a database URL: postgres:// or postgresql:// through pgx, mysql:// (or
// mariadb://) through go-sql-driver/mysql, sqlite: through modernc.org/sqlite. pg applies to PostgreSQL only.
func openDatabase(ctx context.Context, raw string, cfg *postbox.Config, pg pgOptions) (database, error) {
	switch dbScheme(raw) {
	case "postgres":
		pc, err := pgxpool.ParseConfig(raw)
		if err != nil {
			return nil, usageErrorf("--db %s: %v", RedactURL(raw), err)
		}
		pg.configure(raw, pc)
		if pg.maxConns > 0 {
			pc.MaxConns = int32(min(pg.maxConns, 1<<30))
		}
		pool, err := pgxpool.NewWithConfig(ctx, pc)
		if err != nil {
			return nil, fmt.Errorf("connect to %s: %w", RedactURL(raw), err)
		}
		drv, err := pg.driver(pool)
		if err != nil {
			pool.Close()
			return nil, err
		}
		c, err := postbox.NewClient(drv, cfg)
		if err != nil {
			pool.Close()
			return nil, usageErrorf("%v", err)
		}
		return &clientDB[pgx.Tx]{Client: c, dialect: "postgres", ping: pool.Ping, close: pool.Close}, nil
	case "sqlite":
		dsn, err := sqliteDSN(raw)
		if err != nil {
			return nil, err
		}
		db, err := sql.Open("sqlite", dsn)
		if err != nil {
			return nil, fmt.Errorf("open %s: %w", raw, err)
		}
		if pg.maxConns > 0 {
			db.SetMaxOpenConns(pg.maxConns)
		}
		c, err := postbox.NewClient(databasesql.New(db, databasesql.SQLite), cfg)
		if err != nil {
			db.Close()
			return nil, usageErrorf("%v", err)
		}
		return &clientDB[*sql.Tx]{Client: c, dialect: "sqlite", ping: db.PingContext, close: func() { db.Close() }}, nil
	case "mysql":
		db, err := mysqlDB(raw)
		if err != nil {
			return nil, err
		}
		if pg.maxConns > 0 {
			db.SetMaxOpenConns(pg.maxConns)
		}
		c, err := postbox.NewClient(databasesql.New(db, databasesql.MySQL), cfg)
		if err != nil {
			db.Close()
			return nil, usageErrorf("%v", err)
		}
		return &clientDB[*sql.Tx]{Client: c, dialect: "mysql", ping: db.PingContext, close: func() { db.Close() }}, nil
	default:
		if strings.Contains(raw, "@tcp(") || strings.Contains(raw, "@unix(") {
			return nil, usageErrorf("--db %s: this is a go-sql-driver DSN; write it as a URL, mysql://user:pass@host:3306/database", RedactURL(raw))
		}
		if !strings.Contains(raw, ":") && strings.Contains(raw, "=") {
			return nil, usageErrorf("--db %s: this is a keyword/value connection string; write it as a URL, postgres://user:pass@host:5432/database",
				RedactURL(raw))
		}
		return nil, usageErrorf("--db %s: unknown database; use %s", RedactURL(raw), dbURLForms)
	}
}

// dbScheme returns the kind of database a URL names: postgres, mysql, sqlite, or its scheme as written.
func dbScheme(raw string) string {
	scheme, _, _ := strings.Cut(raw, ":")
	switch s := strings.ToLower(scheme); s {
	case "postgres", "postgresql":
		return "postgres"
	case "mysql", "mariadb":
		return "mysql"
	case "sqlite", "sqlite3", "file":
		return "sqlite"
	default:
		return s
	}
}

// sqliteDSN turns sqlite:PATH (or sqlite://PATH, sqlite:///ABSOLUTE) into a modernc.org/sqlite DSN with the
// settings Postbox needs: WAL so that readers do not block the writer, a busy timeout so that writers wait
// instead of failing, and immediate transactions so that a transaction that reads first cannot fail to write.
// Query parameters in the URL are passed on.
func sqliteDSN(raw string) (string, error) {
	path, query, err := sqlitePath(raw)
	if err != nil {
		return "", err
	}
	extra, err := url.ParseQuery(query)
	if err != nil {
		return "", usageErrorf("--db %s: %v", raw, err)
	}
	q := url.Values{"_pragma": {"journal_mode(WAL)", "busy_timeout(10000)"}, "_txlock": {"immediate"}}
	for k, vs := range extra {
		if k == "_txlock" {
			q[k] = nil // ours must win: Postbox's claims rely on immediate transactions
			if len(vs) > 0 && vs[0] != "immediate" {
				return "", usageErrorf("--db %s: _txlock must be immediate for Postbox", raw)
			}
		}
		q[k] = append(q[k], vs...)
	}
	return "file:" + path + "?" + q.Encode(), nil
}

// sqlitePath splits sqlite:PATH?QUERY (or sqlite://PATH, sqlite:///ABSOLUTE) into the file and the query.
func sqlitePath(raw string) (path, query string, err error) {
	_, rest, _ := strings.Cut(raw, ":")
	path, query, _ = strings.Cut(strings.TrimPrefix(rest, "//"), "?")
	if path == "" {
		return "", "", usageErrorf("--db %s: no file; write sqlite:path/to/file.db", raw)
	}
	return path, query, nil
}

package cli

import (
	"context"
	"net/url"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/postbox-go/postbox"
	"github.com/postbox-go/postbox/driver/pgxv5"
)

// Values of --db-pooler.
const (
	poolerNone        = "none"
	poolerTransaction = "transaction"
)

// pgOptions are the connection settings beyond the URL: the pooler in front of the database, the direct
// connection the relay listens on (both PostgreSQL's), and the most connections the pool opens.
type pgOptions struct {
	pooler    string // --db-pooler
	listenURL string // --listen-db
	maxConns  int    // --db-max-conns; 0 for the driver's default
}

func addPoolerFlag(f *flagSet, o *pgOptions) {
	f.String(&o.pooler, "db-pooler", "", poolerNone, "MODE",
		"pooler in front of PostgreSQL: transaction (PgBouncer pool_mode = transaction: pgx's exec mode, and the relay "+
			"polls unless --listen-db is given) or none")
}

// check refuses a pooler mode that is not known or not PostgreSQL's.
func (o pgOptions) check(dbURL string) error {
	switch o.pooler {
	case poolerNone, "":
	case poolerTransaction:
		if dbScheme(dbURL) != "postgres" {
			return usageErrorf("--db-pooler %s applies to PostgreSQL (postgres://) URLs only", o.pooler)
		}
	default:
		return usageErrorf("--db-pooler %q: use %s (PgBouncer in pool_mode = transaction) or %s", o.pooler, poolerTransaction, poolerNone)
	}
	if o.listenURL != "" && (dbScheme(o.listenURL) != "postgres" || dbScheme(dbURL) != "postgres") {
		return usageErrorf("--listen-db %s: give a direct PostgreSQL URL, postgres://user:pass@host:5432/db, for a "+
			"PostgreSQL --db", RedactURL(o.listenURL))
	}
	return nil
}

// configure applies the pooler mode to the pool's configuration: behind a transaction pooler, queries run in
// pgx's exec mode (one round trip, no named prepared statement to outlive the transaction) unless the URL chose a
// mode itself (PgBouncer 1.21+ with max_prepared_statements keeps pgx's statement cache working).
func (o pgOptions) configure(raw string, pc *pgxpool.Config) {
	if o.pooler != poolerTransaction {
		return
	}
	if u, err := url.Parse(raw); err == nil && u.Query().Has("default_query_exec_mode") {
		return
	}
	pc.ConnConfig.DefaultQueryExecMode = pgx.QueryExecModeExec
}

// driver returns the pgx driver on pool, listening on --listen-db when it is given.
func (o pgOptions) driver(pool *pgxpool.Pool) (*pgxv5.Driver, error) {
	drv := pgxv5.New(pool)
	if o.listenURL == "" {
		return drv, nil
	}
	lc, err := pgx.ParseConfig(o.listenURL)
	if err != nil {
		return nil, usageErrorf("--listen-db %s: %v", RedactURL(o.listenURL), err)
	}
	return drv.WithListenConfig(lc), nil
}

// configureListen decides how the relay learns of new messages. Behind a transaction pooler without --listen-db
// it polls; when it listens on PostgreSQL, through --db or --listen-db, it warns if that connection looks pooled.
func configureListen(ctx context.Context, rt *runtime, o dbOptions, cfg *postbox.RelayConfig) error {
	if cfg.DisableListen && o.pg.listenURL != "" {
		return usageErrorf("--no-listen and --listen-db contradict each other; keep one")
	}
	if dbScheme(o.url) != "postgres" || cfg.DisableListen {
		return nil
	}
	target, flag := o.pg.listenURL, "--listen-db"
	if target == "" {
		if o.pg.pooler == poolerTransaction {
			cfg.DisableListen = true
			rt.log.Info("behind a transaction pooler the relay does not LISTEN: it polls; give --listen-db a direct "+
				"PostgreSQL URL for wake-ups", "poll_interval", cfg.PollInterval)
			return nil
		}
		target, flag = o.url, "--db"
	}
	if pooled(ctx, target) {
		rt.log.Warn("the relay's LISTEN connection goes through what looks like a connection pooler; in transaction mode "+
			"(PgBouncer pool_mode = transaction) notifications never reach it and messages wait for the poll: give "+
			"--listen-db a direct PostgreSQL URL, or --no-listen", flag, RedactURL(target))
	}
	return nil
}

// pooled reports whether a connection to raw looks pooled: the backend the session reaches is not the one its
// start-up message named, as happens when a pooler (PgBouncer) stands between. Any failure reports false; the
// relay's own connection reports it.
func pooled(ctx context.Context, raw string) bool {
	cfg, err := pgx.ParseConfig(raw)
	if err != nil {
		return false
	}
	cfg.DefaultQueryExecMode = pgx.QueryExecModeSimpleProtocol // any pooler mode passes it
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	conn, err := pgx.ConnectConfig(ctx, cfg)
	if err != nil {
		return false
	}
	defer conn.Close(context.WithoutCancel(ctx))
	var pid uint32
	if err := conn.QueryRow(ctx, "SELECT pg_backend_pid()").Scan(&pid); err != nil {
		return false
	}
	return pid != conn.PgConn().PID()
}

// poolerHelp is the relay help's paragraph on poolers.
const poolerHelp = `Behind PgBouncer in transaction mode, give --db-pooler transaction: queries use pgx's exec mode (PgBouncer
before 1.21 keeps no prepared statements), and the relay polls every --poll-interval, since LISTEN through such a
pooler hears nothing. With --listen-db postgres://... (a direct connection to PostgreSQL) it listens there
instead and wakes at once; producers' wake-ups pass through the pooler unchanged. --no-listen turns LISTEN off
anywhere. The relay warns at start-up when it would LISTEN through what looks like a pooler.`

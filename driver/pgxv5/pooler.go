package pgxv5

import (
	"errors"
	"fmt"
	"strings"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

// WithListenConfig returns a copy of d whose relays LISTEN on connections made with cfg instead of the pool's
// settings. Behind a pooler in transaction mode (PgBouncer's pool_mode = transaction) notifications reach
// whichever server connection ran LISTEN, not the listener; give cfg a direct connection to PostgreSQL, such as
// pgx.ParseConfig("postgres://app@db-primary:5432/app"), and keep the pool on the pooler. Producers' wake-ups
// (pg_notify at commit) go through the pooler unchanged. With no direct connection at hand, set
// postbox.RelayConfig.DisableListen instead, and the relay polls.
func (d *Driver) WithListenConfig(cfg *pgx.ConnConfig) *Driver {
	c := *d
	c.listen = cfg
	return &c
}

// listenConfig is the configuration of the connections Listen makes.
func (d *Driver) listenConfig() *pgx.ConnConfig {
	if d.listen != nil {
		return d.listen
	}
	return d.pool.Config().ConnConfig
}

// poolerFix is what to do when a pooler lost pgx's cached prepared statements.
const poolerFix = "the database connection goes through a pooler in transaction mode (such as PgBouncer before 1.21, " +
	"or without max_prepared_statements), which does not keep prepared statements: add default_query_exec_mode=exec " +
	"to the database URL, or set ConnConfig.DefaultQueryExecMode = pgx.QueryExecModeExec on the pgxpool.Config " +
	"(postbox command: --db-pooler transaction)"

// explainPooler returns err with the fix beside it when it is the error a transaction pooler causes with pgx's
// default statement cache: a prepared statement "stmtcache_..." that already exists (42P05), does not exist
// (26000), or takes other parameters (08P01) on the server connection the pooler picked this time.
func explainPooler(err error) error {
	var pgErr *pgconn.PgError
	if err == nil || !errors.As(err, &pgErr) || !strings.Contains(pgErr.Message, `prepared statement "stmtcache_`) {
		return err
	}
	return fmt.Errorf("%w; %s", err, poolerFix)
}

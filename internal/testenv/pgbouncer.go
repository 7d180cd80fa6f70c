package testenv

import (
	"context"
	"fmt"
	"net/url"
	"os"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
)

// PgBouncerAddr is the PgBouncer the tests use, in transaction mode in front of PostgresAdminURL's server:
// POSTBOX_TEST_PGBOUNCER (host:port), or 127.0.0.1:6432, where scripts/services.sh starts it.
func PgBouncerAddr() string {
	if a := os.Getenv("POSTBOX_TEST_PGBOUNCER"); a != "" {
		return a
	}
	return "127.0.0.1:6432"
}

// ThroughPgBouncer returns dbURL, a database of the test server (from FreshPostgres), reached through PgBouncer
// instead, with query added to the URL's (such as "default_query_exec_mode=exec"). When PgBouncer does not answer,
// the test fails under CI=true and is skipped otherwise, with how to start it.
func ThroughPgBouncer(t testing.TB, dbURL, query string) string {
	t.Helper()
	u, err := url.Parse(dbURL)
	if err != nil {
		t.Fatal(err)
	}
	u.Host = PgBouncerAddr()
	if query != "" {
		if u.RawQuery != "" {
			query = "&" + query
		}
		u.RawQuery += query
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := pgBouncerAnswers(ctx, u.String()); err != nil {
		msg := fmt.Sprintf("PgBouncer is not reachable at %s (start it with `make services`, or set POSTBOX_TEST_PGBOUNCER): %v",
			u.Host, err)
		if os.Getenv("CI") == "true" {
			t.Fatal(msg)
		}
		t.Skip(msg)
	}
	return u.String()
}

// pgBouncerAnswers connects through the pooler and runs a statement in the simple protocol, which every pool
// mode passes.
func pgBouncerAnswers(ctx context.Context, raw string) error {
	cfg, err := pgx.ParseConfig(raw)
	if err != nil {
		return err
	}
	cfg.DefaultQueryExecMode = pgx.QueryExecModeSimpleProtocol
	conn, err := pgx.ConnectConfig(ctx, cfg)
	if err != nil {
		return err
	}
	defer conn.Close(ctx)
	_, err = conn.Exec(ctx, "SELECT 1")
	return err
}

// Package pgxenv gives tests a migrated Postbox client on a PostgreSQL database of their package's own, through
// pgx, and the SQL hooks the conformance suites need.
package pgxenv

import (
	"context"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/postbox-go/postbox"
	"github.com/postbox-go/postbox/driver/drivertest"
	"github.com/postbox-go/postbox/driver/pgxv5"
	"github.com/postbox-go/postbox/internal/testenv"
)

// Hooks run the suites' own SQL in a pgx transaction, as a user's handler does.
var Hooks = drivertest.Options[pgx.Tx]{
	Exec: func(ctx context.Context, tx pgx.Tx, query string) error {
		_, err := tx.Exec(ctx, query)
		return err
	},
	QueryInt: func(ctx context.Context, tx pgx.Tx, query string) (n int64, err error) {
		err = tx.QueryRow(ctx, query).Scan(&n)
		return n, err
	},
}

// Client returns a migrated client on fresh tables in a fresh database called database (made unique to the
// calling package's checkout), closed when t ends.
func Client(t *testing.T, database string) *postbox.Client[pgx.Tx] {
	t.Helper()
	url, err := testenv.FreshPostgres(database)
	if err != nil {
		t.Fatal(err)
	}
	pool, err := pgxpool.New(context.Background(), url)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	return drivertest.Client(t, pgxv5.New(pool), nil)
}

package databasesql_test

import (
	"context"
	"database/sql"
	"fmt"
	"os"
	"path/filepath"
	"testing"

	_ "github.com/go-sql-driver/mysql"
	_ "github.com/jackc/pgx/v5/stdlib"
	"go.uber.org/goleak"
	_ "modernc.org/sqlite"

	"github.com/postbox-go/postbox/driver"
	"github.com/postbox-go/postbox/driver/databasesql"
	"github.com/postbox-go/postbox/driver/drivertest"
	"github.com/postbox-go/postbox/internal/testenv"
)

const childDSNEnv = "POSTBOX_CHILD_DSN"

var pgURL, myDSN string

func TestMain(m *testing.M) {
	if drivertest.IsChild() {
		os.Exit(runChild())
	}
	pgURL = testenv.OrExit(testenv.FreshPostgres("postbox_test_databasesql"))
	myDSN = testenv.OrExit(testenv.FreshMySQL("postbox_test_mysql"))
	goleak.VerifyTestMain(m)
}

func open(t *testing.T, driverName, dsn string) *sql.DB {
	db, err := sql.Open(driverName, dsn)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	return db
}

func newPostgres(t *testing.T) driver.Driver[*sql.Tx] {
	return databasesql.New(open(t, "pgx", pgURL), databasesql.Postgres)
}

// sqliteDSN is the setting the package docs recommend: WAL, a busy timeout and immediate transactions.
func sqliteDSN(path string) string {
	return "file:" + path + "?_pragma=journal_mode(WAL)&_pragma=busy_timeout(10000)&_txlock=immediate"
}

// newSQLite returns drivers on one database file for the whole of top's tests, as separate processes would share
// it; each call opens its own *sql.DB.
func newSQLite(top *testing.T) func(t *testing.T) driver.Driver[*sql.Tx] {
	path := filepath.Join(top.TempDir(), "postbox.db")
	return func(t *testing.T) driver.Driver[*sql.Tx] {
		return databasesql.New(open(t, "sqlite", sqliteDSN(path)), databasesql.SQLite)
	}
}

// sqlHooks run the suite's own SQL in a *sql.Tx, as a user's handler does.
var sqlHooks = drivertest.Options[*sql.Tx]{
	Exec: func(ctx context.Context, tx *sql.Tx, query string) error {
		_, err := tx.ExecContext(ctx, query)
		return err
	},
	QueryInt: func(ctx context.Context, tx *sql.Tx, query string) (n int64, err error) {
		err = tx.QueryRowContext(ctx, query).Scan(&n)
		return n, err
	},
}

func TestPostgresConformance(t *testing.T) {
	drivertest.Exercise(t, newPostgres, sqlHooks)
}

func TestSQLiteConformance(t *testing.T) {
	drivertest.Exercise(t, newSQLite(t), sqlHooks)
}

func TestPostgresKilledRelay(t *testing.T) {
	drivertest.ExerciseKilledRelay(t, newPostgres(t), childDSNEnv+"=pgx "+pgURL)
}

func TestSQLiteKilledRelay(t *testing.T) {
	path := filepath.Join(t.TempDir(), "postbox.db")
	drivertest.ExerciseKilledRelay(t, databasesql.New(open(t, "sqlite", sqliteDSN(path)), databasesql.SQLite),
		childDSNEnv+"=sqlite "+sqliteDSN(path))
}

func runChild() int {
	var name, dsn string
	if _, err := fmt.Sscan(os.Getenv(childDSNEnv), &name, &dsn); err != nil {
		fmt.Fprintln(os.Stderr, "bad", childDSNEnv, err)
		return 1
	}
	db, err := sql.Open(name, dsn)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer db.Close()
	dialect := map[string]databasesql.Dialect{"pgx": databasesql.Postgres, "sqlite": databasesql.SQLite, "mysql": databasesql.MySQL}[name]
	return drivertest.RunChild(databasesql.New(db, dialect))
}

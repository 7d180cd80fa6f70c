// Package testenv prepares the real services Postbox's tests run against (PostgreSQL, MySQL or MariaDB). Each
// test package gets a database of its own, so packages run in parallel without seeing each other's tables.
package testenv

import (
	"context"
	"crypto/sha256"
	"database/sql"
	"encoding/hex"
	"fmt"
	"net/url"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/go-sql-driver/mysql"
	"github.com/jackc/pgx/v5"
)

// PostgresAdminURL is the server the tests use, from POSTBOX_TEST_POSTGRES or the local default.
func PostgresAdminURL() string {
	if u := os.Getenv("POSTBOX_TEST_POSTGRES"); u != "" {
		return u
	}
	return "postgres://postgres@127.0.0.1:5432/postgres?sslmode=disable"
}

// FreshPostgres drops and recreates a database for the calling test package and returns its URL. The database
// is called name with a suffix derived from the package's directory, so two checkouts of the repository testing
// at once on one server never drop each other's database. A missing server is an error, never a reason to skip:
// the tests that need it must fail.
func FreshPostgres(name string) (string, error) {
	name = Unique(name)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	admin := PostgresAdminURL()
	conn, err := pgx.Connect(ctx, admin)
	if err != nil {
		return "", fmt.Errorf("PostgreSQL is not reachable at %s (start it with `make services`, or set POSTBOX_TEST_POSTGRES): %w", admin, err)
	}
	defer conn.Close(ctx)
	ident := pgx.Identifier{name}.Sanitize()
	if _, err := conn.Exec(ctx, "DROP DATABASE IF EXISTS "+ident+" WITH (FORCE)"); err != nil {
		return "", fmt.Errorf("drop test database %s: %w", name, err)
	}
	if _, err := conn.Exec(ctx, "CREATE DATABASE "+ident); err != nil {
		return "", fmt.Errorf("create test database %s: %w", name, err)
	}
	u, err := url.Parse(admin)
	if err != nil {
		return "", err
	}
	u.Path = "/" + name
	return u.String(), nil
}

// MySQLAdminDSN is the MySQL or MariaDB server the tests use, from POSTBOX_TEST_MYSQL or the local default.
func MySQLAdminDSN() string {
	if dsn := os.Getenv("POSTBOX_TEST_MYSQL"); dsn != "" {
		return dsn
	}
	return "root@tcp(127.0.0.1:3306)/"
}

// FreshMySQL drops and recreates a database for the calling test package and returns a DSN for it. Like
// FreshPostgres, it suffixes name so that two checkouts testing at once on one server never drop each other's
// database. A missing server is an error, never a reason to skip: the tests that need it must fail.
func FreshMySQL(name string) (string, error) {
	name = Unique(name)
	cfg, db, err := mysqlAdmin()
	if err != nil {
		return "", err
	}
	defer db.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	ident := "`" + strings.ReplaceAll(name, "`", "``") + "`"
	if _, err := db.ExecContext(ctx, "DROP DATABASE IF EXISTS "+ident); err != nil {
		return "", fmt.Errorf("drop test database %s: %w", name, err)
	}
	if _, err := db.ExecContext(ctx, "CREATE DATABASE "+ident); err != nil {
		return "", fmt.Errorf("create test database %s: %w", name, err)
	}
	cfg.DBName = name
	return cfg.FormatDSN(), nil
}

func mysqlAdmin() (*mysql.Config, *sql.DB, error) {
	admin := MySQLAdminDSN()
	cfg, err := mysql.ParseDSN(admin)
	if err != nil {
		return nil, nil, fmt.Errorf("POSTBOX_TEST_MYSQL %q is not a go-sql-driver/mysql DSN: %w", admin, err)
	}
	db, err := sql.Open("mysql", admin)
	if err != nil {
		return nil, nil, err
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := db.PingContext(ctx); err != nil {
		db.Close()
		return nil, nil, fmt.Errorf("MySQL is not reachable at %s (start MariaDB or MySQL, or set POSTBOX_TEST_MYSQL): %w", admin, err)
	}
	return cfg, db, nil
}

// Unique returns name with a suffix derived from the working directory (the test package's directory), for
// databases, schemas, streams and keys that must not collide between checkouts sharing one server.
func Unique(name string) string {
	wd, _ := os.Getwd()
	sum := sha256.Sum256([]byte(wd))
	return name + "_" + hex.EncodeToString(sum[:4])
}

// OrExit returns url, or, when err is not nil, prints err and ends the test binary with status 1. It is for
// TestMain, where a service the tests need must fail the run: testenv.OrExit(testenv.FreshPostgres(name)).
func OrExit(url string, err error) string {
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	return url
}

// Eventually polls cond until it holds, and fails the test, naming what it waited for, if it does not within 30
// seconds.
func Eventually(t testing.TB, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

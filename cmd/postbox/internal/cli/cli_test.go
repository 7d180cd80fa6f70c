package cli

import (
	"context"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-sql-driver/mysql"
	"go.uber.org/goleak"

	"github.com/postbox-go/postbox/internal/testenv"
)

var (
	pgOnce, myOnce sync.Once
	pgURL, myURL   string
	pgErr, myErr   error
)

// postgresURL makes the package's database on first use, not in TestMain: a fuzzing run starts a test binary per
// worker, and each would otherwise drop the database from under the others.
func postgresURL(t *testing.T) string {
	t.Helper()
	pgOnce.Do(func() { pgURL, pgErr = testenv.FreshPostgres("postbox_test_cli") })
	if pgErr != nil {
		t.Fatal(pgErr)
	}
	return pgURL
}

// mysqlURL makes the package's MariaDB database on first use, as postgresURL does, and returns the mysql:// URL
// the CLI takes for it.
func mysqlURL(t *testing.T) string {
	t.Helper()
	myOnce.Do(func() {
		var dsn string
		if dsn, myErr = testenv.FreshMySQL("postbox_test_cli"); myErr != nil {
			return
		}
		cfg, err := mysql.ParseDSN(dsn)
		switch {
		case err != nil:
			myErr = err
		case cfg.Net != "tcp":
			myErr = fmt.Errorf("test MySQL DSN %q: the CLI tests need a TCP address", dsn)
		default:
			u := url.URL{Scheme: "mysql", User: url.UserPassword(cfg.User, cfg.Passwd), Host: cfg.Addr, Path: "/" + cfg.DBName}
			if cfg.Passwd == "" {
				u.User = url.User(cfg.User)
			}
			myURL = u.String()
		}
	})
	if myErr != nil {
		t.Fatal(myErr)
	}
	return myURL
}

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m,
		// OpenCensus, which the Pub/Sub client records into, starts one worker for the life of the process.
		goleak.IgnoreTopFunction("go.opencensus.io/stats/view.(*worker).start"))
}

type result struct {
	code           int
	stdout, stderr string
}

// env makes an environment lookup from pairs.
func env(pairs ...string) func(string) string {
	m := map[string]string{}
	for i := 0; i+1 < len(pairs); i += 2 {
		m[pairs[i]] = pairs[i+1]
	}
	return func(k string) string { return m[k] }
}

func run(t *testing.T, environ func(string) string, args ...string) result {
	t.Helper()
	var out, errOut testenv.Buffer
	if environ == nil {
		environ = env()
	}
	code := Run(context.Background(), args, &out, &errOut, environ)
	return result{code, out.String(), errOut.String()}
}

// background runs a long-running command until stop is called, which returns its result.
func background(t *testing.T, environ func(string) string, args ...string) (stdout, stderr *testenv.Buffer, stop func() result) {
	t.Helper()
	stdout, stderr = &testenv.Buffer{}, &testenv.Buffer{}
	if environ == nil {
		environ = env()
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan int, 1)
	go func() { done <- Run(ctx, args, stdout, stderr, environ) }()
	var once sync.Once
	var res result
	stop = func() result {
		once.Do(func() {
			cancel()
			select {
			case code := <-done:
				res = result{code, stdout.String(), stderr.String()}
			case <-time.After(30 * time.Second):
				t.Fatalf("%v did not stop within 30s of cancellation; stderr:\n%s", args, stderr.String())
			}
		})
		return res
	}
	t.Cleanup(func() { stop() })
	return stdout, stderr, stop
}

// eventually polls cond until it holds or 30 seconds pass.
func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	testenv.Eventually(t, what, cond)
}

var tableSeq atomic.Int64

// target is one database the command tests run against, with tables of the test's own.
type target struct {
	name  string
	db    string
	table string
	quote string // the dialect's identifier quote
}

func (tg target) args(args ...string) []string {
	return append(args, "--db", tg.db, "--table", tg.table, "--inbox-table", tg.table+"_inbox")
}

// ok runs postbox with args against tg (a nil environ is the test environment) and fails the test unless it
// exits 0.
func (tg target) ok(t *testing.T, environ func(string) string, args ...string) result {
	t.Helper()
	r := run(t, environ, tg.args(args...)...)
	if r.code != 0 {
		t.Fatalf("postbox %v: exit %d\nstdout: %s\nstderr: %s", args, r.code, r.stdout, r.stderr)
	}
	return r
}

// targets returns a PostgreSQL, a MariaDB and a SQLite target with fresh table names.
func targets(t *testing.T) []target {
	table := freshTable()
	return []target{
		{name: "postgres", db: postgresURL(t), table: table, quote: `"`},
		{name: "mysql", db: mysqlURL(t), table: table, quote: "`"},
		{name: "sqlite", db: "sqlite:" + filepath.Join(t.TempDir(), "cli.db"), table: table, quote: `"`},
	}
}

// sqliteTarget is the target of tests that need a database but not every kind.
func sqliteTarget(t *testing.T) target {
	return target{name: "sqlite", db: "sqlite:" + filepath.Join(t.TempDir(), "cli.db"), table: freshTable(), quote: `"`}
}

func freshTable() string {
	return fmt.Sprintf("cli_%d_%d", time.Now().UnixNano()%1_000_000, tableSeq.Add(1))
}

func writeFile(t *testing.T, name, content string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

func mustContain(t *testing.T, what, got string, wants ...string) {
	t.Helper()
	for _, w := range wants {
		if !strings.Contains(got, w) {
			t.Errorf("%s does not contain %q:\n%s", what, w, got)
		}
	}
}

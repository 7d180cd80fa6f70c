package cli

import (
	"fmt"
	"net"
	"net/url"
	"regexp"
	"strings"
	"syscall"
	"testing"

	"github.com/jackc/pgx/v5/pgconn"
)

// TestRelayWaitsForItsDatabase: a relay started while nothing answers at its database's address does not exit:
// it logs once that it waits, /readyz says the database is not ready, and a signal stops it with exit 0.
func TestRelayWaitsForItsDatabase(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	_ = ln.Close() // connections to addr are refused now
	_, stderr, stop := background(t, nil, "relay", "--db", "postgres://postbox@"+addr+"/app", "--broker", "stdout:",
		"--http", "127.0.0.1:0", "--error-backoff-max", "100ms")
	httpAddr := regexp.MustCompile(`addr=(127\.0\.0\.1:\d+)`)
	eventually(t, "the line saying the relay waits for its database", func() bool {
		return strings.Contains(stderr.String(), "database unreachable at start; waiting for it") && httpAddr.MatchString(stderr.String())
	})
	code, body := readyz(t, "http://"+httpAddr.FindStringSubmatch(stderr.String())[1])
	if code != 503 || !strings.Contains(body, `{"name":"database","ok":false`) {
		t.Errorf("/readyz while the database is down = %d %s; want 503 with the database not ok", code, body)
	}
	r := stop()
	if r.code != 0 {
		t.Errorf("stopped while waiting: exit %d, want 0; stderr:\n%s", r.code, r.stderr)
	}
	if n := strings.Count(r.stderr, "database unreachable at start"); n != 1 {
		t.Errorf("the waiting line was logged %d times, want once (retries are silent); stderr:\n%s", n, r.stderr)
	}
	if strings.Contains(r.stderr, "relay started") {
		t.Errorf("the relay said it started without its database; stderr:\n%s", r.stderr)
	}
}

// TestRelayRefusesWhatWaitingCannotFix: a database that answers and refuses (a wrong password, a database that
// does not exist) ends the relay at once with exit 1, as do tables not migrated.
func TestRelayRefusesWhatWaitingCannotFix(t *testing.T) {
	u, err := url.Parse(postgresURL(t))
	if err != nil {
		t.Fatal(err)
	}
	noDB := *u
	noDB.Path = "/postbox_no_such_database"
	tg := target{name: "postgres", db: postgresURL(t), table: freshTable(), quote: `"`}
	for name, args := range map[string][]string{
		"no such database": {"relay", "--db", noDB.String(), "--broker", "stdout:"},
		"not migrated":     tg.args("relay", "--broker", "stdout:"),
	} {
		r := run(t, nil, args...)
		if r.code != ExitFailure || strings.Contains(r.stderr, "waiting for it") {
			t.Errorf("%s: exit %d, want 1 at once; stderr:\n%s", name, r.code, r.stderr)
		}
	}
}

// TestUnreachable: what the start-up wait waits for, and what it refuses at once.
func TestUnreachable(t *testing.T) {
	for err, want := range map[error]bool{
		fmt.Errorf("dial: %w", syscall.ECONNREFUSED):                                        true,
		&net.OpError{Op: "dial", Err: &net.DNSError{Err: "no such host", IsNotFound: true}}: true,
		&pgconn.PgError{Code: "57P03", Message: "the database system is starting up"}:       true,
		&pgconn.PgError{Code: "08006"}:                                                      true,
		&pgconn.PgError{Code: "28P01", Message: "password authentication failed"}:           false,
		&pgconn.PgError{Code: "3D000", Message: "database does not exist"}:                  false,
		&pgconn.PgError{Code: "42501", Message: "permission denied"}:                        false,
		fmt.Errorf("the outbox tables do not exist in this database yet"):                   false,
	} {
		if got := unreachable(err); got != want {
			t.Errorf("unreachable(%v) = %v, want %v", err, got, want)
		}
	}
}

package cli

import (
	"strings"
	"testing"
)

func TestWALCommandNeedsPostgres(t *testing.T) {
	r := run(t, nil, "wal", "status", "--db", "sqlite:x.db")
	if r.code != ExitUsage || !strings.Contains(r.stderr, "needs PostgreSQL") {
		t.Errorf("wal status on SQLite: exit %d, %s", r.code, r.stderr)
	}
	r = run(t, nil, "wal", "--db", "postgres://localhost/app")
	if r.code != ExitUsage || !strings.Contains(r.stderr, "status, create-slot, drop-slot") {
		t.Errorf("wal without a subcommand: exit %d, %s", r.code, r.stderr)
	}
}

// The shared test server runs with wal_level = replica: relay --wal must refuse at start, saying what to change.
func TestRelayWALRefusedWithoutLogicalWAL(t *testing.T) {
	db := postgresURL(t)
	if r := run(t, nil, "migrate", "up", "--db", db, "--table", "wal_refused_outbox"); r.code != 0 {
		t.Fatalf("migrate: exit %d, %s", r.code, r.stderr)
	}
	r := run(t, env("POSTBOX_WAL_SECRET", strings.Repeat("s", 32)), "relay", "--db", db, "--table", "wal_refused_outbox", "--broker", "stdout:", "--wal")
	if r.code != ExitFailure || !strings.Contains(r.stderr, "wal_level = logical") {
		t.Errorf("relay --wal: exit %d, %s", r.code, r.stderr)
	}
	r = run(t, nil, "wal", "status", "--db", db, "--table", "wal_refused_outbox")
	if r.code != 0 || !strings.Contains(r.stdout, "slot postbox_wal_refused_outbox: none") {
		t.Errorf("wal status: exit %d, %s %s", r.code, r.stdout, r.stderr)
	}
}

// relay --wal publishes only what the clients signed, so it needs their secret: missing or short, it refuses at
// start, before connecting, and says which setting to fix and how (issue 29, H1).
func TestRelayWALNeedsSecret(t *testing.T) {
	db := postgresURL(t)
	args := []string{"relay", "--db", db, "--table", "wal_secret_outbox", "--broker", "stdout:", "--wal"}
	r := run(t, nil, args...)
	if r.code != ExitUsage || !strings.Contains(r.stderr, "--wal needs --wal-secret (or POSTBOX_WAL_SECRET") || !strings.Contains(r.stderr, "openssl rand -base64 32") {
		t.Errorf("relay --wal without a secret: exit %d, %s; want a usage error naming --wal-secret", r.code, r.stderr)
	}
	r = run(t, env("POSTBOX_WAL_SECRET", "short"), args...)
	if r.code != ExitUsage || !strings.Contains(r.stderr, "POSTBOX_WAL_SECRET is 5 bytes long; use at least 32") || strings.Contains(r.stderr, "short") {
		t.Errorf("relay --wal with a 5-byte secret: exit %d, %s; want a usage error naming POSTBOX_WAL_SECRET, not quoting it", r.code, r.stderr)
	}
}

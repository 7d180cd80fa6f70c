package main

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/postbox-go/postbox/internal/testenv"
)

// TestBinaryThroughPgBouncer drives every database command through PgBouncer in transaction mode with
// --db-pooler transaction, as an operator behind a pooler would: migrate, send, the relay (polling, then
// listening on a direct connection), status, dead letters, cleanup and partitions. Without the flag, the second
// client meets the first one's prepared statement and the error names the fix.
func TestBinaryThroughPgBouncer(t *testing.T) {
	pooled := testenv.ThroughPgBouncer(t, pgURL, "")
	table := freshTable("pooler_outbox")
	env := []string{"POSTBOX_DB=" + pooled, "POSTBOX_DB_POOLER=transaction", "POSTBOX_TABLE=" + table}
	ok := func(args ...string) string {
		t.Helper()
		return mustPostbox(t, env, args...)
	}
	ok("migrate", "up")
	send := func(n int, typ string) {
		t.Helper()
		for i := range n {
			ok("send", "--topic", "orders", "--type", typ, "--key", fmt.Sprint(i), "--data", fmt.Sprintf(`{"n":%d}`, i))
		}
	}
	send(3, "order.created")

	// Polling: behind a transaction pooler without --listen-db, the relay does not LISTEN.
	relay := startRelay(t, env, "--broker", "stdout:", "--poll-interval", "50ms")
	relay.waitFor(t, "3 lines on stdout", func() bool { return strings.Count(relay.stdout.String(), "\n") >= 3 })
	relay.stop(t)
	if log := relay.stderr.String(); !strings.Contains(log, "does not LISTEN") || strings.Contains(log, "stmtcache") {
		t.Errorf("relay log behind a pooler: want the polling notice and no prepared-statement error:\n%s", log)
	}

	// LISTEN on a direct connection: no pooler warning. The registry knows order.created only, so the audit
	// message is parked dead.
	config := filepath.Join(t.TempDir(), "postbox.yaml")
	if err := os.WriteFile(config, []byte("events:\n  - {type: order.created, topic: orders}\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	relay = startRelay(t, env, "--broker", "stdout:", "--listen-db", pgURL, "--config", config)
	ok("send", "--topic", "audit", "--type", "audit.logged", "--data", "{}")
	send(2, "order.created")
	relay.waitFor(t, "2 lines on stdout", func() bool { return strings.Count(relay.stdout.String(), "\n") >= 2 })
	var st struct{ Pending, Dead int }
	relay.waitFor(t, "1 dead message", func() bool {
		return json.Unmarshal([]byte(ok("status", "--json")), &st) == nil && st.Dead == 1
	})
	relay.stop(t)
	if log := relay.stderr.String(); strings.Contains(log, "looks like a connection pooler") {
		t.Errorf("relay listening on a direct connection warned of a pooler:\n%s", log)
	}

	if list := ok("dead", "list"); !strings.Contains(list, "audit.logged") {
		t.Fatalf("dead list:\n%s", list)
	}
	if got := ok("dead", "retry", "--topic", "audit"); !strings.Contains(got, "retried 1") {
		t.Fatalf("dead retry: %s", got)
	}
	if err := json.Unmarshal([]byte(ok("status", "--json")), &st); err != nil || st.Pending != 1 || st.Dead != 0 {
		t.Fatalf("status after retry: %+v %v", st, err)
	}
	ok("cleanup", "--once", "--dead-retention", "1h", "--inbox-retention", "1h")

	ptable := freshTable("pooler_parts")
	penv := []string{"POSTBOX_DB=" + pooled, "POSTBOX_DB_POOLER=transaction", "POSTBOX_TABLE=" + ptable,
		"POSTBOX_INBOX_TABLE=" + ptable + "_inbox"}
	mustPostbox(t, penv, "migrate", "up", "--partitioned")
	if got := mustPostbox(t, penv, "partitions", "--once", "--json"); !strings.Contains(got, `"created"`) {
		t.Fatalf("partitions --once --json: %s", got)
	}

	// A relay that LISTENs through the pooler is warned.
	relay = startRelay(t, []string{"POSTBOX_DB=" + pooled, "POSTBOX_TABLE=" + table}, "--broker", "stdout:")
	relay.waitFor(t, "the pooler warning", func() bool {
		return strings.Contains(relay.stderr.String(), "looks like a connection pooler")
	})
	// The warning comes while the relay starts; stopping it then would cut its start-up checks short.
	relay.waitFor(t, "relay started", func() bool { return strings.Contains(relay.stderr.String(), "relay started") })
	relay.stop(t)

	// Without --db-pooler, pgx's statement cache meets another client's statement: the error names the fix.
	plain := []string{"POSTBOX_DB=" + pooled, "POSTBOX_TABLE=" + table}
	var failure string
	for range 4 {
		if code, _, errOut := postbox(t, plain, "send", "--topic", "orders", "--type", "order.created", "--data", "{}"); code != 0 {
			failure = errOut
			break
		}
	}
	if !strings.Contains(failure, "default_query_exec_mode=exec") || !strings.Contains(failure, "--db-pooler transaction") {
		t.Fatalf("send through PgBouncer without --db-pooler: want a prepared-statement error naming the fix, got %q", failure)
	}
}

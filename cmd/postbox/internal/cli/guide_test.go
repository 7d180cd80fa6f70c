package cli

import (
	"bufio"
	"encoding/json"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// TestCommandsNeedMigratedTables checks that every command working on the tables, the relay included, exits 1
// on a database never migrated with the migrate command to run, instead of a raw SQL error or a relay logging
// the same error for ever.
func TestCommandsNeedMigratedTables(t *testing.T) {
	for _, tg := range []target{sqliteTarget(t), {name: "postgres", db: postgresURL(t), table: freshTable()},
		{name: "mysql", db: mysqlURL(t), table: freshTable()}} {
		t.Run(tg.name, func(t *testing.T) {
			hint := "run `postbox migrate up --db " + shellQuote(tg.db) + " --table " + tg.table + " --inbox-table " + tg.table + "_inbox`"
			for _, args := range [][]string{
				{"relay", "--broker", "stdout:"},
				{"status"},
				{"send", "-t", "orders", "--type", "order.created", "--data", "{}"},
				{"dead", "list"},
				{"cleanup", "--once"},
			} {
				r := run(t, nil, tg.args(args...)...)
				if r.code != ExitFailure || !strings.Contains(r.stderr, "tables do not exist") || !strings.Contains(r.stderr, hint) {
					t.Errorf("postbox %s on an unmigrated database: exit %d, want 1 with %q; stderr:\n%s", args[0], r.code, hint, r.stderr)
				}
			}
			if r := run(t, nil, tg.args("migrate", "up")...); r.code != 0 {
				t.Fatalf("migrate up: %s", r.stderr)
			}
			// An ordered relay needs the ordered index as well, and says so.
			r := run(t, nil, tg.args("relay", "--broker", "stdout:", "--ordered")...)
			if r.code != ExitFailure || !strings.Contains(r.stderr, "lack migration(s) 0003") || !strings.Contains(r.stderr, " --ordered`") {
				t.Errorf("relay --ordered without the ordered index: exit %d; stderr:\n%s", r.code, r.stderr)
			}
		})
	}
}

// TestRelayNamesUnreachableNATS checks that a relay whose NATS server does not answer exits 1 at start, naming
// the broker and the reason, instead of starting and failing every publish.
func TestRelayNamesUnreachableNATS(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close() // nothing listens there now
	tg := sqliteTarget(t)
	if r := run(t, nil, tg.args("migrate", "up")...); r.code != 0 {
		t.Fatalf("migrate up: %s", r.stderr)
	}
	r := run(t, nil, tg.args("relay", "--broker", "stdout:", "--route", "orders.*=nats://"+addr, "--start-timeout", "4s")...)
	if r.code != ExitFailure || !strings.Contains(r.stderr, "broker nats://"+addr+" is unreachable") ||
		!strings.Contains(r.stderr, "connection refused") || strings.Contains(r.stderr, "relay started") {
		t.Fatalf("relay with NATS down: exit %d, want 1 naming nats://%s and the refused connection; stderr:\n%s", r.code, addr, r.stderr)
	}
}

// TestStatusScheduledIsNotLag checks that a message sent for later counts as scheduled, not ready, and does not
// age the oldest-pending figure that alerts on a relay falling behind.
func TestStatusScheduledIsNotLag(t *testing.T) {
	tg := sqliteTarget(t)
	if r := run(t, nil, tg.args("migrate", "up")...); r.code != 0 {
		t.Fatalf("migrate up: %s", r.stderr)
	}
	if r := run(t, nil, tg.args("send", "-t", "reminders", "--type", "reminder.due", "--delay", "1h", "--data", "{}")...); r.code != 0 {
		t.Fatalf("send --delay: %s", r.stderr)
	}
	var st status
	r := run(t, nil, tg.args("status", "--json")...)
	if err := json.Unmarshal([]byte(r.stdout), &st); err != nil {
		t.Fatalf("status --json: %v\n%s", err, r.stderr)
	}
	if st.Pending != 1 || st.Ready != 0 || st.Scheduled != 1 || st.OldestPending != nil || st.OldestPendingAgeSeconds != 0 ||
		len(st.Topics) != 1 || st.Topics[0].Scheduled != 1 || st.Topics[0].OldestPendingAgeSeconds != 0 {
		t.Fatalf("status --json = %+v; want one scheduled message and no oldest pending", st)
	}
	mustContain(t, "status", run(t, nil, tg.args("status")...).stdout, "pending: 1 (ready 0, scheduled 1)", "oldest pending: -", "SCHEDULED")
}

// TestRelayOrderedPublishesInKeyOrder checks that relay --ordered publishes each key's messages in the order
// they were sent, with several workers claiming small batches.
func TestRelayOrderedPublishesInKeyOrder(t *testing.T) {
	tg := sqliteTarget(t)
	if r := run(t, nil, tg.args("migrate", "up", "--ordered")...); r.code != 0 {
		t.Fatalf("migrate up --ordered: %s", r.stderr)
	}
	const keys, perKey = 3, 8
	for i := range perKey {
		for k := range keys {
			data := fmt.Sprintf(`{"seq":%d}`, i)
			if r := run(t, nil, tg.args("send", "-t", "orders", "--type", "order.step", "-k", "k"+strconv.Itoa(k), "--data", data)...); r.code != 0 {
				t.Fatalf("send: %s", r.stderr)
			}
		}
	}
	stdout, _, stop := background(t, nil, tg.args("relay", "--broker", "stdout:", "--ordered", "--workers", "4", "--batch-size", "2",
		"--poll-interval", "20ms")...)
	eventually(t, "every message published", func() bool { return strings.Count(stdout.String(), "\n") == keys*perKey })
	if r := stop(); r.code != 0 {
		t.Fatalf("relay exit %d; stderr:\n%s", r.code, r.stderr)
	}
	next := map[string]int{}
	sc := bufio.NewScanner(strings.NewReader(stdout.String()))
	for sc.Scan() {
		var e event
		var p struct{ Seq int }
		if err := json.Unmarshal(sc.Bytes(), &e); err != nil || json.Unmarshal(e.Data, &p) != nil {
			t.Fatalf("relay stdout line %q: %v", sc.Text(), err)
		}
		if p.Seq != next[e.Subject] {
			t.Fatalf("key %s: published seq %d when %d was next; ordered relays publish each key in send order:\n%s",
				e.Subject, p.Seq, next[e.Subject], stdout.String())
		}
		next[e.Subject]++
	}
}

// TestRelayLogsProgress checks that a relay moving messages says so: a progress line with the counts, and at
// debug level one line per batch.
func TestRelayLogsProgress(t *testing.T) {
	tg := sqliteTarget(t)
	if r := run(t, nil, tg.args("migrate", "up")...); r.code != 0 {
		t.Fatalf("migrate up: %s", r.stderr)
	}
	for range 3 {
		if r := run(t, nil, tg.args("send", "-t", "orders", "--type", "order.created", "--data", "{}")...); r.code != 0 {
			t.Fatalf("send: %s", r.stderr)
		}
	}
	if r := run(t, nil, tg.args("send", "-t", "orders", "--type", "order.remind", "--data", "{}", "--delay", "1h")...); r.code != 0 {
		t.Fatalf("send: %s", r.stderr)
	}
	_, stderr, stop := background(t, nil, tg.args("relay", "--broker", "stdout:", "--log-level", "debug", "--progress-interval", "50ms",
		"--poll-interval", "20ms")...)
	eventually(t, "a progress line", func() bool { return strings.Contains(stderr.String(), "msg=\"relay progress\"") })
	if r := stop(); r.code != 0 {
		t.Fatalf("relay exit %d; stderr:\n%s", r.code, r.stderr)
	}
	mustContain(t, "relay log", stderr.String(), "msg=batch claimed=3 published=3 failed=0 dead=0",
		"msg=\"relay progress\" published=3 failed=0 dead=0 batches=1 pending=0 scheduled=1 lag=0s")
}

// TestSendChecksJSON checks that send refuses a payload that is not JSON, naming the flag and the way out.
func TestSendChecksJSON(t *testing.T) {
	tg := sqliteTarget(t)
	if r := run(t, nil, tg.args("migrate", "up")...); r.code != 0 {
		t.Fatalf("migrate up: %s", r.stderr)
	}
	r := run(t, nil, tg.args("send", "-t", "orders", "--type", "order.created", "--data", "{bad json")...)
	if r.code != ExitUsage || !strings.Contains(r.stderr, `--data "{bad json" is not valid JSON`) || !strings.Contains(r.stderr, "--raw") {
		t.Fatalf("send with bad JSON: exit %d; stderr:\n%s", r.code, r.stderr)
	}
	if r := run(t, nil, tg.args("send", "-t", "orders", "--type", "order.created", "--data", "{bad json", "--raw")...); r.code != 0 {
		t.Fatalf("send --raw: exit %d; stderr:\n%s", r.code, r.stderr)
	}
}

// TestMigrateSQLOffline checks that migrate sql prints the SQL of a dialect with no database at all.
func TestMigrateSQLOffline(t *testing.T) {
	dir := t.TempDir()
	t.Chdir(dir)
	for dialect, want := range map[string]string{"postgres": "postbox_outbox", "mysql": "`postbox_outbox`", "sqlite": "postbox_outbox"} {
		r := run(t, nil, "migrate", "sql", "--dialect", dialect, "--ordered")
		if r.code != 0 || !strings.Contains(r.stdout, "-- postbox migration 0003") || !strings.Contains(r.stdout, "("+dialect+")") ||
			!strings.Contains(r.stdout, want) {
			t.Errorf("migrate sql --dialect %s: exit %d\n%s%s", dialect, r.code, r.stdout, r.stderr)
		}
	}
	if entries, _ := os.ReadDir(dir); len(entries) != 0 {
		t.Errorf("migrate sql --dialect sqlite left %v behind", entries)
	}
	if r := run(t, nil, "migrate", "sql"); r.code != ExitUsage || !strings.Contains(r.stderr, "--dialect postgres, mysql or sqlite") {
		t.Errorf("migrate sql with neither --db nor --dialect: exit %d %s", r.code, r.stderr)
	}
}

// TestMigrateSQLAPI: --sql-api adds migration 0006 with the enqueue routines named after the outbox table, and
// only when asked; SQLite, which has no routines, is refused with where to read instead.
func TestMigrateSQLAPI(t *testing.T) {
	for dialect, want := range map[string]string{"postgres": `FUNCTION "orders_outbox_enqueue"`, "mysql": "PROCEDURE `orders_outbox_enqueue`"} {
		r := run(t, nil, "migrate", "sql", "--dialect", dialect, "--table", "orders_outbox", "--sql-api")
		if r.code != 0 || !strings.Contains(r.stdout, "-- postbox migration 0006: sql_api") || !strings.Contains(r.stdout, want) {
			t.Errorf("migrate sql --dialect %s --sql-api: exit %d, want migration 0006 with %s\n%s%s", dialect, r.code, want, r.stdout, r.stderr)
		}
		if r := run(t, nil, "migrate", "sql", "--dialect", dialect); strings.Contains(r.stdout, "migration 0006") {
			t.Errorf("migrate sql --dialect %s without --sql-api lists the SQL API", dialect)
		}
	}
	if r := run(t, nil, "migrate", "sql", "--dialect", "sqlite", "--sql-api"); r.code != ExitUsage || !strings.Contains(r.stderr, "docs/SCHEMA.md") {
		t.Errorf("migrate sql --dialect sqlite --sql-api: exit %d %s; want a usage error pointing at docs/SCHEMA.md", r.code, r.stderr)
	}
}

// TestConfigHintsAtQuoting checks that a YAML value that needs quotes gets a hint saying so.
func TestConfigHintsAtQuoting(t *testing.T) {
	for _, content := range []string{"broker: stdout:\n", "route:\n  - audit.*=stdout:\n"} {
		path := filepath.Join(t.TempDir(), "postbox.yaml")
		if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
		r := run(t, nil, "relay", "--config", path, "--db", "sqlite:x.db")
		if r.code != ExitUsage || !strings.Contains(r.stderr, `must be quoted, such as broker: "stdout:"`) {
			t.Errorf("config %q: exit %d; stderr:\n%s", content, r.code, r.stderr)
		}
	}
}

package cli

import (
	"bufio"
	"encoding/json"
	"math"
	"net/url"
	"strings"
	"testing"

	"github.com/postbox-go/postbox/bench"
)

// TestBench runs a tiny workload of three scenarios against PostgreSQL and checks the figures --json reports.
func TestBench(t *testing.T) {
	u, err := url.Parse(postgresURL(t))
	if err != nil {
		t.Fatal(err)
	}
	u.User = url.UserPassword(u.User.Username(), "bench-secret") // trust authentication ignores it
	// --db from the environment, as any flag can be.
	r := run(t, env("POSTBOX_DB", u.String(), "POSTBOX_BACKLOG", "2000"), "bench", "--json", "--duration", "300ms",
		"--idle-window", "500ms", "--rate", "200", "--keys", "20", "--batch-size", "100", "--topic", "bench-cli.orders",
		"relay", "inbox", "latency")
	if r.code != ExitOK {
		t.Fatalf("bench: exit %d\nstdout: %s\nstderr: %s", r.code, r.stdout, r.stderr)
	}
	if strings.Contains(r.stdout+r.stderr, "bench-secret") {
		t.Errorf("bench printed the database password:\n%s\n%s", r.stdout, r.stderr)
	}
	got := map[string]map[string]any{}
	sc := bufio.NewScanner(strings.NewReader(r.stdout))
	for sc.Scan() {
		var m map[string]any
		if err := json.Unmarshal(sc.Bytes(), &m); err != nil {
			t.Fatalf("bench --json line %q: %v", sc.Text(), err)
		}
		got[m["scenario"].(string)] = m
	}
	for _, s := range []string{"relay", "inbox", "latency"} {
		res := got[s]
		if res == nil {
			t.Fatalf("no result for %s in:\n%s", s, r.stdout)
		}
		events, _ := res["events_per_s"].(float64)
		baseline, _ := res["baseline_per_s"].(float64)
		ratio, _ := res["ratio"].(float64)
		if events <= 0 || baseline <= 0 || ratio <= 0 || res["db"] != bench.DBPgxV5 {
			t.Errorf("%s: %v, want positive events_per_s, baseline_per_s and ratio on %s", s, res, bench.DBPgxV5)
			continue
		}
		if want := events / baseline; math.Abs(ratio-want) > 0.001+want*0.001 {
			t.Errorf("%s: ratio %v, want events_per_s / baseline_per_s = %v", s, ratio, want)
		}
	}
	lat := got["latency"]
	p50, _ := lat["p50_ms"].(float64)
	p99, _ := lat["p99_ms"].(float64)
	idle, ok := lat["idle_queries_per_s"].(float64)
	if p50 <= 0 || p99 < p50 || !ok || idle < 0 || idle > 50 {
		t.Errorf("latency: p50_ms %v, p99_ms %v, idle_queries_per_s %v; want 0 < p50 <= p99 and an idle relay sending a few statements a second",
			lat["p50_ms"], lat["p99_ms"], lat["idle_queries_per_s"])
	}
}

// TestBenchInterrupted: cancelling the run (SIGINT) stops the scenario under way, cleans up and exits 1.
func TestBenchInterrupted(t *testing.T) {
	_, stderr, stop := background(t, nil, "bench", "--db", postgresURL(t), "--backlog", "100000", "--batch-size", "100", "relay")
	eventually(t, "the backlog loading", func() bool { return strings.Contains(stderr.String(), "loading backlog") })
	r := stop()
	if r.code != ExitFailure || !strings.Contains(r.stderr, "interrupted during relay") {
		t.Fatalf("bench cancelled: exit %d, want %d saying it was interrupted; stderr:\n%s", r.code, ExitFailure, r.stderr)
	}
}

func TestBenchUsage(t *testing.T) {
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"relay", "nope"}, `unknown scenario "nope"; choose from enqueue, notify, relay, relay-nats, latency, ordered, inbox, or all`},
		{[]string{"--db", "mysql://root@127.0.0.1:3306/test"}, "the bench measures PostgreSQL"},
		{[]string{"--driver", "jdbc"}, `--driver "jdbc": use pgxv5 or databasesql`},
		{[]string{"--db", "sqlite:bench.db", "--driver", "pgxv5"}, "SQLite is measured through databasesql only"},
		{[]string{"--db", "sqlite:bench.db?_pragma=foreign_keys(1)"}, "give only the file, sqlite:bench.db"},
		{[]string{"--broker", "kafka://u:kafka-secret@127.0.0.1:9092"}, "the bench publishes to NATS only"},
		{[]string{"--backlog", "-1"}, `--backlog "-1" is negative`},
		{[]string{"--idle-window", "-1s"}, `--idle-window "-1s" is negative`},
		{[]string{"--payload-bytes", "8"}, "--payload-bytes is 8; use at least 32"},
	} {
		// The database is unreachable: a usage error must come before any connection.
		args := append([]string{"bench", "--db", "postgres://u:pg-secret@127.0.0.1:1/none"}, c.args...)
		r := run(t, nil, args...)
		if r.code != ExitUsage || !strings.Contains(r.stderr, c.want) || r.stdout != "" {
			t.Errorf("postbox %v: exit %d, stderr %q; want exit %d saying %q", args, r.code, r.stderr, ExitUsage, c.want)
		}
		if strings.Contains(r.stderr, "secret") {
			t.Errorf("postbox %v printed a password: %s", args, r.stderr)
		}
	}

	r := run(t, nil, "bench", "--db", "postgres://u:pg-secret@127.0.0.1:1/none", "relay")
	if r.code != ExitFailure || !strings.Contains(r.stderr, "PostgreSQL is not reachable at postgres://u:xxxxx@127.0.0.1:1/none") {
		t.Errorf("bench on an unreachable database: exit %d, stderr %q", r.code, r.stderr)
	}

	r = run(t, nil, "bench", "--help")
	if r.code != ExitOK {
		t.Fatalf("bench --help: exit %d", r.code)
	}
	for _, s := range append(bench.Scenarios(), "all") {
		mustContain(t, "bench --help", r.stdout, "\n  "+s+" ")
	}
	mustContain(t, "bench --help", r.stdout, bench.Describe("relay-nats"), "--backlog N", "POSTBOX_BROKER", "postbox bench --json relay latency")
	mustContain(t, "postbox --help", run(t, nil, "--help").stdout, "bench ")
}

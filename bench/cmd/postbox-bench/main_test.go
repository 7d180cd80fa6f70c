package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"math"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/postbox-go/postbox/bench"
	"github.com/postbox-go/postbox/internal/testenv"
)

var (
	pgOnce sync.Once
	pgURL  string
	pgErr  error
)

func postgresURL(t *testing.T) string {
	t.Helper()
	pgOnce.Do(func() { pgURL, pgErr = testenv.FreshPostgres("postbox_test_bench_cmd") })
	if pgErr != nil {
		t.Fatal(pgErr)
	}
	return pgURL
}

type result struct {
	code           int
	stdout, stderr string
}

// syncBuffer is a bytes.Buffer safe to read while the command writes to it.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.String()
}

func runCmd(ctx context.Context, args ...string) result {
	var out, errOut syncBuffer
	code := run(ctx, args, &out, &errOut)
	return result{code, out.String(), errOut.String()}
}

func mustContain(t *testing.T, what, got string, wants ...string) {
	t.Helper()
	for _, w := range wants {
		if !strings.Contains(got, w) {
			t.Errorf("%s does not contain %q:\n%s", what, w, got)
		}
	}
}

// TestBench runs a tiny workload of three scenarios against PostgreSQL and checks the figures --json reports.
func TestBench(t *testing.T) {
	u, err := url.Parse(postgresURL(t))
	if err != nil {
		t.Fatal(err)
	}
	u.User = url.UserPassword(u.User.Username(), "bench-secret") // trust authentication ignores it
	// --db from the environment, as any flag can be.
	r := runCmd(context.Background(), "--db", u.String(), "--backlog", "2000", "--json", "--duration", "300ms",
		"--idle-window", "500ms", "--rate", "200", "--keys", "20", "--batch-size", "100", "--topic", "bench-cli.orders",
		"relay", "inbox", "latency")
	if r.code != exitOK {
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
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var stdout, stderr syncBuffer
	done := make(chan int, 1)
	go func() {
		done <- run(ctx, []string{"--db", postgresURL(t), "--backlog", "100000", "--batch-size", "100", "relay"}, &stdout, &stderr)
	}()
	for !strings.Contains(stderr.String(), "loading backlog") {
		select {
		case code := <-done:
			t.Fatalf("bench exited %d before loading its backlog: %s", code, stderr.String())
		case <-time.After(20 * time.Millisecond):
		}
	}
	cancel()
	r := result{<-done, stdout.String(), stderr.String()}
	if r.code != exitFailure || !strings.Contains(r.stderr, "interrupted during relay") {
		t.Fatalf("bench cancelled: exit %d, want %d saying it was interrupted; stderr:\n%s", r.code, exitFailure, r.stderr)
	}
}

func TestBenchUsage(t *testing.T) {
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"relay", "nope"}, `unknown scenario "nope"; choose from enqueue, notify, sql-api, relay, relay-nats, latency, ordered, ordered-stats, inbox, latency-load, xmin, xmin-wal, wal, or all`},
		{[]string{"--db", "oracle://scott@127.0.0.1:1521/orcl"}, "the bench measures PostgreSQL (postgres://user:pass@host:5432/db), MySQL"},
		{[]string{"--db", "mysql://root@127.0.0.1:3306/test", "--driver", "pgxv5"}, "MySQL is measured through databasesql only"},
		{[]string{"--driver", "jdbc"}, `--driver "jdbc": use pgxv5 or databasesql`},
		{[]string{"--db", "sqlite:bench.db", "--driver", "pgxv5"}, "SQLite is measured through databasesql only"},
		{[]string{"--db", "sqlite:bench.db?_pragma=foreign_keys(1)"}, "give only the file, sqlite:bench.db"},
		{[]string{"--broker", "kafka://u:kafka-secret@127.0.0.1:9092"}, "the bench publishes to NATS only"},
		{[]string{"--backlog", "-1"}, "--backlog is -1; use a positive number"},
		{[]string{"--idle-window", "-1s"}, "--duration, --idle-window, --recheck-delay and --xmin-hold must not be negative"},
		{[]string{"--payload-bytes", "8"}, "--payload-bytes is 8; use at least 32"},
	} {
		// The database is unreachable: a usage error must come before any connection.
		args := append([]string{"--db", "postgres://u:pg-secret@127.0.0.1:1/none"}, c.args...)
		r := runCmd(context.Background(), args...)
		if r.code != exitUsage || !strings.Contains(r.stderr, c.want) || r.stdout != "" {
			t.Errorf("postbox-bench %v: exit %d, stderr %q; want exit %d saying %q", args, r.code, r.stderr, exitUsage, c.want)
		}
		if strings.Contains(r.stderr, "secret") {
			t.Errorf("postbox-bench %v printed a password: %s", args, r.stderr)
		}
	}

	r := runCmd(context.Background(), "--db", "postgres://u:pg-secret@127.0.0.1:1/none", "relay")
	if r.code != exitFailure || !strings.Contains(r.stderr, "PostgreSQL is not reachable at postgres://u:xxxxx@127.0.0.1:1/none") {
		t.Errorf("bench on an unreachable database: exit %d, stderr %q", r.code, r.stderr)
	}

	r = runCmd(context.Background(), "--db", "mysql://u:my-secret@127.0.0.1:1/none", "relay")
	if r.code != exitFailure || !strings.Contains(r.stderr, "MySQL is not reachable at mysql://u:xxxxx@127.0.0.1:1/none") {
		t.Errorf("bench on an unreachable MySQL: exit %d, stderr %q", r.code, r.stderr)
	}

	r = runCmd(context.Background(), "--help")
	if r.code != exitOK {
		t.Fatalf("bench --help: exit %d", r.code)
	}
	for _, s := range append(bench.Scenarios(), "all") {
		mustContain(t, "bench --help", r.stdout, "\n  "+s+" ")
	}
	mustContain(t, "bench --help", r.stdout, bench.Describe("relay-nats"), "-backlog int", "postbox-bench --json relay latency")
}

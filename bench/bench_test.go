package bench

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/go-sql-driver/mysql"
	"go.uber.org/goleak"

	"github.com/postbox-go/postbox/internal/testenv"
)

var pgURL string

func TestMain(m *testing.M) {
	var err error
	if pgURL, err = testenv.FreshPostgres("postbox_test_bench"); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	goleak.VerifyTestMain(m)
}

// small runs every scenario in a few seconds: the figures mean nothing, the test checks that each is reported.
func small(db, url string) Options {
	return Options{DB: db, URL: url, Events: 3000, Duration: 600 * time.Millisecond, IdleWindow: 300 * time.Millisecond,
		Rate: 300, Clients: 4, NotifyClients: 8, Keys: 50, BatchSize: 100, JSON: true,
		Topic: testenv.Unique("postbox-bench-test") + ".orders"}
}

// run runs scenarios and returns the JSON object each printed, by scenario.
func run(t *testing.T, o Options, scenarios ...string) map[string]map[string]any {
	t.Helper()
	var out bytes.Buffer
	for _, s := range scenarios {
		if err := Run(context.Background(), s, o, &out); err != nil {
			t.Fatalf("%s: %v", s, err)
		}
	}
	got := map[string]map[string]any{}
	sc := bufio.NewScanner(&out)
	for sc.Scan() {
		var m map[string]any
		if err := json.Unmarshal(sc.Bytes(), &m); err != nil {
			t.Fatalf("output line %q is not JSON: %v", sc.Text(), err)
		}
		got[m["scenario"].(string)] = m
	}
	return got
}

func positive(t *testing.T, res map[string]any, fields ...string) {
	t.Helper()
	for _, f := range fields {
		if v, ok := res[f].(float64); !ok || v <= 0 {
			t.Errorf("%s: %s = %v, want a positive figure", res["scenario"], f, res[f])
		}
	}
}

func TestEveryScenarioOnPostgres(t *testing.T) {
	scenarios := []string{"enqueue", "notify", "relay", "relay-nats", "latency", "ordered", "inbox"}
	got := run(t, small(DBPgxV5, pgURL), scenarios...)
	for _, s := range scenarios {
		res, ok := got[s]
		if !ok {
			t.Fatalf("no result for %s", s)
		}
		positive(t, res, "events_per_s", "baseline_per_s", "ratio")
	}
	positive(t, got["enqueue"], "batch_events_per_s", "batch_baseline_per_s", "batch_ratio", "ordered_index_ratio",
		"insert_baseline_per_s", "insert_ratio")
	positive(t, got["notify"], "notify_each_tx_per_s", "relay_wakeups")
	positive(t, got["relay"], "rss_mib", "protocol_per_s", "protocol_ratio", "protocol_baseline_ratio")
	positive(t, got["latency"], "p50_ms", "p99_ms", "max_ms")
	// The idle query rate is a figure to read, not to judge here: a window this short may hold no poll at all, and a
	// wall-clock rate on a shared machine is no test. Check only that it is reported.
	if v, ok := got["latency"]["idle_queries_per_s"].(float64); !ok || v < 0 {
		t.Errorf("latency: idle_queries_per_s = %v, want a reported figure", got["latency"]["idle_queries_per_s"])
	}
	if v := got["ordered"]["order_violations"]; v != float64(0) {
		t.Errorf("ordered: %v messages published before an earlier one of their key", v)
	}
	if v := got["relay-nats"]["stream_msgs"]; v != float64(2*3000) {
		t.Errorf("relay-nats: the stream holds %v messages, want the relay's 3000 and the direct publisher's 3000", v)
	}
}

func TestSQLite(t *testing.T) {
	o := small(DBSQLite, filepath.Join(t.TempDir(), "bench.db"))
	got := run(t, o, "relay", "ordered", "notify")
	positive(t, got["relay"], "events_per_s", "baseline_per_s", "ratio")
	positive(t, got["ordered"], "events_per_s", "baseline_per_s", "ratio")
	if !strings.Contains(fmt.Sprint(got["notify"]["skipped"]), "PostgreSQL") {
		t.Errorf("notify on SQLite: %v, want it skipped with the reason", got["notify"])
	}
}

// TestMySQL runs every scenario that has a meaning on MySQL against MariaDB, each against its SQL-only baseline,
// with the relay in another client and then in the producers' own.
func TestMySQL(t *testing.T) {
	dsn, err := testenv.FreshMySQL("postbox_test_bench")
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := mysql.ParseDSN(dsn)
	if err != nil {
		t.Fatal(err)
	}
	u := url.URL{Scheme: "mysql", User: url.UserPassword(cfg.User, cfg.Passwd), Host: cfg.Addr, Path: "/" + cfg.DBName}
	if cfg.Passwd == "" {
		u.User = url.User(cfg.User)
	}
	o := small(DBMySQL, u.String())
	scenarios := []string{"enqueue", "relay", "latency", "ordered", "inbox"}
	got := run(t, o, append(scenarios, "notify")...)
	for _, s := range scenarios {
		positive(t, got[s], "events_per_s", "baseline_per_s", "ratio")
	}
	positive(t, got["enqueue"], "batch_events_per_s", "batch_baseline_per_s", "batch_ratio", "insert_ratio")
	positive(t, got["latency"], "p50_ms", "p99_ms", "max_ms")
	// Statements are counted on MySQL: the figure is reported, never -1.
	if v, ok := got["latency"]["idle_queries_per_s"].(float64); !ok || v < 0 {
		t.Errorf("latency: idle_queries_per_s = %v, want a counted figure", got["latency"]["idle_queries_per_s"])
	}
	if v := got["ordered"]["order_violations"]; v != float64(0) {
		t.Errorf("ordered: %v messages published before an earlier one of their key", v)
	}
	if !strings.Contains(fmt.Sprint(got["notify"]["skipped"]), "PostgreSQL") {
		t.Errorf("notify on MySQL: %v, want it skipped with the reason", got["notify"])
	}
	o.LocalRelay = true
	local := run(t, o, "latency")["latency"]
	positive(t, local, "events_per_s", "p50_ms", "p99_ms", "local_relay")
}

func TestRunsReportMedians(t *testing.T) {
	o := small(DBPgxV5, pgURL)
	o.Runs = 3
	res := run(t, o, "inbox")["inbox"]
	if res["runs"] != float64(3) {
		t.Fatalf("runs = %v, want 3", res["runs"])
	}
	positive(t, res, "events_per_s", "baseline_per_s", "ratio")
	m := median([]Result{{EventsPerS: 3, Ratio: 0.9}, {EventsPerS: 1, Ratio: 0.5}, {EventsPerS: 2, Ratio: 0.7}})
	if m.EventsPerS != 2 || m.Ratio != 0.7 {
		t.Fatalf("median = %+v, want the middle of each figure", m)
	}
}

func TestBadOptions(t *testing.T) {
	for _, c := range []struct {
		scenario string
		o        Options
		want     string
	}{
		{"nope", Options{}, "unknown scenario"},
		{"relay", Options{DB: "oracle"}, "unknown database"},
		{"relay", Options{Events: -1}, "Events is -1"},
		{"relay", Options{Turns: -1}, "Turns is -1"},
		{"relay", Options{PayloadBytes: 8}, "at least 32"},
	} {
		err := Run(context.Background(), c.scenario, c.o, &bytes.Buffer{})
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("Run(%s, %+v) = %v, want an error saying %q", c.scenario, c.o, err, c.want)
		}
	}
}

func TestLatencyLoadAndXmin(t *testing.T) {
	o := small(DBPgxV5, pgURL)
	o.XminHold = time.Second
	got := run(t, o, "latency-load", "xmin")
	ll := got["latency-load"]
	positive(t, ll, "events_per_s", "baseline_per_s", "ratio", "p50_ms", "p99_ms", "p999_ms", "max_ms", "measured",
		"batch_events_per_s", "batch_ratio", "batch_p99_ms", "batch_p999_ms", "batch_measured", "load_avg",
		"insert_events_per_s", "insert_commit_p99_ms", "batch_insert_events_per_s", "batch_insert_commit_p99_ms")
	if ll["baseline_per_s"] != float64(loadSingleRate) || ll["batch_baseline_per_s"] != float64(loadBatchRate) {
		t.Errorf("latency-load offered %v and %v events/s, want %d and %d", ll["baseline_per_s"], ll["batch_baseline_per_s"],
			loadSingleRate, loadBatchRate)
	}
	x := got["xmin"]
	positive(t, x, "events_per_s", "baseline_per_s", "ratio", "free_p99_ms", "held_p99_ms", "p99_ratio",
		"held_index_mib_after", "xmin_hold_s")
	// The held snapshot keeps every row the relay deleted in the hold: vacuum cannot remove them, so the table's
	// index still has an entry for each. Entries are counted with pgstattuple (-1 where it cannot be installed).
	if e, n := x["held_index_entries_after"].(float64), o.XminHold.Seconds()*float64(o.Rate); e != -1 && e < n/2 {
		t.Errorf("xmin: %v index entries after the hold, want at least %v of the %v events it deleted kept", e, n/2, n)
	}
}

func TestScheduleIsOpenLoop(t *testing.T) {
	s := newSchedule(1000, 10, time.Second)
	s.start = time.Unix(100, 0)
	for seq, want := range map[int]time.Duration{0: 0, 9: 0, 10: 10 * time.Millisecond, 25: 20 * time.Millisecond} {
		if got := s.due(seq).Sub(s.start); got != want {
			t.Errorf("due(%d) = start+%v, want start+%v: a transaction's events are due together, at first/rate", seq, got, want)
		}
	}
	if seq, ok := payloadSeq(small(DBPgxV5, "").message(1234).Payload); !ok || seq != 1234 {
		t.Errorf("payloadSeq = %d, %v; want 1234 read back from the payload", seq, ok)
	}
}

// TestSQLAPIScenario runs the SQL API's scenario small on PostgreSQL: every figure it reports is there, and the
// producers' calls reached the relay as wake-ups.
func TestSQLAPIScenario(t *testing.T) {
	got := run(t, small(DBPgxV5, pgURL), "sql-api")["sql-api"]
	positive(t, got, "events_per_s", "baseline_per_s", "ratio", "batch_events_per_s", "batch_baseline_per_s",
		"batch_ratio", "wake_per_s", "wake_baseline_per_s", "wake_ratio", "notify_each_tx_ratio", "unwoken_per_s",
		"wake_vs_unwoken_ratio", "relay_wakeups")
}

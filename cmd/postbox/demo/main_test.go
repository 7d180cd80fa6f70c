package main

import (
	"bytes"
	"context"
	"database/sql"
	"encoding/json"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

type result struct {
	code           int
	stdout, stderr string
}

func runDemoCmd(args ...string) result {
	var out, errOut bytes.Buffer
	code := run(context.Background(), args, &out, &errOut)
	return result{code, out.String(), errOut.String()}
}

// TestDemoJSON: the demo delivers every committed event exactly once, duplicates injected and skipped.
func TestDemoJSON(t *testing.T) {
	r := runDemoCmd("--json", "--orders", "400", "--duplicates", "30")
	if r.code != 0 {
		t.Fatalf("demo exit %d: %s", r.code, r.stderr)
	}
	var s map[string]any
	if err := json.Unmarshal([]byte(r.stdout), &s); err != nil || strings.Count(strings.TrimSpace(r.stdout), "\n") != 0 {
		t.Fatalf("demo --json printed %q, not one JSON object: %v", r.stdout, err)
	}
	for _, k := range []string{"committed", "published", "delivered", "duplicates_skipped", "lost"} {
		if _, ok := s[k]; !ok {
			t.Errorf("demo --json has no %q: %s", k, r.stdout)
		}
	}
	if s["committed"] != 400.0 || s["published"] != s["committed"] || s["delivered"] != s["committed"] || s["lost"] != 0.0 ||
		s["processed_twice"] != 0.0 || s["duplicates_skipped"].(float64) <= 0 ||
		s["deliveries"] != s["delivered"].(float64)+s["duplicates_skipped"].(float64) {
		t.Fatalf("demo summary %s", r.stdout)
	}
}

func TestDemoText(t *testing.T) {
	r := runDemoCmd("--orders", "50")
	if r.code != 0 {
		t.Fatalf("demo exit %d: %s", r.code, r.stderr)
	}
	for _, want := range []string{"orders committed with their event        50", "events lost                               0", "events/s"} {
		if !strings.Contains(r.stdout, want) {
			t.Errorf("demo printed no %q:\n%s", want, r.stdout)
		}
	}
}

// TestDemoUsage: a wrong flag value exits 2 and names the flag.
func TestDemoUsage(t *testing.T) {
	for _, args := range [][]string{{"--duplicates", "200"}, {"--orders", "0"}, {"extra"}, {"--log-level", "loud"}} {
		r := runDemoCmd(args...)
		if r.code != exitUsage || !strings.Contains(r.stderr, strings.TrimPrefix(args[0], "extra")) {
			t.Errorf("demo %q: exit %d, stderr %q; want exit 2 naming %s", args, r.code, r.stderr, args[0])
		}
	}
}

// TestBinaryDemo runs the demo as someone trying Postbox for the first time would: no POSTBOX_* settings and, where
// network namespaces allow it, no network service to reach, since the demo embeds its database and broker.
func TestBinaryDemo(t *testing.T) {
	binary := filepath.Join(t.TempDir(), "demo")
	if out, err := exec.Command("go", "build", "-o", binary, ".").CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	cmd := exec.Command(binary, "--json")
	// The probe brings the loopback up too: the embedded NATS server listens on 127.0.0.1.
	if err := exec.Command("unshare", "-rn", "ip", "link", "set", "lo", "up").Run(); err == nil {
		cmd = exec.Command("unshare", "-rn", "sh", "-c", `ip link set lo up 2>/dev/null; exec "$0" "$@"`, binary, "--json")
	} else {
		t.Logf("no unprivileged network namespace here (unshare -rn: %v): the demo runs with this machine's network", err)
	}
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "POSTBOX_") {
			cmd.Env = append(cmd.Env, kv)
		}
	}
	var out, errOut bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errOut
	err := cmd.Run()
	var sum struct {
		Committed, Published, Lost int64
		ProcessedTwice             int64 `json:"processed_twice"`
	}
	if jerr := json.Unmarshal(out.Bytes(), &sum); jerr != nil || err != nil {
		t.Fatalf("demo --json: %v, %v\n%s%s", err, jerr, out.String(), errOut.String())
	}
	if sum.Lost != 0 || sum.ProcessedTwice != 0 || sum.Committed <= 0 || sum.Published != sum.Committed {
		t.Fatalf("demo: want lost 0, processed twice 0 and committed == published > 0; got %s", out.String())
	}
}

// TestDemoFinalCheckUsesIndex: the summary's lost and processed-twice counts look each order's shipments up by
// order_id; without an index that lookup read every shipment per order (issue 35: --orders 20000 sat silent for
// about 50 s after the pipeline had finished). The query plan must use the index for it.
func TestDemoFinalCheckUsesIndex(t *testing.T) {
	db, err := sql.Open("sqlite", "file:"+filepath.Join(t.TempDir(), "plan.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	for _, ddl := range demoTables {
		if _, err := db.Exec(ddl); err != nil {
			t.Fatal(err)
		}
	}
	rows, err := db.Query("EXPLAIN QUERY PLAN " + finalCheck)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var plan []string
	for rows.Next() {
		var id, parent, unused int
		var detail string
		if err := rows.Scan(&id, &parent, &unused, &detail); err != nil {
			t.Fatal(err)
		}
		plan = append(plan, detail)
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	joined := strings.Join(plan, "\n")
	if !strings.Contains(joined, "USING COVERING INDEX shipments_order_id (order_id=?)") &&
		!strings.Contains(joined, "USING INDEX shipments_order_id (order_id=?)") {
		t.Fatalf("the final check does not look shipments up by index; its plan:\n%s", joined)
	}
}

// TestDemoEndsWhenDrainedNotAtTick: the demo stops, and its elapsed time ends, when the last delivery is settled,
// not at the next redraw of the progress line (issue 35: the elapsed time was rounded up to the 100 ms tick). With
// a tick of an hour the demo must still finish, and report seconds well below it.
func TestDemoEndsWhenDrainedNotAtTick(t *testing.T) {
	var out, errOut bytes.Buffer
	rt := &runtime{stdout: &out, stderr: &errOut, log: slog.New(slog.NewTextHandler(&errOut, nil))}
	o := demoOptions{json: true, orders: 200, producers: 4, duplicates: 10, timeout: 30 * time.Second, progressTick: time.Hour}
	if err := runDemo(context.Background(), rt, o); err != nil {
		t.Fatalf("demo with an hour's progress tick: %v (it waits for the tick to see that it is done)\n%s", err, errOut.String())
	}
	var s demoSummary
	if err := json.Unmarshal(out.Bytes(), &s); err != nil {
		t.Fatalf("demo --json printed %q: %v", out.String(), err)
	}
	if s.Delivered != 200 || s.Seconds <= 0 || s.Seconds >= 30 {
		t.Fatalf("demo summary: %d delivered in %.3fs; want 200 within the run", s.Delivered, s.Seconds)
	}
}

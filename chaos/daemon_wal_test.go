package chaos

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"testing"
	"time"

	"github.com/postbox-go/postbox"
	"github.com/postbox-go/postbox/driver/pgxv5/wal"
)

// TestDaemonWALCounts: `postbox relay --wal` counts what its WAL relay publishes: its progress lines carry the
// WAL relay's messages (wal_published, and the slot's lag in bytes), its stop line their total, and `postbox
// status --json` shows the slot and its lag, as the text form does.
func TestDaemonWALCounts(t *testing.T) {
	bin := buildDaemon(t)
	ctx, cancel := context.WithTimeout(context.Background(), deadline())
	defer cancel()
	cluster := ownCluster(ctx, t, walSettings...)
	w := newWorld(t, "daemonwal", worldOptions{db: cluster.URL("chaos"), wal: true})
	rc := w.relayConfig()
	// The slot first: messages written before it exists are never read.
	slotOf, err := wal.NewRelay(w.pool, w.client, postbox.PublisherFunc(func(context.Context, []postbox.Record) error { return nil }), nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := wal.CreateSlot(ctx, w.pool, slotOf.Slot()); err != nil {
		t.Fatal(err)
	}
	const n = 600
	d := startDaemon(t, bin, w.logs, "relay", "--db", rc.DB, "--table", rc.outbox(), "--inbox-table", rc.inbox(),
		"--broker", w.nats.URL(), "--wal", "--progress-interval", "200ms", "--log-format", "json")
	if err := d.await(ctx, "WAL relay started"); err != nil {
		t.Fatal(err)
	}
	for i := 0; i < n; i += 100 {
		if err := w.commit(ctx, w.events(100, 0, 0, 1)...); err != nil {
			t.Fatal(err)
		}
	}

	// Every message is counted by a progress line within a progress interval of its batch.
	progressed := func() (published, walPublished int64) {
		for _, l := range d.lines("relay progress") {
			published += int64(number(l["published"]))
			walPublished += int64(number(l["wal_published"]))
		}
		return published, walPublished
	}
	for {
		if p, wp := progressed(); p >= n && wp >= n {
			break
		}
		if ctx.Err() != nil {
			p, wp := progressed()
			t.Fatalf("the progress lines counted %d published, %d by the WAL relay, of the %d messages written into the WAL", p, wp, n)
		}
		wait(ctx, 50*time.Millisecond)
	}
	last := d.lines("relay progress")
	if _, ok := last[len(last)-1]["wal_lag_bytes"]; !ok {
		t.Errorf("the progress line %v has no wal_lag_bytes", last[len(last)-1])
	}

	status := exec.CommandContext(ctx, bin, "status", "--db", rc.DB, "--table", rc.outbox(), "--inbox-table", rc.inbox(), "--json")
	status.Env = os.Environ()
	out, err := status.Output()
	if err != nil {
		t.Fatalf("postbox status --json: %v", err)
	}
	var st struct {
		WAL *struct {
			Slot     string `json:"slot"`
			Active   bool   `json:"active"`
			LagBytes *int64 `json:"lag_bytes"`
		} `json:"wal"`
	}
	if err := json.Unmarshal(out, &st); err != nil {
		t.Fatalf("postbox status --json printed %s: %v", out, err)
	}
	if st.WAL == nil || st.WAL.Slot != slotOf.Slot() || !st.WAL.Active || st.WAL.LagBytes == nil {
		t.Errorf("postbox status --json: %s; want the slot %s, active, with its lag_bytes", out, slotOf.Slot())
	}

	if err := d.stop(ctx); err != nil {
		t.Fatal(err)
	}
	stops := d.lines("relay stopping: in-flight batches settled")
	if len(stops) != 1 {
		t.Fatalf("%d stop lines; want one", len(stops))
	}
	if p, wp := number(stops[0]["published"]), number(stops[0]["wal_published"]); p < n || wp < n {
		t.Errorf("stop line %v: published %v, wal_published %v; want at least the %d messages the WAL relay published", stops[0], p, wp, n)
	}
	fmt.Printf("%s: %d messages written into the WAL; progress lines %v; stop line %v\n", t.Name(), n, last[len(last)-1], stops[0])
}

// number returns a JSON number of a decoded log line as a float64, or 0 when it is not one.
func number(v any) float64 {
	f, _ := v.(float64)
	return f
}

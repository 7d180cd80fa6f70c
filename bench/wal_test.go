package bench

import (
	"testing"
	"time"
)

func TestWALScenario(t *testing.T) {
	o := small(DBPgxV5, pgURL)
	o.Events = 2000
	got := run(t, o, "wal")
	res := got["wal"]
	positive(t, res, "events_per_s", "baseline_per_s", "ratio", "batch_ratio", "wal_drain_per_s", "table_drain_per_s",
		"wal_p50_ms", "table_p50_ms", "outage_events", "outage_retained_mib")
}

// TestXminWALScenario: in the WAL mode a held xmin horizon leaves no dead rows behind, since messages are not rows.
func TestXminWALScenario(t *testing.T) {
	o := small(DBPgxV5, pgURL)
	o.XminHold = time.Second
	x := run(t, o, "xmin-wal")["xmin-wal"]
	positive(t, x, "events_per_s", "baseline_per_s", "ratio", "free_p99_ms", "held_p99_ms", "p99_ratio", "xmin_hold_s")
	if d := x["held_dead_tup_after"]; d != 0.0 {
		t.Errorf("xmin-wal: %v dead tuples in the outbox after the hold, want none", d)
	}
}

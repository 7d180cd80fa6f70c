package bench

import "testing"

func TestWALScenario(t *testing.T) {
	o := small(DBPgxV5, pgURL)
	o.Events = 2000
	got := run(t, o, "wal")
	res := got["wal"]
	positive(t, res, "events_per_s", "baseline_per_s", "ratio", "batch_ratio", "wal_drain_per_s", "table_drain_per_s",
		"wal_p50_ms", "table_p50_ms", "outage_events", "outage_retained_mib")
}

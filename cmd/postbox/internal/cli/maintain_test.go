package cli

import (
	"context"
	"encoding/json"
	"log/slog"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/postbox-go/postbox"
	"github.com/postbox-go/postbox/postboxtest"
)

// TestCleanup: cleanup deletes published messages past --retention in batches, dead ones past --dead-retention,
// and never a pending one; on PostgreSQL, MariaDB and SQLite, once and on a schedule.
func TestCleanup(t *testing.T) {
	for _, tg := range targets(t) {
		t.Run(tg.name, func(t *testing.T) { testCleanup(t, tg) })
	}
}

func testCleanup(t *testing.T, tg target) {
	ok := func(environ func(string) string, args ...string) result {
		t.Helper()
		return tg.ok(t, environ, args...)
	}
	ok(nil, "migrate", "up")
	for range 5 {
		ok(nil, "send", "-t", "orders", "--type", "order.created", "--data", "{}")
	}
	ok(nil, "send", "-t", "orders", "--type", "order.bogus", "--data", "{}")
	ok(nil, "send", "-t", "orders", "--type", "order.created", "--data", "{}", "--delay", "1h")

	// The relay keeps what it publishes; the registry parks the bogus event as dead.
	config := writeFile(t, "postbox.yaml", "events:\n  - {type: order.created, topic: orders}\n")
	stdout, _, stop := background(t, env("POSTBOX_CONFIG", config), tg.args("relay", "--broker", "stdout:",
		"--keep-published", "--poll-interval", "20ms")...)
	eventually(t, "five published and one dead", func() bool {
		var s status
		return json.Unmarshal([]byte(run(t, nil, tg.args("status", "--json")...).stdout), &s) == nil &&
			s.Dead == 1 && strings.Count(stdout.String(), "\n") == 5
	})
	if r := stop(); r.code != 0 {
		t.Fatalf("relay exit %d: %s", r.code, r.stderr)
	}

	report := func(args ...string) cleanupReport {
		t.Helper()
		var rep cleanupReport
		out := ok(nil, append([]string{"cleanup", "--once", "--json"}, args...)...).stdout
		if err := json.Unmarshal([]byte(out), &rep); err != nil {
			t.Fatalf("cleanup --json printed %q: %v", out, err)
		}
		return rep
	}
	// Within the default retention of 7 days nothing goes.
	if rep := report(); rep.Published != 0 || rep.Dead != 0 || rep.Skipped || rep.Inbox != nil {
		t.Fatalf("cleanup within retention: %+v", rep)
	}
	// Past a retention of 1ms, the five published messages go, two per batch; the dead and the delayed pending
	// message stay. The inbox is cleaned too (it is empty).
	if rep := report("--retention", "1ms", "--batch", "2", "--inbox-retention", "1h"); rep.Published != 5 || rep.Dead != 0 ||
		rep.Batches != 3 || rep.Inbox == nil || *rep.Inbox != 0 {
		t.Fatalf("cleanup --retention 1ms --batch 2: %+v", rep)
	}
	mustContain(t, "cleanup with nothing left", ok(nil, "cleanup", "--once", "--retention", "1ms").stdout,
		"deleted 0 published and 0 dead message(s) in 0 batch(es)")

	// On a schedule, with a dead retention, the dead message goes and the pending one stays.
	_, stderr, stop := background(t, env("POSTBOX_DEAD_RETENTION", "1ms", "POSTBOX_INTERVAL", "20ms"), tg.args("cleanup")...)
	// Waiting for the log rather than the table: a stop between the delete's commit and its reply would leave
	// the run unlogged.
	eventually(t, "the dead message deleted", func() bool { return strings.Contains(stderr.String(), "dead=1") })
	r := stop()
	if r.code != 0 {
		t.Fatalf("cleanup exit %d after cancellation: %s", r.code, r.stderr)
	}
	mustContain(t, "cleanup log", stderr.String(), "cleanup started", `msg="cleaned up" published=0 dead=1`, "cleanup stopped")
	var s status
	if err := json.Unmarshal([]byte(ok(nil, "status", "--json").stdout), &s); err != nil || s.Pending != 1 || s.Dead != 0 {
		t.Fatalf("status after cleanup: %+v %v; the delayed pending message must stay", s, err)
	}
}

// TestPartitions: migrate up --partitioned makes a partitioned outbox, and partitions creates partitions from the
// oldest row to --lookahead days ahead, then drops those past --retention except one holding a pending message.
func TestPartitions(t *testing.T) {
	for _, tg := range targets(t)[:2] {
		t.Run(tg.name, func(t *testing.T) { testPartitions(t, tg) })
	}
}

func testPartitions(t *testing.T, tg target) {
	ctx := context.Background()
	ok := func(args ...string) result {
		t.Helper()
		return tg.ok(t, nil, args...)
	}
	mustContain(t, "migrate sql --partitioned", ok("migrate", "sql", "--partitioned").stdout, "PARTITION BY RANGE")
	ok("migrate", "up", "--partitioned")

	// Rows from days ago: one published five days ago, one still pending from three days ago.
	start := time.Now().UTC()
	clock := postboxtest.NewClock(start.Add(-5 * 24 * time.Hour))
	db, err := openDatabase(ctx, tg.db, &postbox.Config{Table: tg.table, InboxTable: tg.table + "_inbox", Clock: clock,
		Logger: slog.New(slog.DiscardHandler)}, pgOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if _, err := db.Send(ctx, postbox.Message{Topic: "orders", Type: "order.created", Payload: []byte("{}")}); err != nil {
		t.Fatal(err)
	}
	relay, err := db.NewRelay(&postboxtest.Recorder{}, &postbox.RelayConfig{KeepPublished: true})
	if err != nil {
		t.Fatal(err)
	}
	if n, err := relay.RunOnce(ctx); err != nil || n != 1 {
		t.Fatalf("relay RunOnce = %d, %v", n, err)
	}
	clock.Advance(2 * 24 * time.Hour)
	if _, err := db.Send(ctx, postbox.Message{Topic: "orders", Type: "order.created", Payload: []byte("{}")}); err != nil {
		t.Fatal(err)
	}
	day := func(daysAgo int) string { return "p" + start.AddDate(0, 0, -daysAgo).Format("20060102") }

	report := func(args ...string) partitionReport {
		t.Helper()
		var rep partitionReport
		out := ok(append([]string{"partitions", "--once", "--json", "--retention", "48h"}, args...)...).stdout
		if err := json.Unmarshal([]byte(out), &rep); err != nil {
			t.Fatalf("partitions --json printed %q: %v", out, err)
		}
		return rep
	}
	// The first run creates a partition a day from the oldest row (which sits in the tail) to three days ahead.
	rep := report()
	if len(rep.Created) < 9 || rep.Created[0] != day(5) || !slices.Contains(rep.Created, day(0)) || !slices.Contains(rep.Created, day(-3)) ||
		len(rep.Dropped) != 0 || rep.Skipped {
		t.Fatalf("first run: %+v; want %s to %s created", rep, day(5), day(-3))
	}
	// The inbox's partitions start at the current period: its claims are placed by their message IDs' time.
	if !slices.Contains(rep.InboxCreated, day(0)) || !slices.Contains(rep.InboxCreated, day(-3)) || slices.Contains(rep.InboxCreated, day(1)) {
		t.Fatalf("first run: inbox partitions %v; want %s to %s", rep.InboxCreated, day(0), day(-3))
	}
	// The next drops the partitions past 48h, except the one holding the pending message.
	rep = report()
	if len(rep.Created) != 0 || len(rep.InboxCreated) != 0 || len(rep.InboxDropped) != 0 || !slices.Contains(rep.Dropped, day(5)) || !slices.Contains(rep.Dropped, day(4)) ||
		slices.Contains(rep.Dropped, day(3)) || !slices.Equal(rep.Kept, []string{day(3)}) {
		t.Fatalf("second run: %+v; want %s and %s dropped and %s kept", rep, day(5), day(4), day(3))
	}
	var s status
	if err := json.Unmarshal([]byte(ok("status", "--json").stdout), &s); err != nil || s.Pending != 1 {
		t.Fatalf("status after dropping partitions: %+v %v; the pending message must stay", s, err)
	}

	// On a schedule, on a new table: the first run logs its DDL, and a signal stops it.
	hourly := target{db: tg.db, table: freshTable()}
	if r := run(t, nil, hourly.args("migrate", "up", "--partitioned")...); r.code != 0 {
		t.Fatal(r.stderr)
	}
	_, stderr, stop := background(t, nil, hourly.args("partitions", "--period", "hourly", "--lookahead", "2", "--interval", "1h")...)
	eventually(t, "hourly partitions created", func() bool { return strings.Contains(stderr.String(), "partitions maintained") })
	if r := stop(); r.code != 0 {
		t.Fatalf("partitions exit %d after cancellation: %s", r.code, r.stderr)
	}
	mustContain(t, "partitions log", stderr.String(), "partition maintenance started", "partition DDL", "partition maintenance stopped")

	// An unpartitioned table is refused, with what to do instead.
	plain := target{db: tg.db, table: freshTable()}
	if r := run(t, nil, plain.args("migrate", "up")...); r.code != 0 {
		t.Fatal(r.stderr)
	}
	r := run(t, nil, plain.args("partitions", "--once")...)
	if r.code != ExitFailure || !strings.Contains(r.stderr, "migrate up --partitioned") || !strings.Contains(r.stderr, "postbox cleanup") {
		t.Fatalf("partitions on an unpartitioned table: exit %d, %s", r.code, r.stderr)
	}
}

// TestRelayKeepPublishedCleans: a relay with --keep-published deletes the messages it kept once they are older than
// --retention.
func TestRelayKeepPublishedCleans(t *testing.T) {
	tg := sqliteTarget(t)
	if r := run(t, nil, tg.args("migrate", "up")...); r.code != 0 {
		t.Fatalf("migrate up: exit %d: %s", r.code, r.stderr)
	}
	for range 3 {
		if r := run(t, nil, tg.args("send", "-t", "orders", "--type", "order.created", "--data", "{}")...); r.code != 0 {
			t.Fatalf("send: exit %d: %s", r.code, r.stderr)
		}
	}
	stdout, _, stop := background(t, nil, tg.args("relay", "--broker", "stdout:", "--keep-published", "--poll-interval", "20ms")...)
	eventually(t, "three published", func() bool { return strings.Count(stdout.String(), "\n") == 3 })
	if r := stop(); r.code != 0 {
		t.Fatalf("relay exit %d: %s", r.code, r.stderr)
	}
	// A relay cleans as it starts: the three kept messages are past a retention of 1ms.
	_, stderr, stop := background(t, nil, tg.args("relay", "--broker", "stdout:", "--keep-published", "--retention", "1ms")...)
	eventually(t, "the kept messages deleted", func() bool { return strings.Contains(stderr.String(), "published=3") })
	if r := stop(); r.code != 0 {
		t.Fatalf("relay exit %d: %s", r.code, r.stderr)
	}
	mustContain(t, "cleanup after the relay", run(t, nil, tg.args("cleanup", "--once", "--retention", "1ms")...).stdout,
		"deleted 0 published and 0 dead message(s)")
}

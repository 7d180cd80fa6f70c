package drivertest

import (
	"context"
	"log/slog"
	"slices"
	"testing"
	"time"

	"github.com/postbox-go/postbox"
	"github.com/postbox-go/postbox/partition"
	"github.com/postbox-go/postbox/postboxtest"
)

// idAt returns a new UUIDv7 message ID made at t.
func idAt(t time.Time) string {
	return partition.IDBound(t) + postbox.NewID()[len(partition.IDBound(t)):]
}

// deliver processes the message with ID id as consumer "billing" with a handler that writes nothing, and checks
// the outcome.
func deliver[TTx any](t *testing.T, c *postbox.Client[TTx], what, id string, want postbox.Outcome) {
	t.Helper()
	m := delivery()
	m.ID = id
	res, err := postbox.Process(context.Background(), c, "billing", m, func(context.Context, TTx, postbox.Message) ([]postbox.Message, error) {
		return nil, nil
	})
	expectOutcome(t, what+" ("+id+")", res, err, want)
}

// testInboxPartitions: the maintainer keeps the inbox's partitions, placed by the time in the message ID, and a
// claim stays exact through every move: claimed before its partition existed, in a named partition, in the tail,
// and with an ID that is not a UUIDv7.
func testInboxPartitions[TTx any](t *testing.T, newDriver NewDriver[TTx]) {
	inbox := partition.Inbox
	drv := newDriver(t)
	clock := postboxtest.NewClock(t0)
	c := partitionedClient(t, drv, clock)

	early := idAt(t0)      // claimed before the maintainer first runs
	custom := "order-42/1" // a user's own ID, not a UUIDv7
	deliver(t, c, "first delivery before any inbox partition", early, postbox.Processed)
	deliver(t, c, "first delivery of an ID that is not a UUIDv7", custom, postbox.Processed)
	if n := tailRows(t, drv, c, inbox); n != 2 {
		t.Fatalf("%d claims in the inbox's tail partition before any named one; want 2", n)
	}

	m := maintainer(t, c, &partition.Config{Lookahead: 2, InboxRetention: 48 * time.Hour, Logger: slog.New(slog.DiscardHandler)})
	res := runOnce(t, m)
	if want := days("20310310", 3); !slices.Equal(res.InboxCreated, want) || len(res.InboxDropped) != 0 {
		t.Fatalf("first run %+v; want the inbox's partitions for today and 2 days ahead, %v, created", res, want)
	}
	if got, want := labels(t, drv, c, inbox), days("20310310", 3); !slices.Equal(got, want) {
		t.Fatalf("inbox partitions %v, want %v", got, want)
	}
	if n := tailRows(t, drv, c, inbox); n != 1 {
		t.Fatalf("%d claims left in the inbox's tail; want only the one whose ID is not a UUIDv7 (its partition took the other)", n)
	}
	deliver(t, c, "redelivery after the claim moved into its partition", early, postbox.Duplicate)
	deliver(t, c, "redelivery of the ID that is not a UUIDv7", custom, postbox.Duplicate)

	next := idAt(t0.Add(24 * time.Hour))
	late := idAt(t0.Add(30 * 24 * time.Hour)) // past the last named partition
	deliver(t, c, "delivery of a message made tomorrow", next, postbox.Processed)
	deliver(t, c, "delivery of a message made past the last partition", late, postbox.Processed)
	deliver(t, c, "redelivery of a message made past the last partition", late, postbox.Duplicate)
	if n := tailRows(t, drv, c, inbox); n != 2 {
		t.Fatalf("%d claims in the inbox's tail; want 2: the ID that is not a UUIDv7 and the one past the last partition", n)
	}
	if res := runOnce(t, m); len(res.InboxCreated)+len(res.InboxDropped) != 0 {
		t.Fatalf("second run at the same time did %+v; want nothing", res)
	}

	clock.Advance(72 * time.Hour) // 13 March noon: IDs made before 11 March noon are past retention
	res = runOnce(t, m)
	if !slices.Equal(res.InboxDropped, []string{"p20310310"}) || !slices.Equal(res.InboxCreated, days("20310313", 3)) {
		t.Fatalf("run on 13 March %+v; want p20310310 dropped and p20310313 to p20310315 created in the inbox", res)
	}
	if got, want := labels(t, drv, c, inbox), days("20310311", 5); !slices.Equal(got, want) {
		t.Fatalf("inbox partitions %v, want %v", got, want)
	}
	deliver(t, c, "redelivery within retention", next, postbox.Duplicate)
	deliver(t, c, "redelivery of the ID that is not a UUIDv7, which age never drops", custom, postbox.Duplicate)
	deliver(t, c, "redelivery of a message made past the last partition", late, postbox.Duplicate)
	// The claim left with its partition: a redelivery past retention is a new delivery.
	deliver(t, c, "redelivery past retention", early, postbox.Processed)

	// A Cleaner removes claims by receive time from every partition, the tail included.
	clock.Advance(24 * time.Hour)
	cleaned, err := cleaner(t, c, &postbox.CleanupConfig{InboxRetention: time.Hour, BatchSize: 100}).RunOnce(context.Background())
	if err != nil || cleaned.Inbox != 4 {
		t.Fatalf("cleanup = %+v, %v; want the 4 claims received more than an hour ago deleted", cleaned, err)
	}
	if n := tailRows(t, drv, c, inbox); n != 0 {
		t.Fatalf("%d claims in the inbox's tail after the cleanup; want 0", n)
	}
	deliver(t, c, "delivery after the cleanup of the ID that is not a UUIDv7", custom, postbox.Processed)
}

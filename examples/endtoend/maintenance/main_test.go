package main

import (
	"context"
	"testing"

	"github.com/postbox-go/postbox/internal/testenv"
)

// TestMaintenance runs docs/PARTITIONS.md's program: the cleaner runs, and the maintainer creates today's
// partition and three ahead, then none on a second run.
func TestMaintenance(t *testing.T) {
	dbURL, err := testenv.FreshPostgres("postbox_examples_maintenance")
	if err != nil {
		t.Fatal(err)
	}
	_, parts, err := run(context.Background(), dbURL)
	if err != nil {
		t.Fatal(err)
	}
	if len(parts.Created) < 4 || len(parts.InboxCreated) < 4 {
		t.Fatalf("first run created outbox partitions %v and inbox partitions %v; want today's and three ahead of each", parts.Created, parts.InboxCreated)
	}
	_, again, err := run(context.Background(), dbURL)
	if err != nil {
		t.Fatal(err)
	}
	if len(again.Created) != 0 {
		t.Fatalf("second run created %v; want none, the partitions exist", again.Created)
	}
}

package main

import (
	"context"
	"testing"

	"github.com/postbox-go/postbox/internal/testenv"
)

// TestOperations runs docs/OPERATIONS.md's program: the parked message is listed, counted and retried, and its
// corrected copy is enqueued under a new ID.
func TestOperations(t *testing.T) {
	dbURL, err := testenv.FreshPostgres("postbox_examples_operations")
	if err != nil {
		t.Fatal(err)
	}
	res, err := run(context.Background(), dbURL)
	if err != nil {
		t.Fatal(err)
	}
	if res.Listed != 1 || res.Counted.N != 1 || res.Counted.More || res.Retried != 1 {
		t.Fatalf("listed %d, counted %s, retried %d; want the one parked message each time", res.Listed, res.Counted, res.Retried)
	}
	if res.Resent == "" || res.Resent == res.Original {
		t.Fatalf("resent %q from %q; want a new ID", res.Resent, res.Original)
	}
}

package main

import (
	"context"
	"testing"
)

// The outbox alone on SQLite, with no set-up: keep it working.
func TestQuickstart(t *testing.T) {
	if err := run(context.Background()); err != nil {
		t.Fatal(err)
	}
}

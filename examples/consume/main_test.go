package main

import (
	"context"
	"testing"
)

// The inbox on SQLite, with no set-up: keep it working.
func TestConsume(t *testing.T) {
	if err := run(context.Background()); err != nil {
		t.Fatal(err)
	}
}

package main

import (
	"context"
	"testing"
)

// The quickstart is the README's first command: keep it working.
func TestQuickstart(t *testing.T) {
	if err := run(context.Background()); err != nil {
		t.Fatal(err)
	}
}

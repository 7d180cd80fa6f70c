package main

import (
	"context"
	"testing"
)

// The README's "Consuming exactly once" section quotes this program: keep it working.
func TestConsume(t *testing.T) {
	if err := run(context.Background()); err != nil {
		t.Fatal(err)
	}
}

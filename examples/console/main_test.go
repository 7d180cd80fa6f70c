package main

import (
	"context"
	"testing"
)

// The console mounted under a prefix of a program's own server: keep it working.
func TestConsole(t *testing.T) {
	if err := run(context.Background()); err != nil {
		t.Fatal(err)
	}
}

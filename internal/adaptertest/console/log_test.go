package console_test

import (
	"log/slog"
	"testing"

	"github.com/postbox-go/postbox/internal/testenv"
)

// testLogger returns a logger writing to a buffer, shown in the test's log when it fails.
func testLogger(t *testing.T) (*slog.Logger, *testenv.Buffer) {
	b := &testenv.Buffer{}
	t.Cleanup(func() {
		if t.Failed() {
			t.Log("console log:\n" + b.String())
		}
	})
	return slog.New(slog.NewTextHandler(b, nil)), b
}

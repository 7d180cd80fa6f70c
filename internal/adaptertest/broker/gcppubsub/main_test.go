package gcppubsub_test

import (
	"log/slog"
	"testing"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m,
		// OpenCensus, which the Pub/Sub client records into, starts one worker for the life of the process.
		goleak.IgnoreTopFunction("go.opencensus.io/stats/view.(*worker).start"),
		// The client's stream keep-alive goroutine notices that its Receive returned only on its next
		// server-monitor tick, up to 10 seconds later.
		goleak.IgnoreTopFunction("cloud.google.com/go/pubsub/v2.(*messageIterator).streamKeepAliveHandler"))
}

func quietLogger() *slog.Logger { return slog.New(slog.DiscardHandler) }

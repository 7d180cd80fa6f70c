package natsbroker_test

import (
	"testing"

	"github.com/postbox-go/postbox/broker/brokertest"
	"github.com/postbox-go/postbox/internal/testenv/pgxenv"
)

// TestEndToEnd: PostgreSQL outbox, relay, NATS JetStream, two subscribers processing through the inbox, with
// duplicates injected on both sides: every committed message has its effect once.
func TestEndToEnd(t *testing.T) {
	h := &harness{js: connect(t, serverURL), streams: map[string]bool{}}
	brokertest.ExerciseEndToEnd(t, pgxenv.Client(t, "postbox_test_nats"), pgxenv.Hooks, h.new)
}

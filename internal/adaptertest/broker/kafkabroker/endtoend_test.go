package kafkabroker_test

import (
	"testing"

	"github.com/postbox-go/postbox/broker/brokertest"
	"github.com/postbox-go/postbox/internal/testenv/pgxenv"
)

// TestEndToEnd: PostgreSQL outbox, relay, Kafka (kfake), two members of a consumer group processing through the
// inbox, with duplicates injected on both sides: every committed message has its effect once.
func TestEndToEnd(t *testing.T) {
	brokertest.ExerciseEndToEnd(t, pgxenv.Client(t, "postbox_test_kafka"), pgxenv.Hooks, newHarness(t, "").new)
}

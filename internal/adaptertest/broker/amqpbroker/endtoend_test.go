package amqpbroker_test

import (
	"testing"

	amqpbroker "github.com/postbox-go/postbox/broker/amqpbroker"
	"github.com/postbox-go/postbox/broker/brokertest"
	"github.com/postbox-go/postbox/internal/testenv/pgxenv"
)

// TestEndToEnd: PostgreSQL outbox, relay, RabbitMQ, two consumers processing through the inbox, with duplicates
// injected on both sides: every committed message has its effect once.
func TestEndToEnd(t *testing.T) {
	h := newHarness(t, amqpbroker.QueueQuorum, false)
	brokertest.ExerciseEndToEnd(t, pgxenv.Client(t, "postbox_test_amqp"), pgxenv.Hooks, h.new)
}

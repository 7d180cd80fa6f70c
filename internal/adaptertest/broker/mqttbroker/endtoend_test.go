package mqttbroker_test

import (
	"testing"

	"github.com/postbox-go/postbox/broker/brokertest"
	"github.com/postbox-go/postbox/internal/testenv/pgxenv"
)

// TestEndToEnd: PostgreSQL outbox, relay, Mosquitto, two members of a shared subscription processing through the
// inbox, with duplicates injected on both sides: every committed message has its effect once.
func TestEndToEnd(t *testing.T) {
	h := &harness{n: map[string]int{}}
	brokertest.ExerciseEndToEnd(t, pgxenv.Client(t, "postbox_test_mqtt"), pgxenv.Hooks, h.new)
}

package gcppubsub_test

import (
	"testing"

	"cloud.google.com/go/pubsub/v2/apiv1/pubsubpb"

	"github.com/postbox-go/postbox/broker/brokertest"
	"github.com/postbox-go/postbox/internal/testenv/pgxenv"
)

// TestEndToEnd: PostgreSQL outbox, relay, Pub/Sub (pstest), two subscribers on one subscription processing
// through the inbox, with duplicates injected on both sides: every committed message has its effect once.
func TestEndToEnd(t *testing.T) {
	_, c := server(t)
	h := &harness{c: c, topics: map[string]bool{}, sub: func(topic string) *pubsubpb.Subscription {
		return &pubsubpb.Subscription{Name: "sub-" + topic, Topic: topic}
	}}
	brokertest.ExerciseEndToEnd(t, pgxenv.Client(t, "postbox_test_gcppubsub"), pgxenv.Hooks, h.new)
}

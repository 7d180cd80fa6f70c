package amqpbroker_test

import (
	"context"
	"strings"
	"testing"
	"time"

	amqpbroker "github.com/postbox-go/postbox/broker/amqpbroker"
)

// TestPingReasons: Ping reports a server it cannot reach, or a password it refuses, with the reason. (The
// conformance suite checks that Ping succeeds on a reachable server and fails on an unreachable one.)
func TestPingReasons(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for url, want := range map[string]string{
		"amqp://guest:guest@127.0.0.1:1/":                              "connection refused",
		strings.Replace(conn().URL, "guest:guest@", "guest:wrong@", 1): "username or password not allowed",
	} {
		pub := publisher(t, amqpbroker.PublisherConfig{ConnConfig: amqpbroker.ConnConfig{URL: url}})
		if err := pub.Ping(ctx); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("Ping of %s: %v; want an error saying %s", url, err, want)
		}
	}
}

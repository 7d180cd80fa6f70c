package mqttbroker_test

import (
	"context"
	"strings"
	"testing"
	"time"

	mqttbroker "github.com/postbox-go/postbox/broker/mqttbroker"
)

// TestPing: Ping connects to the MQTT server and reports one it cannot reach.
func TestPing(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := publisher(t, mqttbroker.PublisherConfig{}).Ping(ctx); err != nil {
		t.Fatalf("Ping: %v", err)
	}
	pub := publisher(t, mqttbroker.PublisherConfig{ConnConfig: mqttbroker.ConnConfig{URL: "mqtt://127.0.0.1:1", ConnectTimeout: 5 * time.Second}})
	if err := pub.Ping(ctx); err == nil || !strings.Contains(err.Error(), "no connection to mqtt://127.0.0.1:1") {
		t.Errorf("Ping of a closed port: %v", err)
	}
}

package broker_test

import (
	"testing"

	"github.com/postbox-go/postbox/broker"
)

// TestKeyToken: every key becomes one word no wildcard or separator of NATS or AMQP can appear in, and readable
// keys stay readable.
func TestKeyToken(t *testing.T) {
	for key, want := range map[string]string{
		"":          "%",
		"order-42":  "order-42",
		"user_7":    "user_7",
		"a.b":       "a%2Eb",
		"*":         "%2A",
		">":         "%3E",
		"#":         "%23",
		"a b":       "a%20b",
		"%":         "%25",
		"é":         "%C3%A9",
		"tab\there": "tab%09here",
	} {
		if got := broker.KeyToken(key); got != want {
			t.Errorf("KeyToken(%q) = %q, want %q", key, got, want)
		}
	}
}

package console

import "testing"

// TestCause: the dead-letter list shows what went wrong, not which message went where.
func TestCause(t *testing.T) {
	for _, c := range []struct{ err, want string }{
		{`webhook: post message 01a23442-1c86-7000-9c6f-2e28974c7988 to https://hooks.example/orders: Post "https://hooks.example/orders": dial tcp 10.0.0.7:443: connect: connection refused`,
			"dial tcp 10.0.0.7:443: connect: connection refused"},
		{`webhook: post message 01a23442-1c86-7000-9c6f-2e28974c7988 to https://hooks.example/orders: 500 Internal Server Error: {"error":"db down"}`,
			`500 Internal Server Error: {"error":"db down"}`},
		{`amqpbroker: message 01a23442-1c86-7000-9c6f-2e28974c7988 to "orders": channel closed`, "channel closed"},
		{`gcppubsub: message 01a23442-1c86-7000-9c6f-2e28974c7988 not published: deadline exceeded`, "deadline exceeded"},
		{`permanent: webhook: post message 01a23442-1c86-7000-9c6f-2e28974c7988 to https://hooks.example/: 410 Gone: `, "410 Gone:"},
		{"nats: no response from stream", "nats: no response from stream"},
		{"webhook: post message 01a23442-1c86-7000-9c6f-2e28974c7988 to https://hooks.example/: ", "webhook: post message 01a23442-1c86-7000-9c6f-2e28974c7988 to https://hooks.example/:"},
	} {
		if got := cause(c.err); got != c.want {
			t.Errorf("cause(%q) = %q, want %q", c.err, got, c.want)
		}
	}
}

package driver

// Limits on message fields, defined here once for every writer of the outbox: the core's Enqueue checks them in Go
// (postbox.MaxTopicLen and the others are these), and the SQL API's migrations are rendered from them, so that a
// row written by SQL passes the checks a row written by Go passes.
const (
	MaxTopicLen      = 255
	MaxTypeLen       = 255
	MaxKeyLen        = 1024
	MaxHeaders       = 64
	MaxHeaderNameLen = 128
	MaxHeaderLen     = 4096
	// DefaultMaxPayloadBytes is the largest payload a client accepts by default (postbox.Config.MaxPayloadBytes),
	// and the largest the SQL API accepts.
	DefaultMaxPayloadBytes = 1 << 20
	// DefaultNotifyIntervalMillis is the least time, in milliseconds, between two wake-ups that enqueuing
	// transactions send: postbox.DefaultNotifyInterval for one Go client, and for the SQL API, across every
	// session of the database.
	DefaultNotifyIntervalMillis = 10
)

// ControlRanges are the inclusive ranges of characters a text field may not hold: C0 and C1 controls, DEL, and the
// bidirectional embeddings, overrides and isolates that make text read differently from its bytes.
var ControlRanges = [...][2]rune{{0x00, 0x1f}, {0x7f, 0x9f}, {0x202a, 0x202e}, {0x2066, 0x2069}}

// IsControl reports whether r is in ControlRanges.
func IsControl(r rune) bool {
	for _, c := range ControlRanges {
		if r >= c[0] && r <= c[1] {
			return true
		}
	}
	return false
}

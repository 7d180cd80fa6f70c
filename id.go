package postbox

import (
	"crypto/rand"
	"sync"
	"time"

	"github.com/postbox-go/postbox/internal/uuid"
)

// NewID returns a new UUIDv7 (RFC 9562) in canonical text form. IDs from one process are strictly increasing:
// within a millisecond the 12-bit rand_a field counts up, so records sort in the order they were made.
func NewID() string {
	var u [16]byte
	ms, seq := idClock.next()
	u[0], u[1], u[2], u[3], u[4], u[5] = byte(ms>>40), byte(ms>>32), byte(ms>>24), byte(ms>>16), byte(ms>>8), byte(ms)
	u[6] = 0x70 | byte(seq>>8)&0x0f
	u[7] = byte(seq)
	if _, err := rand.Read(u[8:]); err != nil {
		panic("postbox: crypto/rand failed: " + err.Error()) // crypto/rand does not fail on supported platforms
	}
	u[8] = 0x80 | u[8]&0x3f
	return uuid.Format(u)
}

var idClock monotonic

type monotonic struct {
	mu  sync.Mutex
	ms  int64
	seq uint16
}

// next returns a millisecond timestamp and sequence that never repeat or go backwards in this process.
func (m *monotonic) next() (int64, uint16) {
	m.mu.Lock()
	defer m.mu.Unlock()
	now := time.Now().UnixMilli()
	switch {
	case now > m.ms:
		m.ms, m.seq = now, 0
	case m.seq < 0x0fff:
		m.seq++
	default: // 4096 IDs in one millisecond: borrow the next one
		m.ms, m.seq = m.ms+1, 0
	}
	return m.ms, m.seq
}

// parseUUID accepts a UUID in canonical form (any case) and returns it in lower case.
func parseUUID(s string) (string, error) {
	u, err := uuid.Parse(s)
	if err != nil {
		return "", err
	}
	return uuid.Format(u), nil
}

package broker

import (
	"math/rand/v2"
	"time"
)

// Defaults for ConsumeConfig.NackDelay.
const (
	DefaultMinNackDelay = time.Second
	DefaultMaxNackDelay = time.Minute
)

// backoff is the default NackDelay: 1s, 2s, 4s… up to a minute, each up to a fifth shorter at random so that
// messages that failed together are not redelivered together.
//
// TODO(backoff): replace with the project's one backoff helper (internal/backoff) once it lands.
func backoff(attempt int) time.Duration {
	d := DefaultMinNackDelay
	for i := 1; i < attempt && d < DefaultMaxNackDelay; i++ {
		d *= 2
	}
	d = min(d, DefaultMaxNackDelay)
	return d - rand.N(d/5+1)
}

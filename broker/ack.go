package broker

import (
	"time"

	"github.com/postbox-go/postbox/internal/backoff"
)

// Defaults for ConsumeConfig.NackDelay.
const (
	DefaultMinNackDelay = time.Second
	DefaultMaxNackDelay = time.Minute
)

// nackDelay is the default NackDelay: the project's backoff from DefaultMinNackDelay to DefaultMaxNackDelay (1s,
// 2s, 4s… up to a minute, each drawn from its upper half so that messages that failed together are not redelivered
// together).
func nackDelay(attempt int) time.Duration {
	return backoff.Delay(DefaultMinNackDelay, DefaultMaxNackDelay, attempt)
}

package postbox

import (
	"time"

	"github.com/postbox-go/postbox/internal/backoff"
)

// RetryPolicy is how a relay retries: a failed message's delay and its last attempt, and the pace at which it
// tries again a dependency that is down. RelayConfig and the WAL relay's configuration (driver/pgxv5/wal) have
// the same fields and hand them to their delivery step through their Retry methods, so that both relays rule on
// a failure alike. The zero value is valid: every field has a default.
type RetryPolicy struct {
	// MaxAttempts is how many failed publishes park a message as dead. Default: DefaultMaxAttempts (20).
	MaxAttempts int
	// BackoffBase and BackoffMax shape a failed message's delay: BackoffBase·2^(attempts-1), at most BackoffMax,
	// with equal jitter. Defaults: DefaultBackoffBase (1s), DefaultBackoffMax (10m).
	BackoffBase, BackoffMax time.Duration
	// Backoff, when set, replaces the delay above: it returns how long to wait after the given failed attempt
	// (1 after the first failure).
	Backoff func(attempt int) time.Duration
	// ErrorBackoffBase and ErrorBackoffMax pace the probes of a destination, or a database, that is down: the
	// delay starts at ErrorBackoffBase and doubles up to ErrorBackoffMax, with equal jitter. Defaults:
	// DefaultErrorBackoffBase (100ms, or ErrorBackoffMax when that is lower), DefaultErrorBackoffMax (1s, or
	// ErrorBackoffBase when that is higher).
	ErrorBackoffBase, ErrorBackoffMax time.Duration
}

// WithDefaults returns a copy of p with every zero field set to its default.
func (p RetryPolicy) WithDefaults() RetryPolicy {
	setDefault(&p.MaxAttempts, DefaultMaxAttempts)
	setDefault(&p.BackoffBase, DefaultBackoffBase)
	setDefault(&p.BackoffMax, DefaultBackoffMax)
	if p.ErrorBackoffBase == 0 && p.ErrorBackoffMax > 0 {
		p.ErrorBackoffBase = min(DefaultErrorBackoffBase, p.ErrorBackoffMax) // a cap alone is enough to set
	}
	setDefault(&p.ErrorBackoffBase, DefaultErrorBackoffBase)
	setDefault(&p.ErrorBackoffMax, max(DefaultErrorBackoffMax, p.ErrorBackoffBase))
	return p
}

// Delay returns a failed message's delay after the given failed attempt (1 after the first failure).
func (p RetryPolicy) Delay(attempt int) time.Duration {
	if p.Backoff != nil {
		return p.Backoff(attempt)
	}
	return backoff.Delay(p.BackoffBase, p.BackoffMax, attempt)
}

// errorBackoff returns a fresh pacer of the probes of something that is down.
func (p RetryPolicy) errorBackoff() backoff.Backoff {
	return backoff.Backoff{Base: p.ErrorBackoffBase, Max: p.ErrorBackoffMax}
}

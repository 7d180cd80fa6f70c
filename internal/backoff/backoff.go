// Package backoff is Postbox's one retry-delay policy: exponential growth from a base to a cap, with equal jitter.
// Every retry loop in the project (the relay's per-message retries and its recovery from database and broker
// outages, consumer nacks, broker reconnects) takes its delays from here, so they all spread out the same way.
//
// # Jitter
//
// The delay after attempt n is drawn uniformly from [d/2, d], where d = min(Base·2^(n-1), Max): "equal jitter".
// Full jitter ([0, d]) spreads retries a little more, but it can draw a delay near zero at any attempt, so a
// fleet of relays could hit a recovering database again at once and a message's retries would no longer space out
// with its attempts (MaxAttempts would then bound the number of tries but not the time they cover). Equal jitter
// keeps at least half of every delay and still desynchronises processes that failed at the same moment: relays
// restarted together after an outage retry across a window as wide as half the delay instead of in lockstep.
package backoff

import (
	"math/rand/v2"
	"time"
)

// Exponential returns base·2^(attempt-1), at most limit, without jitter: the upper bound of Delay. attempt is 1
// after the first failure; attempts below 1 count as 1. A limit below base is treated as base.
func Exponential(base, limit time.Duration, attempt int) time.Duration {
	if base <= 0 {
		return 0
	}
	limit = max(limit, base)
	d := base
	for i := 1; i < attempt && d < limit; i++ {
		if d > limit/2 {
			return limit // doubling would pass the cap, or overflow
		}
		d *= 2
	}
	return d
}

// Delay returns how long to wait after the given failed attempt (1 after the first failure): Exponential(base,
// limit, attempt) with equal jitter, a uniform draw from [d/2, d].
func Delay(base, limit time.Duration, attempt int) time.Duration {
	return Jitter(Exponential(base, limit, attempt))
}

// Jitter returns a uniform draw from [d/2, d]: the project's one jitter policy (see the package doc). It returns 0
// for d ≤ 0.
func Jitter(d time.Duration) time.Duration {
	if d <= 0 {
		return 0
	}
	half := d / 2
	return d - half + time.Duration(rand.Int64N(int64(half)+1))
}

// Backoff counts consecutive failures and spaces the retries after them. The zero value with Base and Max set is
// ready to use; it is not safe for concurrent use.
type Backoff struct {
	// Base is the delay after the first failure, before jitter.
	Base time.Duration
	// Max caps the delay before jitter.
	Max time.Duration

	attempts int
}

// Next records a failure and returns how long to wait before trying again.
func (b *Backoff) Next() time.Duration {
	b.attempts++
	return Delay(b.Base, b.Max, b.attempts)
}

// Again returns a delay at the level of the failures recorded so far, without recording one more: for a failure
// that says "not yet" rather than "worse", such as a server that is starting up. With no failure recorded it
// returns the first level's delay.
func (b *Backoff) Again() time.Duration { return Delay(b.Base, b.Max, b.attempts) }

// Reset forgets the failures after a success, so the next failure waits Base again.
func (b *Backoff) Reset() { b.attempts = 0 }

// Attempts returns the failures recorded since the last Reset.
func (b *Backoff) Attempts() int { return b.attempts }

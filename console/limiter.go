package console

import (
	"sync"
	"time"
)

// The login limiter keeps, per client address and per user name, the failed logins: the first freeFailures
// cost nothing, each one after doubles the wait before the next attempt (from minBackoff up to maxBackoff), and a
// success, or forgetAfter without an attempt, wipes the slate. Keys are separate so that one address guessing
// holds back that address, and guesses at one user from many addresses hold back that user, while every other
// operator logs in as usual.
const (
	freeFailures = 5
	minBackoff   = 2 * time.Second
	maxBackoff   = 15 * time.Minute
	forgetAfter  = 15 * time.Minute
	// maxLimiterKeys bounds the keys kept. Past it, a key the limiter has never seen is refused until old ones
	// are forgotten: a flood of addresses costs memory no more than this, at the price of new clients waiting.
	maxLimiterKeys = 1 << 16
)

type loginLimiter struct {
	mu   sync.Mutex
	keys map[string]*attempts
}

type attempts struct {
	failures int
	next     time.Time // no attempt before
	last     time.Time
}

func backoff(failures int) time.Duration {
	if failures <= freeFailures {
		return 0
	}
	d := minBackoff
	for i := freeFailures + 1; i < failures && d < maxBackoff; i++ {
		d *= 2
	}
	return min(d, maxBackoff)
}

// take checks every key and takes an attempt from each in one step, so that parallel requests cannot all pass
// the check before any counts: the attempt counts as failed until succeed says otherwise. When a key must wait,
// nothing is taken from the others, the waiting keys' wait grows, and take returns how long the longest is.
func (l *loginLimiter) take(keys []string, now time.Time) (time.Duration, bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.keys == nil {
		l.keys = map[string]*attempts{}
	}
	var wait time.Duration
	for _, k := range keys {
		a, ok := l.keys[k]
		if !ok && len(l.keys) >= maxLimiterKeys {
			l.forget(now)
			if len(l.keys) >= maxLimiterKeys {
				return time.Minute, false
			}
		}
		if ok && now.Before(a.next) {
			wait = max(wait, a.next.Sub(now))
		}
	}
	if wait > 0 {
		for _, k := range keys {
			if a := l.keys[k]; a != nil && now.Before(a.next) {
				a.failures++
				a.last, a.next = now, now.Add(backoff(a.failures))
				wait = max(wait, a.next.Sub(now))
			}
		}
		return wait, false
	}
	for _, k := range keys {
		a := l.keys[k]
		if a == nil || now.Sub(a.last) > forgetAfter {
			a = &attempts{}
			l.keys[k] = a
		}
		a.failures++
		a.last, a.next = now, now.Add(backoff(a.failures))
	}
	return 0, true
}

// succeed wipes the keys' failures after a login that succeeded.
func (l *loginLimiter) succeed(keys []string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, k := range keys {
		delete(l.keys, k)
	}
}

// forget drops the keys whose last attempt is older than forgetAfter and whose wait is over.
func (l *loginLimiter) forget(now time.Time) {
	for k, a := range l.keys {
		if now.Sub(a.last) > forgetAfter && !now.Before(a.next) {
			delete(l.keys, k)
		}
	}
}

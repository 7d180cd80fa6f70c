package adapterkit

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	mrand "math/rand/v2"
	"time"
)

// Sleep waits for d or until ctx ends, and reports whether d passed.
func Sleep(ctx context.Context, d time.Duration) bool {
	if d <= 0 {
		return ctx.Err() == nil
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-ctx.Done():
		return false
	}
}

// RandomHex returns n random bytes as 2n hex digits, for names no other client uses (consumer tags, client
// IDs).
func RandomHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

// Delay is the wait before reconnection attempt n+1 after n failures in a row (n from 0): min doubled n
// times, at most max, less a random jitter of up to a quarter so that a fleet of clients does not reconnect in
// lockstep after a broker restart.
//
// TODO(backoff): use the project's backoff helper, internal/backoff, once it exists.
func Delay(minDelay, maxDelay time.Duration, n int) time.Duration {
	d := minDelay
	for i := 0; i < n && d < maxDelay; i++ {
		d *= 2
	}
	d = min(d, maxDelay)
	return d - time.Duration(mrand.Int64N(int64(d)/4+1))
}

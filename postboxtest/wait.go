package postboxtest

import (
	"context"
	"sync"
	"time"
)

// changes lets goroutines wait for a change to state guarded by a mutex.
type changes struct {
	ch chan struct{}
}

// signal wakes every waiter. The caller holds the state's mutex.
func (c *changes) signal() {
	if c.ch != nil {
		close(c.ch)
		c.ch = nil
	}
}

// wait returns a channel closed at the next signal. The caller holds the state's mutex.
func (c *changes) wait() <-chan struct{} {
	if c.ch == nil {
		c.ch = make(chan struct{})
	}
	return c.ch
}

// waitUntil waits until done, called with mu held, reports true, or timeout passes, or ctx is done, and reports
// whether done was reached.
func (c *changes) waitUntil(ctx context.Context, mu *sync.Mutex, timeout time.Duration, done func() bool) bool {
	deadline := time.NewTimer(timeout)
	defer deadline.Stop()
	for {
		mu.Lock()
		if done() {
			mu.Unlock()
			return true
		}
		ch := c.wait()
		mu.Unlock()
		select {
		case <-ch:
		case <-deadline.C:
			return false
		case <-ctx.Done():
			return false
		}
	}
}

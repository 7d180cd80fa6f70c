package adapterkit

import (
	"errors"
	"fmt"
	"sync/atomic"

	"github.com/postbox-go/postbox/broker"
)

// Running lets one Receive run at a time on a subscriber. The zero value is ready.
type Running struct{ on atomic.Bool }

// Start checks handle and marks a Receive as running; call done when it returns. pkg is the adapter's package
// name and busy says why a second Receive cannot run (empty for "make one subscriber per Receive").
func (r *Running) Start(pkg string, handle broker.DeliveryHandler, busy string) (done func(), err error) {
	if handle == nil {
		return nil, fmt.Errorf("%s: Receive needs a handler; wrap yours with broker.AckAfter", pkg)
	}
	if busy == "" {
		busy = "make one subscriber per Receive"
	}
	if !r.on.CompareAndSwap(false, true) {
		return nil, fmt.Errorf("%s: Receive is already running on this subscriber; %s", pkg, busy)
	}
	return func() { r.on.Store(false) }, nil
}

// Closed is a publisher's closed flag. The zero value is open.
type Closed struct{ on atomic.Bool }

// Close marks the publisher closed and reports whether it was open.
func (c *Closed) Close() bool { return c.on.CompareAndSwap(false, true) }

// Skip is how Publish starts: it reports whether there is nothing to publish, with errClosed once Close was
// called, and with nil for an empty batch.
func (c *Closed) Skip(errClosed error, batchLen int) (bool, error) {
	if c.on.Load() {
		return true, errClosed
	}
	return batchLen == 0, nil
}

// ErrClosed returns the sentinel an adapter exports as its ErrClosed.
func ErrClosed(pkg string) error { return errors.New(pkg + ": publisher is closed") }

package adapterkit

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"

	"github.com/postbox-go/postbox/broker"
)

// Running lets one Receive run at a time on a subscriber. The zero value is ready.
type Running struct{ on atomic.Bool }

// Start is how Receive starts: it checks handle and marks a Receive as running, returning done for Receive to
// call when it returns. A nil done means Receive returns err at once: the call is refused (err says why), or
// ctx has already ended (err is nil). pkg is the adapter's package name and busy says why a second Receive
// cannot run (empty for "make one subscriber per Receive").
func (r *Running) Start(ctx context.Context, pkg string, handle broker.DeliveryHandler, busy string) (done func(), err error) {
	if handle == nil {
		return nil, fmt.Errorf("%s: Receive needs a handler; to process through the inbox, use broker.Consume", pkg)
	}
	if busy == "" {
		busy = "make one subscriber per Receive"
	}
	if !r.on.CompareAndSwap(false, true) {
		return nil, fmt.Errorf("%s: Receive is already running on this subscriber; %s", pkg, busy)
	}
	if ctx.Err() != nil {
		r.on.Store(false)
		return nil, nil
	}
	return func() { r.on.Store(false) }, nil
}

// Closed is a publisher's closed flag. The zero value is open.
type Closed struct{ on atomic.Bool }

// Close marks the publisher closed. It returns nil, so that a publisher with nothing else to release can return
// it from its own Close.
func (c *Closed) Close() error {
	c.on.Store(true)
	return nil
}

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

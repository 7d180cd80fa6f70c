// Package postboxtest has helpers for testing code that uses Postbox: a Recorder publisher that keeps what it
// was given and lets a test make it fail, a Subscriber that delivers events to a consumer in memory and records
// how each was settled, and a Clock that moves only when told to.
package postboxtest

import (
	"context"
	"maps"
	"sync"
	"time"

	"github.com/postbox-go/postbox"
)

// Recorder is a Publisher that records every message it acknowledges. Set Fail to make it fail some messages. It
// is safe for concurrent use; the zero value is ready.
type Recorder struct {
	// Fail, if set, is called for each message; a non-nil error fails that message (the others are
	// acknowledged). Wrap it with postbox.Permanent to have the message parked as dead at once.
	Fail func(postbox.Record) error

	mu      sync.Mutex
	records []postbox.Record
	counts  map[string]int
	changed changes
}

// Publish records the batch, or fails the messages Fail rejects.
func (r *Recorder) Publish(ctx context.Context, batch []postbox.Record) error {
	var errs []error
	if r.Fail != nil {
		errs = make([]error, len(batch))
		failed := false
		for i, rec := range batch {
			errs[i] = r.Fail(rec)
			failed = failed || errs[i] != nil
		}
		if !failed {
			errs = nil
		}
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.counts == nil {
		r.counts = map[string]int{}
	}
	for i, rec := range batch {
		if errs == nil || errs[i] == nil {
			r.records = append(r.records, rec)
			r.counts[rec.ID]++
		}
	}
	r.changed.signal()
	if errs != nil {
		return &postbox.BatchError{Errs: errs}
	}
	return nil
}

// Records returns every acknowledged message, in publish order, duplicates included.
func (r *Recorder) Records() []postbox.Record {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]postbox.Record(nil), r.records...)
}

// Counts returns how many times each message ID was acknowledged.
func (r *Recorder) Counts() map[string]int {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := make(map[string]int, len(r.counts))
	maps.Copy(out, r.counts)
	return out
}

// Distinct returns how many different message IDs were acknowledged.
func (r *Recorder) Distinct() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.counts)
}

// WaitDistinct waits until n different message IDs were acknowledged, or timeout passes, or ctx is done, and
// reports whether n were reached.
func (r *Recorder) WaitDistinct(ctx context.Context, n int, timeout time.Duration) bool {
	return r.changed.waitUntil(ctx, &r.mu, timeout, func() bool { return len(r.counts) >= n })
}

package postbox

import (
	"context"
	"fmt"
)

// Publisher sends a batch of records to a broker. The relay calls it with a context bounded by
// RelayConfig.PublishTimeout and one batch at a time per worker.
//
// Return nil when the broker acknowledged every record. When some records failed and others did not, return a
// *BatchError with one entry per record. Any other error fails the whole batch. Wrap an error with Permanent when
// no retry can fix it; the record is then parked as dead at once.
type Publisher interface {
	Publish(ctx context.Context, batch []Record) error
}

// PublisherFunc adapts a function to Publisher.
type PublisherFunc func(ctx context.Context, batch []Record) error

// Publish calls f.
func (f PublisherFunc) Publish(ctx context.Context, batch []Record) error { return f(ctx, batch) }

// BatchError reports per-record results of a batch publish. Errs has one entry per record of the batch, in
// order; a nil entry means the record was published.
type BatchError struct {
	Errs []error
}

func (e *BatchError) Error() string {
	failed, first := 0, error(nil)
	for _, err := range e.Errs {
		if err != nil {
			failed++
			if first == nil {
				first = err
			}
		}
	}
	return fmt.Sprintf("postbox: %d of %d messages failed to publish; first: %v", failed, len(e.Errs), first)
}

// Unwrap returns the per-record errors, so errors.Is and errors.As see them.
func (e *BatchError) Unwrap() []error { return e.Errs }

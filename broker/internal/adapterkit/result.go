package adapterkit

import (
	"context"
	"fmt"
	"iter"
	"log/slog"

	"github.com/postbox-go/postbox"
)

// Result returns nil when every entry of errs is nil, and otherwise a *postbox.BatchError of errs, logging
// each failure at debug level on log (the relay reports them too; the debug line keeps the adapter's view).
func Result(ctx context.Context, log *slog.Logger, errs []error) error {
	failed := false
	for _, err := range errs {
		if err != nil {
			failed = true
			if log != nil {
				log.DebugContext(ctx, "publish failed", "err", err)
			}
		}
	}
	if !failed {
		return nil
	}
	return &postbox.BatchError{Errs: errs}
}

// Messages yields the index of each record of batch, in order, with the broker message build makes of it. It
// skips a record build refuses, setting its entry in errs to build's error marked postbox.Permanent (no retry
// makes the record valid), and every record left once ctx has ended, setting its entry to an error wrapping
// ctx's. pkg is the adapter's package name.
func Messages[T any](ctx context.Context, pkg string, batch []postbox.Record, errs []error, build func(postbox.Record) (T, error)) iter.Seq2[int, T] {
	return func(yield func(int, T) bool) {
		for i, rec := range batch {
			if err := ctx.Err(); err != nil {
				errs[i] = fmt.Errorf("%s: message %s not published: %w", pkg, rec.ID, err)
				continue
			}
			msg, err := build(rec)
			if err != nil {
				errs[i] = postbox.Permanent(err)
				continue
			}
			if !yield(i, msg) {
				return
			}
		}
	}
}

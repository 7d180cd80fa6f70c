package adapterkit

import (
	"context"
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

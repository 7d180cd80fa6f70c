package cli

import (
	"context"
	"errors"
	"log/slog"
	"time"

	"github.com/postbox-go/postbox"
)

// DefaultProgressInterval is the shortest time between two progress lines of a running relay (--progress-interval).
const DefaultProgressInterval = 5 * time.Second

// batchLog is a relay observer that logs one line per batch at debug level, then passes the batch on.
type batchLog struct {
	next postbox.RelayObserver
	log  *slog.Logger
}

func (b batchLog) ObserveBatch(ctx context.Context, r postbox.BatchReport) {
	b.next.ObserveBatch(ctx, r)
	if !b.log.Enabled(ctx, slog.LevelDebug) {
		return
	}
	failed, dead := 0, 0
	for i, err := range r.Errs {
		switch {
		case i < len(r.Dead) && r.Dead[i]:
			dead++
		case err != nil:
			failed++
		}
	}
	attrs := []any{"claimed", len(r.Records), "published", r.Published(), "failed", failed, "dead", dead,
		"took", r.SettledAt.Sub(r.Started).Round(time.Microsecond)}
	if r.Err != nil {
		attrs = append(attrs, "settle_err", r.Err)
	}
	b.log.DebugContext(ctx, "batch", attrs...)
}

// logProgress logs, at most every interval and only when batches were settled since the last line, what the relay
// did meanwhile (published, failed, dead) and where the outbox stands (ready and scheduled messages, and the lag:
// how long the oldest ready message has waited). It returns when ctx is done.
func logProgress(ctx context.Context, log *slog.Logger, interval time.Duration, relay func() postbox.RelayStats,
	outbox func(context.Context) (postbox.Stats, error)) {
	t := time.NewTicker(interval)
	defer t.Stop()
	last := relay()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		now := relay()
		if now.Batches == last.Batches {
			continue // idle: nothing to say
		}
		attrs := []any{"published", now.Published - last.Published, "failed", now.Failed - last.Failed,
			"dead", now.Dead - last.Dead, "batches", now.Batches - last.Batches}
		attrs = append(attrs, destinationAttrs(now)...)
		last = now
		sctx, cancel := context.WithTimeout(ctx, interval)
		s, err := outbox(sctx)
		cancel()
		switch {
		case err == nil:
			lag := time.Duration(0)
			if !s.OldestPending.IsZero() {
				lag = time.Since(s.OldestPending).Round(time.Millisecond)
			}
			attrs = append(attrs, "pending", s.Ready, "scheduled", s.Scheduled, "lag", lag)
		case errors.Is(err, context.Canceled) && ctx.Err() != nil:
			return
		default:
			attrs = append(attrs, "pending", "unknown", "stats_err", err)
		}
		log.Info("relay progress", attrs...)
	}
}

package cli

import (
	"context"
	"errors"
	"log/slog"
	"time"

	"github.com/postbox-go/postbox"
	"github.com/postbox-go/postbox/driver/pgxv5/wal"
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

// relayCounts are the running totals a progress or stop line reports: the table relay's, plus the WAL relay's when
// one runs beside it (--wal), so that the lines count every message the daemon published.
type relayCounts struct {
	published, failed, dead, batches int64
	table                            postbox.RelayStats // the table relay's own, with its destinations' health
	wal                              *wal.Stats         // the WAL relay's own, when it runs
}

// tableCounts reads the table relay's totals.
func tableCounts(r *postbox.Relay) func() relayCounts {
	return func() relayCounts {
		s := r.Stats()
		return relayCounts{published: s.Published, failed: s.Failed, dead: s.Dead, batches: s.Batches, table: s}
	}
}

// withWAL adds the WAL relay's totals to those of table.
func withWAL(table func() relayCounts, w *wal.Relay) func() relayCounts {
	return func() relayCounts {
		c, s := table(), w.Stats()
		c.published, c.failed, c.dead, c.batches = c.published+s.Published, c.failed+s.Failed, c.dead+s.Dead, c.batches+s.Batches
		c.wal = &s
		return c
	}
}

// stopAttrs are the stop line's counts: every message published and parked dead, and the WAL relay's share.
func (c relayCounts) stopAttrs() []any {
	attrs := []any{"published", c.published, "dead", c.dead}
	if c.wal != nil {
		attrs = append(attrs, "wal_published", c.wal.Published, "wal_dead", c.wal.Dead)
	}
	return attrs
}

// logProgress logs, at most every interval and only when batches were settled since the last line, what the relay
// did meanwhile (published, failed, dead, by the table relay and the WAL relay together) and where the outbox
// stands (ready and scheduled messages, and the lag: how long the oldest ready message has waited). With the WAL
// relay, the line adds its share of the published messages and its slot's lag in bytes (as of its last slot
// check): WAL messages are never pending in the table. It returns when ctx is done.
func logProgress(ctx context.Context, log *slog.Logger, interval time.Duration, relay func() relayCounts,
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
		if now.batches == last.batches {
			continue // idle: nothing to say
		}
		attrs := []any{"published", now.published - last.published, "failed", now.failed - last.failed,
			"dead", now.dead - last.dead, "batches", now.batches - last.batches}
		if now.wal != nil && last.wal != nil {
			attrs = append(attrs, "wal_published", now.wal.Published-last.wal.Published, "wal_lag_bytes", now.wal.Slot.LagBytes)
		}
		attrs = append(attrs, destinationAttrs(now.table)...)
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

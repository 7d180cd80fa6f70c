package bench

import (
	"context"
	"runtime/debug"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/postbox-go/postbox"
)

// benchRelay drains a backlog to a publisher that acknowledges at once, against the SQL-only drain of the same
// rows: one DELETE ... RETURNING per batch, which is the least work any relay on this table shape can do. Where
// the client library pipelines (pgx), a third drain does the relay's own round trips in plain SQL (see
// conns.txDrain): each batch's DELETE held in a transaction until its rows are read, as a relay must hold it
// until the broker has them. Its rate, protocol_per_s, bounds any relay that keeps that promise, and
// protocol_ratio is the relay's rate against it.
func benchRelay[TTx any](ctx context.Context, t *target[TTx], o Options) (Result, error) {
	const rawTable, txTable = "bench_relay_raw", "bench_relay_tx"
	d, err := prepareDrain(ctx, t, o, o.workers(false)+2, "bench_relay", rawTable, noopPublisher)
	if err != nil {
		return Result{}, err
	}
	defer d.close()
	c, relay := d.conns, d.relay
	contestants := []func(int64, bool) (int64, time.Duration, error){
		timed(func(share int64, last bool) (int64, error) {
			return relayShare(ctx, relay, share, int64(o.Events), last)
		}),
		timed(func(share int64, last bool) (int64, error) {
			return sqlDrain(ctx, t, c, rawTable, o, share, last)
		}),
	}
	if c.txDrain != nil {
		if _, err := newOutbox(ctx, t, c, txTable, o.clientConfig()); err != nil {
			return Result{}, err
		}
		defer dropOutbox(context.WithoutCancel(ctx), t, c, txTable)
		if err := copyTable(ctx, t, c, rawTable, txTable); err != nil {
			return Result{}, err
		}
		if err := settle(ctx, t, c, txTable); err != nil {
			return Result{}, err
		}
		contestants = append(contestants, timed(func(share int64, last bool) (int64, error) {
			return protocolDrain(ctx, t, c, txTable, o, share, last)
		}))
	}
	o.Logger.Info("draining with SQL only and with the relay, in turns", "events", o.Events)
	debug.FreeOSMemory() // the backlog's messages were built in this process; count the relay's memory only
	rss := sampleRSS()
	rates, err := interleave(o.Turns, int64(o.Events), contestants...)
	peak := rss.Stop()
	if err != nil {
		return Result{}, err
	}
	res := newResult(rates[0], rates[1])
	if len(rates) > 2 {
		res.Extra["protocol_per_s"] = rates[2]
		res.Extra["protocol_ratio"] = rates[0] / rates[2]
		res.Extra["protocol_baseline_ratio"] = rates[2] / rates[1]
	}
	res.Extra["rss_mib"] = peak
	res.Extra["batch_size"] = float64(o.BatchSize)
	res.Extra["workers"] = float64(o.workers(false))
	return res, nil
}

// drainSetup is what a drain scenario runs on: a loaded backlog in table and its copy in rawTable, reached through
// conns, and a relay on table with connections of its own.
type drainSetup[TTx any] struct {
	conns *conns[TTx]
	relay *postbox.Relay
	close func()
}

// prepareDrain opens n connections, loads the backlog into table and rawTable (see loadBacklog) and makes a relay
// to pub on table through connections of its own (see openRelay). close drops both tables and closes every
// connection; on an error, what was made is undone before prepareDrain returns.
func prepareDrain[TTx any](ctx context.Context, t *target[TTx], o Options, n int, table, rawTable string, pub postbox.Publisher) (*drainSetup[TTx], error) {
	c, err := t.open(ctx, n)
	if err != nil {
		return nil, err
	}
	undo := []func(){c.close}
	cleanup := func() {
		for i := len(undo) - 1; i >= 0; i-- {
			undo[i]()
		}
	}
	client, err := loadBacklog(ctx, t, c, o, o.clientConfig(), table, rawTable)
	if err != nil {
		cleanup()
		return nil, err
	}
	undo = append(undo,
		func() { dropOutbox(context.WithoutCancel(ctx), t, c, table) },
		func() { dropOutbox(context.WithoutCancel(ctx), t, c, rawTable) })
	relay, rc, err := openRelay(ctx, t, client, pub, o)
	if err != nil {
		cleanup()
		return nil, err
	}
	undo = append(undo, rc.close)
	return &drainSetup[TTx]{conns: c, relay: relay, close: cleanup}, nil
}

// openRelay opens connections for a relay on client's tables (as many as its workers, and two more) and makes the
// relay to pub through them (see newRelay). The caller closes the connections; on an error they are closed already.
func openRelay[TTx any](ctx context.Context, t *target[TTx], client *postbox.Client[TTx], pub postbox.Publisher, o Options) (*postbox.Relay, *conns[TTx], error) {
	rc, err := t.open(ctx, o.workers(client.Config().Ordered)+2)
	if err != nil {
		return nil, nil, err
	}
	relay, err := newRelay(rc, client, pub, o, nil)
	if err != nil {
		rc.close()
		return nil, nil, err
	}
	return relay, rc, nil
}

// backgroundRelay is a relay running in the background on connections of its own.
type backgroundRelay[TTx any] struct {
	*postbox.Relay
	conns   *conns[TTx]
	cancel  context.CancelFunc
	done    chan error
	err     error
	stopped bool
}

// startRelay opens a relay to pub on client's tables (see openRelay) and runs it in the background until stop or
// close.
func startRelay[TTx any](ctx context.Context, t *target[TTx], client *postbox.Client[TTx], pub postbox.Publisher, o Options) (*backgroundRelay[TTx], error) {
	relay, rc, err := openRelay(ctx, t, client, pub, o)
	if err != nil {
		return nil, err
	}
	rctx, cancel := context.WithCancel(ctx)
	r := &backgroundRelay[TTx]{Relay: relay, conns: rc, cancel: cancel, done: make(chan error, 1)}
	go func() { r.done <- relay.Run(rctx) }()
	return r, nil
}

// stop ends the relay's run and returns the error it ended with; calling it again returns the same error.
func (r *backgroundRelay[TTx]) stop() error {
	if !r.stopped {
		r.cancel()
		r.err = <-r.done
		r.stopped = true
	}
	return r.err
}

// close stops the relay if it still runs and closes its connections.
func (r *backgroundRelay[TTx]) close() {
	r.stop()
	r.conns.close()
}

// loadBacklog makes table and rawTable with cfg, fills table with o.Events pending events and rawTable with a copy
// of them, vacuums and analyses both, and returns a client on table.
func loadBacklog[TTx any](ctx context.Context, t *target[TTx], c *conns[TTx], o Options, cfg postbox.Config, table, rawTable string) (*postbox.Client[TTx], error) {
	client, err := newOutbox(ctx, t, c, table, cfg)
	if err != nil {
		return nil, err
	}
	if _, err := newOutbox(ctx, t, c, rawTable, cfg); err != nil {
		return nil, err
	}
	o.Logger.Info("loading backlog", "events", o.Events)
	if err := preload(ctx, client, o); err != nil {
		return nil, err
	}
	if err := copyTable(ctx, t, c, table, rawTable); err != nil {
		return nil, err
	}
	return client, settle(ctx, t, c, table, rawTable)
}

// newRelay returns a relay on client's tables through the pool rc, with the options' batch size and workers.
func newRelay[TTx any](rc *conns[TTx], client *postbox.Client[TTx], pub postbox.Publisher, o Options, change func(*postbox.RelayConfig)) (*postbox.Relay, error) {
	rclient, err := sameClient(rc, client, nil)
	if err != nil {
		return nil, err
	}
	cfg := postbox.RelayConfig{BatchSize: o.BatchSize, Workers: o.Workers, RecheckDelay: o.RecheckDelay, Logger: o.Logger}
	if change != nil {
		change(&cfg)
	}
	return postbox.NewRelay(rclient, pub, &cfg)
}

// deleteBatch is the SQL-only drain's statement: one DELETE ... RETURNING of a batch of table's pending rows.
func deleteBatch[TTx any](t *target[TTx], table string, o Options) string {
	// The limit is a literal: as a parameter, PostgreSQL's generic plan for the cached statement guesses a large
	// batch and hash-joins the whole table, which would make this baseline slower than it needs to be.
	inner := "SELECT id FROM " + table + " WHERE status = 'pending' AND available_at <= " + t.ph(1) + " ORDER BY id LIMIT " +
		strconv.Itoa(o.BatchSize)
	if t.dialect == "postgres" {
		inner += " FOR UPDATE SKIP LOCKED"
	}
	return "DELETE FROM " + table + " WHERE id IN (" + inner + ") RETURNING " + recordCols(t.dialect)
}

// sqlDrain deletes at least n rows of table, or all when last, with one DELETE ... RETURNING per batch (or, where
// the database has none, conns.claimDelete) from as many connections as the relay has workers, reading every
// column the relay reads, and returns how many it deleted.
func sqlDrain[TTx any](ctx context.Context, t *target[TTx], c *conns[TTx], table string, o Options, n int64, last bool) (int64, error) {
	q := deleteBatch(t, table, o)
	batch := func() (int, error) { return c.readRecords(ctx, q, t.now()) }
	if c.claimDelete != nil {
		batch = func() (int, error) { return c.claimDelete(ctx, table, o.BatchSize) }
	}
	var total atomic.Int64
	err := inParallel(o.workers(false), func() error {
		for total.Load() < n || last {
			got, err := batch()
			if err != nil || got == 0 {
				return err
			}
			total.Add(int64(got))
		}
		return nil
	})
	return total.Load(), err
}

// protocolDrain is sqlDrain with the relay's round trips (see conns.txDrain): from as many connections as the
// relay has workers, each deletes batches in transactions committed with the next batch's claim.
func protocolDrain[TTx any](ctx context.Context, t *target[TTx], c *conns[TTx], table string, o Options, n int64, last bool) (int64, error) {
	var total atomic.Int64
	more := func(deleted int) bool {
		return deleted > 0 && (total.Add(int64(deleted)) < n || last)
	}
	err := inParallel(o.workers(false), func() error { return c.txDrain(ctx, deleteBatch(t, table, o), more, t.now()) })
	return total.Load(), err
}

// relayShare runs relay until it has published share more messages, or all total when last, and returns how many
// it published.
func relayShare(ctx context.Context, relay *postbox.Relay, share, total int64, last bool) (int64, error) {
	before := relay.Stats().Published
	target := min(before+share, total)
	if last {
		target = total
	}
	if target <= before {
		return 0, nil
	}
	if _, err := drain(ctx, relay, target); err != nil {
		return 0, err
	}
	return relay.Stats().Published - before, nil
}

// now is the current time as the dialect stores it.
func (t *target[TTx]) now() any {
	if t.dialect == "postgres" {
		return time.Now().UTC()
	}
	return time.Now().UnixMicro()
}

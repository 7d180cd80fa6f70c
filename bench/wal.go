package bench

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/postbox-go/postbox"
	"github.com/postbox-go/postbox/chaos"
	"github.com/postbox-go/postbox/driver"
	"github.com/postbox-go/postbox/driver/pgxv5"
	"github.com/postbox-go/postbox/driver/pgxv5/wal"
)

// The wal scenario compares the WAL mode (package wal: enqueue with pg_logical_emit_message, relay from a
// logical replication slot) with the table mode on the same PostgreSQL cluster, which needs wal_level = logical:
// Options.WALURL, or a cluster the scenario makes with initdb in a temporary directory and removes after.
//
//	events_per_s / baseline_per_s   a business transaction with one Enqueue, WAL mode against table mode
//	batch_*                         EnqueueBatch of 100, WAL against table
//	wal_drain_per_s, table_drain_per_s   draining a backlog of Options.Events to a no-op publisher
//	wal_p50_ms ... table_p99_ms     commit-to-ack latency at Options.Rate for Options.Duration
//	outage_retained_mib             WAL the slot kept after an outage of Options.WALOutage with producers at
//	                                Options.Rate, and outage_catchup_s, the time the relay then took to publish it

const walTables = "bench_wal"

// walDefaultOutage is the relay outage of the wal scenario: ten times Options.Duration (60 s by default).
func (o Options) walOutage() time.Duration {
	if o.WALOutage > 0 {
		return o.WALOutage
	}
	return 10 * o.Duration
}

// walCluster returns the URL of a cluster with wal_level = logical: Options.WALURL, or one it makes with initdb,
// which closing removes.
func walCluster(ctx context.Context, o Options) (url string, closing func(), err error) {
	if o.WALURL != "" {
		return o.WALURL, func() {}, nil
	}
	o.Logger.Info("starting a PostgreSQL cluster with wal_level = logical")
	cluster, err := chaos.NewPGCluster(ctx, "wal_level = logical", "max_wal_senders = 10", "max_replication_slots = 10",
		"shared_buffers = 256MB")
	if err != nil {
		return "", nil, err
	}
	return cluster.URL("postgres"), func() { _ = cluster.Close() }, nil
}

// walSetup opens a pool on a cluster with wal_level = logical (see walCluster), checks that the WAL mode can run
// there, and returns the client configuration of the scenarios' tables; closing closes the pool and the cluster.
func walSetup(ctx context.Context, o Options) (url string, pool *pgxpool.Pool, cfg postbox.Config, closing func(), err error) {
	url, stop, err := walCluster(ctx, o)
	if err != nil {
		return "", nil, cfg, nil, err
	}
	if pool, err = pgxpool.New(ctx, url); err != nil {
		stop()
		return "", nil, cfg, nil, err
	}
	closing = func() {
		pool.Close()
		stop()
	}
	if err := wal.Check(ctx, pool); err != nil {
		closing()
		return "", nil, cfg, nil, fmt.Errorf("--wal-url: %w", err)
	}
	cfg = o.clientConfig()
	cfg.Table, cfg.InboxTable = walTables+"_outbox", walTables+"_inbox"
	return url, pool, cfg, closing, nil
}

func benchWAL(ctx context.Context, o Options) (Result, error) {
	_, pool, cfg, closing, err := walSetup(ctx, o)
	if err != nil {
		return Result{}, err
	}
	defer closing()
	table, err := postbox.NewClient(pgxv5.New(pool), &cfg)
	if err != nil {
		return Result{}, err
	}
	walClient, err := postbox.NewClient(walDriver(pool), &cfg)
	if err != nil {
		return Result{}, err
	}
	if _, err := table.Migrate(ctx); err != nil {
		return Result{}, err
	}
	if _, err := pool.Exec(ctx, "CREATE TABLE IF NOT EXISTS "+domainTable+" (id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,"+
		" customer text NOT NULL, amount bigint NOT NULL, created_at timestamptz NOT NULL DEFAULT now())"); err != nil {
		return Result{}, err
	}
	slot := wal.SlotName(driver.Names{Outbox: cfg.Table})
	if err := wal.CreateSlot(ctx, pool, slot); err != nil {
		return Result{}, err
	}
	defer func() {
		_, _ = wal.DropSlot(context.WithoutCancel(ctx), pool, slot)
		_, _ = pool.Exec(context.WithoutCancel(ctx), "DROP TABLE IF EXISTS "+domainTable)
	}()

	// Producers: one business insert and one Enqueue per transaction, through either client.
	with := func(c *postbox.Client[pgx.Tx]) func(ctx context.Context, i int64) error {
		return func(ctx context.Context, i int64) error {
			return c.InTx(ctx, func(ctx context.Context, tx pgx.Tx) error {
				if _, err := tx.Exec(ctx, "INSERT INTO "+domainTable+" (customer, amount) VALUES ($1, $2)", "customer-"+strconv.FormatInt(i, 10), i); err != nil {
					return err
				}
				_, err := c.Enqueue(ctx, tx, o.message(int(i)))
				return err
			})
		}
	}
	batch := func(c *postbox.Client[pgx.Tx]) func(ctx context.Context, i int64) error {
		return func(ctx context.Context, i int64) error {
			msgs := o.messages(int(i)*enqueueBatch, enqueueBatch)
			return c.InTx(ctx, func(ctx context.Context, tx pgx.Tx) error { return c.EnqueueBatch(ctx, tx, msgs) })
		}
	}
	// The enqueue phase leaves WAL messages and rows behind: a relay of each kind takes them away first.
	o.Logger.Info("wal: single enqueue", "clients", o.Clients)
	rates, err := compare(ctx, o.Clients, o.Duration, with(walClient), with(table))
	if err != nil {
		return Result{}, err
	}
	res := newResult(rates[0], rates[1])
	o.Logger.Info("wal: batch enqueue", "clients", o.Clients)
	if rates, err = compare(ctx, o.Clients, o.Duration, batch(walClient), batch(table)); err != nil {
		return Result{}, err
	}
	res.Extra["batch_events_per_s"] = rates[0] * enqueueBatch
	res.Extra["batch_baseline_per_s"] = rates[1] * enqueueBatch
	res.Extra["batch_ratio"] = rates[0] / rates[1]
	res.Extra["clients"] = float64(o.Clients)
	if err := walEmpty(ctx, o, pool, table, walClient, slot); err != nil {
		return Result{}, err
	}

	// Drain a backlog.
	o.Logger.Info("wal: drain", "events", o.Events)
	if err := preload(ctx, walClient, o); err != nil {
		return Result{}, err
	}
	var acked atomic.Int64
	counting := postbox.PublisherFunc(func(_ context.Context, b []postbox.Record) error { acked.Add(int64(len(b))); return nil })
	wr, err := wal.NewRelay(pool, walClient, counting, o.walRelayConfig())
	if err != nil {
		return Result{}, err
	}
	d, err := runUntil(ctx, wr.Run, func() bool { return acked.Load() >= int64(o.Events) })
	if err != nil {
		return Result{}, fmt.Errorf("WAL relay drain: %w", err)
	}
	res.Extra["wal_drain_per_s"] = float64(o.Events) / d.Seconds()
	if err := preload(ctx, table, o); err != nil {
		return Result{}, err
	}
	tr, err := postbox.NewRelay(table, noopPublisher, &postbox.RelayConfig{BatchSize: o.BatchSize, Workers: o.workers(false), Logger: o.Logger})
	if err != nil {
		return Result{}, err
	}
	if d, err = drain(ctx, tr, int64(o.Events)); err != nil {
		return Result{}, fmt.Errorf("table relay drain: %w", err)
	}
	res.Extra["table_drain_per_s"] = float64(o.Events) / d.Seconds()
	res.Extra["drain_ratio"] = res.Extra["wal_drain_per_s"] / res.Extra["table_drain_per_s"]

	// Commit-to-ack latency at a steady rate.
	for _, mode := range []string{"wal", "table"} {
		o.Logger.Info("wal: latency", "mode", mode, "rate", o.Rate)
		c := table
		if mode == "wal" {
			c = walClient
		}
		lat, err := walLatency(ctx, o, pool, c, mode == "wal")
		if err != nil {
			return Result{}, err
		}
		res.Extra[mode+"_p50_ms"] = ms(quantile(lat, 0.5))
		res.Extra[mode+"_p99_ms"] = ms(quantile(lat, 0.99))
		res.Extra[mode+"_max_ms"] = ms(lat[len(lat)-1])
	}

	// WAL kept by the slot while no relay reads it.
	outage := o.walOutage()
	o.Logger.Info("wal: relay outage", "outage", outage, "rate", o.Rate)
	before, err := wal.ReadSlot(ctx, pool, slot)
	if err != nil {
		return Result{}, err
	}
	n, err := produceAtRate(ctx, o.Rate, outage, 4, func(ctx context.Context, seq int) error {
		return walClient.InTx(ctx, func(ctx context.Context, tx pgx.Tx) error {
			_, err := walClient.Enqueue(ctx, tx, o.message(seq))
			return err
		})
	})
	if err != nil {
		return Result{}, err
	}
	after, err := wal.ReadSlot(ctx, pool, slot)
	if err != nil {
		return Result{}, err
	}
	res.Extra["outage_s"] = outage.Seconds()
	res.Extra["outage_events"] = float64(n)
	res.Extra["outage_retained_mib"] = float64(after.RetainedBytes) / (1 << 20)
	res.Extra["outage_retained_growth_mib"] = float64(after.RetainedBytes-before.RetainedBytes) / (1 << 20)
	acked.Store(0)
	wr, err = wal.NewRelay(pool, walClient, counting, o.walRelayConfig())
	if err != nil {
		return Result{}, err
	}
	if d, err = runUntil(ctx, wr.Run, func() bool { return acked.Load() >= n }); err != nil {
		return Result{}, fmt.Errorf("WAL relay catch-up: %w", err)
	}
	res.Extra["outage_catchup_s"] = d.Seconds()
	return res, nil
}

func (o Options) walRelayConfig() *wal.RelayConfig {
	return &wal.RelayConfig{BatchSize: o.BatchSize, Logger: o.Logger, StatusInterval: time.Second, Secret: benchWALSecret}
}

// benchWALSecret signs the scenarios' WAL messages, as a deployment's would: the cost of the tag is measured with
// the rest, and a relay on a cluster where PUBLIC may execute pg_logical_emit_message runs only with a secret.
var benchWALSecret = []byte("postbox-bench-wal-secret-0123456789abcdef")

// walDriver returns the WAL driver of the scenarios' clients, signing with benchWALSecret.
func walDriver(pool *pgxpool.Pool) *wal.Driver {
	d, err := wal.NewWithConfig(pool, &wal.Config{Secret: benchWALSecret})
	if err != nil {
		panic(err) // benchWALSecret is long enough
	}
	return d
}

// walEmpty publishes, and so removes, what the enqueue phase left in the WAL and in the outbox.
func walEmpty(ctx context.Context, o Options, pool *pgxpool.Pool, table, walClient *postbox.Client[pgx.Tx], slot string) error {
	tr, err := postbox.NewRelay(table, noopPublisher, &postbox.RelayConfig{BatchSize: o.BatchSize, Logger: o.Logger})
	if err != nil {
		return err
	}
	if _, err := runUntil(ctx, tr.Run, func() bool {
		st, err := table.Stats(ctx)
		return err == nil && st.Pending == 0
	}); err != nil {
		return err
	}
	var current string
	if err := pool.QueryRow(ctx, "SELECT pg_current_wal_lsn()::text").Scan(&current); err != nil {
		return err
	}
	wr, err := wal.NewRelay(pool, walClient, noopPublisher, o.walRelayConfig())
	if err != nil {
		return err
	}
	_, err = runUntil(ctx, wr.Run, func() bool {
		var behind bool
		err := pool.QueryRow(ctx, "SELECT confirmed_flush_lsn < $1::pg_lsn FROM pg_replication_slots WHERE slot_name = $2", current, slot).Scan(&behind)
		return err == nil && !behind
	})
	return err
}

// runUntil runs run until done reports true, checked every millisecond, and returns how long that took.
func runUntil(ctx context.Context, run func(context.Context) error, done func() bool) (time.Duration, error) {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	stopped := make(chan error, 1)
	start := time.Now()
	go func() { stopped <- run(ctx) }()
	tick := time.NewTicker(time.Millisecond)
	defer tick.Stop()
	limit := time.NewTimer(5 * time.Minute)
	defer limit.Stop()
	for {
		select {
		case err := <-stopped:
			return 0, fmt.Errorf("stopped early: %v", err)
		case <-limit.C:
			cancel()
			<-stopped
			return 0, errors.New("not done within 5 minutes")
		case <-tick.C:
		}
		if done() {
			elapsed := time.Since(start)
			cancel()
			return elapsed, <-stopped
		}
	}
}

// walLatency feeds c at o.Rate for o.Duration while a relay of the client's mode publishes, and returns the
// sorted commit-to-ack latencies.
func walLatency(ctx context.Context, o Options, pool *pgxpool.Pool, c *postbox.Client[pgx.Tx], walMode bool) ([]time.Duration, error) {
	lat := newLatencies(time.Now().Add(o.Duration / 6)) // the first sixth warms up
	pub := postbox.PublisherFunc(func(_ context.Context, b []postbox.Record) error {
		now := time.Now()
		for _, r := range b {
			lat.acked(r.ID, now)
		}
		return nil
	})
	var run func(context.Context) error
	if walMode {
		r, err := wal.NewRelay(pool, c, pub, o.walRelayConfig())
		if err != nil {
			return nil, err
		}
		run = r.Run
	} else {
		r, err := postbox.NewRelay(c, pub, &postbox.RelayConfig{BatchSize: o.BatchSize, Workers: o.workers(false), Logger: o.Logger})
		if err != nil {
			return nil, err
		}
		run = r.Run
	}
	rctx, stop := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- run(rctx) }()
	if walMode {
		// The slot reads all the cluster's WAL since its confirmed position, the table mode's rows of the
		// earlier phases included: measure from when the relay has caught up.
		if err := caughtUp(ctx, pool, wal.SlotName(driver.Names{Outbox: c.Config().Table})); err != nil {
			stop()
			<-done
			return nil, err
		}
	}
	_, err := produceAtRate(ctx, o.Rate, o.Duration, 4, func(ctx context.Context, seq int) error {
		var id string
		err := c.InTx(ctx, func(ctx context.Context, tx pgx.Tx) (err error) {
			id, err = c.Enqueue(ctx, tx, o.message(seq))
			return err
		})
		if err == nil {
			lat.committed(id, time.Now())
		}
		return err
	})
	if err == nil && !lat.waitDelivered(ctx, 30*time.Second) {
		err = fmt.Errorf("%d messages never acknowledged", lat.pending())
	}
	stop()
	if rerr := <-done; err == nil {
		err = rerr
	}
	if err != nil {
		return nil, err
	}
	d := lat.sorted()
	if len(d) == 0 {
		return nil, errors.New("no latency measured")
	}
	return d, nil
}

// caughtUp waits until slot has confirmed the WAL position current when it is called.
func caughtUp(ctx context.Context, pool *pgxpool.Pool, slot string) error {
	var current string
	if err := pool.QueryRow(ctx, "SELECT pg_current_wal_lsn()::text").Scan(&current); err != nil {
		return err
	}
	deadline := time.Now().Add(time.Minute)
	for {
		var behind bool
		err := pool.QueryRow(ctx, "SELECT confirmed_flush_lsn < $1::pg_lsn FROM pg_replication_slots WHERE slot_name = $2", current, slot).Scan(&behind)
		if err != nil || !behind {
			return err
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("slot %s has not reached %s within a minute", slot, current)
		}
		if !pause(ctx, 10*time.Millisecond) {
			return ctx.Err()
		}
	}
}

// benchXminWAL is the xmin scenario (see benchXmin) in the WAL mode, on a cluster with wal_level = logical (see
// walCluster): messages are WAL records, not rows, so a held xmin horizon leaves nothing for the relay to walk
// past, and the outbox table stays empty.
func benchXminWAL(ctx context.Context, o Options) (Result, error) {
	url, pool, cfg, closing, err := walSetup(ctx, o)
	if err != nil {
		return Result{}, err
	}
	defer closing()
	client, err := postbox.NewClient(walDriver(pool), &cfg)
	if err != nil {
		return Result{}, err
	}
	if _, err := client.Migrate(ctx); err != nil {
		return Result{}, err
	}
	slot := wal.SlotName(driver.Names{Outbox: cfg.Table})
	if err := wal.CreateSlot(ctx, pool, slot); err != nil {
		return Result{}, err
	}
	defer func() { _, _ = wal.DropSlot(context.WithoutCancel(ctx), pool, slot) }()
	return measureXmin(ctx, o, xminMode{
		url: url, table: cfg.Table,
		enqueue: func(ctx context.Context, seq int) error {
			return client.InTx(ctx, func(ctx context.Context, tx pgx.Tx) error {
				_, err := client.Enqueue(ctx, tx, o.message(seq))
				return err
			})
		},
		start: func(ctx context.Context, pub postbox.Publisher) (func() error, error) {
			r, err := wal.NewRelay(pool, client, pub, o.walRelayConfig())
			if err != nil {
				return nil, err
			}
			rctx, cancel := context.WithCancel(ctx)
			done := make(chan error, 1)
			go func() { done <- r.Run(rctx) }()
			return func() error {
				cancel()
				return <-done
			}, nil
		},
	})
}

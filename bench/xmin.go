package bench

import (
	"context"
	"errors"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/postbox-go/postbox"
)

// xminProducers is the number of producers of the xmin scenario; one event per transaction at Options.Rate.
const xminProducers = 8

// benchXmin runs a relay fed at Options.Rate events per second, one per transaction, for Options.XminHold twice:
// first with nothing else running (the baseline), then while another session sits idle in a REPEATABLE READ
// transaction that has taken its snapshot, which holds back the xmin horizon: no row deleted after the snapshot
// can be vacuumed, nor its index entries marked dead, so every claim walks past all the rows published since.
// events_per_s and baseline_per_s are the rates at which the relay published each phase's events (from the
// phase's start to the last publish); the latency of each event is from its scheduled send time (see
// benchLatencyLoad). The dead tuples of the outbox and the size of its indexes are read before and after each
// phase, the hold still on; with the pgstattuple extension, also the index entries.
func benchXmin[TTx any](ctx context.Context, t *target[TTx], o Options) (Result, error) {
	if t.dialect != "postgres" {
		return Result{Skipped: "the xmin horizon is PostgreSQL's"}, nil
	}
	const table = "bench_xmin"
	url, err := ensurePostgres(ctx, o.URL)
	if err != nil {
		return Result{}, err
	}
	c, err := t.open(ctx, xminProducers+2)
	if err != nil {
		return Result{}, err
	}
	defer c.close()
	client, err := newOutbox(ctx, t, c, table, o.clientConfig())
	if err != nil {
		return Result{}, err
	}
	defer dropOutbox(context.WithoutCancel(ctx), t, c, table)
	return measureXmin(ctx, o, xminMode{
		url: url, table: table,
		enqueue: func(ctx context.Context, seq int) error {
			return client.InTx(ctx, func(ctx context.Context, tx TTx) error {
				_, err := client.Enqueue(ctx, tx, o.message(seq))
				return err
			})
		},
		start: func(ctx context.Context, pub postbox.Publisher) (func() error, error) {
			relay, err := startRelay(ctx, t, client, pub, o)
			if err != nil {
				return nil, err
			}
			return func() error {
				defer relay.close()
				return relay.stop()
			}, nil
		},
	})
}

// xminMode is what the xmin scenario measures: producers enqueueing through enqueue, one event per call, and the
// relay start starts, publishing to pub until the function it returns stops it, on the outbox table of the
// PostgreSQL cluster at url.
type xminMode struct {
	url, table string
	enqueue    func(ctx context.Context, seq int) error
	start      func(ctx context.Context, pub postbox.Publisher) (stop func() error, err error)
}

// measureXmin runs the free and the held phase of the xmin scenario (see benchXmin) in mode.
func measureXmin(ctx context.Context, o Options, mode xminMode) (Result, error) {
	// Two sessions of their own: one reads the table's figures, the other holds the snapshot.
	stats, err := pgx.Connect(ctx, mode.url)
	if err != nil {
		return Result{}, err
	}
	defer stats.Close(context.WithoutCancel(ctx))
	holder, err := pgx.Connect(ctx, mode.url)
	if err != nil {
		return Result{}, err
	}
	defer holder.Close(context.WithoutCancel(ctx))
	_, extErr := stats.Exec(ctx, "CREATE EXTENSION IF NOT EXISTS pgstattuple")
	if extErr != nil {
		o.Logger.Info("no pgstattuple: index entries are not counted", "err", extErr)
	}

	var cur atomic.Pointer[dueLatencies]
	pub := postbox.PublisherFunc(func(_ context.Context, batch []postbox.Record) error {
		if l := cur.Load(); l != nil {
			l.published(batch, time.Now())
		}
		return nil
	})
	stop, err := mode.start(ctx, pub)
	if err != nil {
		return Result{}, err
	}
	stopped := false
	defer func() {
		if !stopped {
			_ = stop()
		}
	}()

	res := Result{Extra: map[string]float64{}}
	var rates, p99s [2]float64
	for i, held := range []bool{false, true} {
		prefix := "free_"
		if held {
			prefix = "held_"
		}
		if _, err := stats.Exec(ctx, "VACUUM "+mode.table); err != nil {
			return Result{}, err
		}
		before, err := outboxFigures(ctx, stats, mode.table, extErr == nil)
		if err != nil {
			return Result{}, err
		}
		var hold pgx.Tx
		if held {
			if hold, err = holdXmin(ctx, holder); err != nil {
				return Result{}, err
			}
		}
		o.Logger.Info("producing", "rate", o.Rate, "duration", o.XminHold, "xmin_held", held)
		// Each phase numbers its events apart, so that events the free phase left behind are not the held phase's.
		s := newSchedule(o.Rate, 1, o.XminHold)
		base := i * s.total
		lat := newDueLatencies(s, base)
		cur.Store(lat)
		sent, _, err := s.run(ctx, xminProducers, func(ctx context.Context, first, _ int) error {
			return mode.enqueue(ctx, base+first)
		})
		if err == nil && !lat.waitPublished(ctx, int64(sent), time.Minute) {
			// A relay that fell behind is the finding, not a failure: its rate says by how much.
			res.Extra[prefix+"unpublished"] = float64(int64(sent) - lat.count())
			o.Logger.Warn("the relay left events unpublished a minute after the last commit", "xmin_held", held,
				"unpublished", int64(sent)-lat.count(), "of", sent)
		}
		var after outboxStats
		if err == nil {
			after, err = outboxFigures(ctx, stats, mode.table, extErr == nil)
		}
		if hold != nil {
			err = errors.Join(err, hold.Rollback(ctx))
		}
		if err != nil {
			return Result{}, err
		}
		cur.Store(nil)
		d := lat.sorted()
		if len(d) == 0 {
			return Result{}, errors.New("no events measured")
		}
		rates[i] = rate(lat.count(), lat.lastPublished().Sub(s.start))
		p99s[i] = ms(quantile(d, 0.99))
		for name, v := range latencyFigures(d) {
			res.Extra[prefix+name] = v
		}
		before.put(res.Extra, prefix, "_before")
		after.put(res.Extra, prefix, "_after")
	}
	stopped = true
	if err := stop(); err != nil {
		return Result{}, err
	}
	res.EventsPerS, res.BaselinePerS, res.Ratio = rates[1], rates[0], rates[1]/rates[0]
	if p99s[0] > 0 {
		res.Extra["p99_ratio"] = p99s[1] / p99s[0]
	}
	res.Extra["xmin_hold_s"] = o.XminHold.Seconds()
	res.Extra["rate"] = float64(o.Rate)
	return res, nil
}

// holdXmin begins a REPEATABLE READ transaction on conn and takes its snapshot, which then holds back the xmin
// horizon of the whole cluster until the transaction ends.
func holdXmin(ctx context.Context, conn *pgx.Conn) (pgx.Tx, error) {
	tx, err := conn.BeginTx(ctx, pgx.TxOptions{IsoLevel: pgx.RepeatableRead})
	if err != nil {
		return nil, err
	}
	var xmin *string
	err = tx.QueryRow(ctx, "SELECT backend_xmin::text FROM pg_stat_activity WHERE pid = pg_backend_pid()").Scan(&xmin)
	if err == nil && xmin == nil {
		err = errors.New("the holding transaction has no xmin")
	}
	if err != nil {
		return nil, errors.Join(err, tx.Rollback(ctx))
	}
	return tx, nil
}

// outboxStats are the figures of an outbox table that show what vacuum could not remove.
type outboxStats struct {
	deadTuples   int64 // pg_stat_user_tables.n_dead_tup
	indexBytes   int64 // every index of the table
	indexEntries int64 // every index's entries, live or dead (pgstattuple); -1 without the extension
	indexKilled  int64 // the entries of those that scans have marked dead, which no later scan follows; -1 likewise
	// xminAge is the age, in transactions, of the oldest snapshot or slot holding back the cluster's xmin horizon,
	// other sessions' included: a free phase that shows thousands was not free.
	xminAge int64
}

// outboxFigures reads table's figures. The statistics collector hears of a backend's work within a second or
// so, which it waits for first.
func outboxFigures(ctx context.Context, conn *pgx.Conn, table string, pgstattuple bool) (outboxStats, error) {
	pause(ctx, 1500*time.Millisecond)
	s := outboxStats{indexEntries: -1, indexKilled: -1}
	err := conn.QueryRow(ctx, "SELECT coalesce((SELECT n_dead_tup FROM pg_stat_user_tables WHERE relid = $1::regclass), 0),"+
		" (SELECT coalesce(sum(pg_relation_size(indexrelid)), 0)::bigint FROM pg_index WHERE indrelid = $1::regclass),"+
		" greatest((SELECT max(age(backend_xmin)) FROM pg_stat_activity WHERE pid <> pg_backend_pid()),"+
		" (SELECT max(greatest(age(xmin), age(catalog_xmin))) FROM pg_replication_slots),"+
		" (SELECT max(age(transaction)) FROM pg_prepared_xacts), 0)::bigint",
		table).Scan(&s.deadTuples, &s.indexBytes, &s.xminAge)
	if err != nil || !pgstattuple {
		return s, err
	}
	err = conn.QueryRow(ctx, "SELECT coalesce(sum(s.tuple_count + s.dead_tuple_count), 0)::bigint, coalesce(sum(s.dead_tuple_count), 0)::bigint"+
		" FROM pg_index AS i, LATERAL pgstattuple(i.indexrelid) AS s WHERE i.indrelid = $1::regclass", table).Scan(&s.indexEntries, &s.indexKilled)
	return s, err
}

// put adds the figures to extra, named prefix + figure + suffix.
func (s outboxStats) put(extra map[string]float64, prefix, suffix string) {
	extra[prefix+"dead_tup"+suffix] = float64(s.deadTuples)
	extra[prefix+"index_mib"+suffix] = float64(s.indexBytes) / (1 << 20)
	extra[prefix+"index_entries"+suffix] = float64(s.indexEntries)
	extra[prefix+"index_killed"+suffix] = float64(s.indexKilled)
	extra[prefix+"xmin_age"+suffix] = float64(s.xminAge)
}

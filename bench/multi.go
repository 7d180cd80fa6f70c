package bench

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"net/url"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/postbox-go/postbox"
	"github.com/postbox-go/postbox/driver/pgxv5"
)

// Defaults for MultiOptions.
const (
	DefaultMultiSources    = 100
	DefaultMultiRate       = 10
	DefaultMultiDuration   = 20 * time.Second
	DefaultMultiIdleWindow = 20 * time.Second
	// MultiDatabasePrefix names the databases of the multi scenario: postbox_multi_000, postbox_multi_001...
	MultiDatabasePrefix = "postbox_multi_"
)

// MultiOptions configure the multi scenario. The zero value is valid: every field has a default.
type MultiOptions struct {
	// URL is a PostgreSQL URL on the server to measure; its database is where the scenario's databases are
	// created from (postgres works). Default: DefaultPostgresURL's server.
	URL string
	// Sources is the number of databases, postbox_multi_000 and on (see Prefix), each created when missing.
	// Default: 100.
	Sources int
	// Rate is the events per second committed on each source. Default: 10.
	Rate int
	// Duration is how long the producers run. Default: 20s.
	Duration time.Duration
	// IdleWindow is how long the idle relay's statements are counted, in each wake-up mode. Default: 20s.
	IdleWindow time.Duration
	// NotifyInterval is the producers' postbox.Config.NotifyInterval; negative turns their wake-ups off.
	// Default: Postbox's (10ms), so that at the default rate every transaction wakes the relay.
	NotifyInterval time.Duration
	// NoListen makes the relays poll while the producers run, instead of listening for their wake-ups.
	NoListen bool
	// Prefix names the databases: Prefix000, Prefix001... Default: MultiDatabasePrefix.
	Prefix string
	// MaxConns bounds each source's relay pool. Default: 3 (two workers and one more).
	MaxConns int
	// Logger receives progress. Default: discard.
	Logger *slog.Logger
}

func (o MultiOptions) withDefaults() MultiOptions {
	if o.URL == "" {
		o.URL = DefaultPostgresURL
		if env := os.Getenv("POSTBOX_BENCH_POSTGRES"); env != "" {
			o.URL = env
		}
	}
	if o.Sources == 0 {
		o.Sources = DefaultMultiSources
	}
	if o.Rate == 0 {
		o.Rate = DefaultMultiRate
	}
	if o.Duration == 0 {
		o.Duration = DefaultMultiDuration
	}
	if o.IdleWindow == 0 {
		o.IdleWindow = DefaultMultiIdleWindow
	}
	if o.MaxConns == 0 {
		o.MaxConns = 3
	}
	if o.Prefix == "" {
		o.Prefix = MultiDatabasePrefix
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	return o
}

// multiSource is one database of the scenario.
type multiSource struct {
	name          string
	relayPool     *pgxpool.Pool
	producerPool  *pgxpool.Pool
	client, relay *postbox.Client[pgx.Tx]
}

// RunMulti runs the multi scenario: one relay group in this process over Sources PostgreSQL databases on one
// server, each fed Rate events per second, one per transaction, by a producer of its own. It measures the time
// from each commit to the publisher's acknowledgement (a publisher that keeps nothing), then counts the statements
// the idle group sends, listening for wake-ups and then polling only, and reads the process's resident memory.
// The baseline is the same producers committing the same rows into a plain table with no relay running, just
// before: on a loaded machine it says what rate the server could take at all, and the ratio what the relay cost.
// Extra's baseline_notify_per_s is the same with a NOTIFY in every transaction. The result's Extra has the idle
// statements per second per source in each mode, the resident memory in MiB, and the load average.
func RunMulti(ctx context.Context, opts MultiOptions) (Result, error) {
	o := opts.withDefaults()
	if o.Sources < 0 || o.Rate < 0 || o.Duration < 0 || o.IdleWindow < 0 || o.MaxConns < 0 {
		return Result{}, errors.New("bench: multi: Sources, Rate, Duration, IdleWindow and MaxConns must not be negative")
	}
	res := Result{Scenario: "multi", DB: DBPgxV5, Extra: map[string]float64{}}
	load0 := loadAverage()
	relayQueries := &queryCounter{}
	srcs, closeAll, err := openMulti(ctx, o, relayQueries)
	if err != nil {
		return res, err
	}
	defer closeAll()
	lat := newLatencies(time.Now().Add(min(2*time.Second, o.Duration/5)))
	var acked atomic.Int64
	pub := postbox.PublisherFunc(func(_ context.Context, batch []postbox.Record) error {
		now := time.Now()
		acked.Add(int64(len(batch)))
		for _, r := range batch {
			lat.acked(r.ID, now)
		}
		return nil
	})

	// The baseline: the same producers committing the same rows into a plain table, with no relay running.
	o.Logger.Info("producing without Postbox", "sources", o.Sources, "rate_per_source", o.Rate, "duration", o.Duration)
	var commitMu sync.Mutex
	var commits []time.Duration
	cpu0 := cpuSeconds()
	baseline, err := produceMulti(ctx, srcs, o, func(ctx context.Context, s *multiSource, seq int) error {
		start := time.Now()
		err := pgx.BeginFunc(ctx, s.producerPool, func(tx pgx.Tx) error {
			_, err := tx.Exec(ctx, "INSERT INTO bench_multi_plain (topic, key, payload) VALUES ($1, $2, $3)", "multi",
				strconv.Itoa(seq), []byte(`{"seq":`+strconv.Itoa(seq)+`}`))
			return err
		})
		commitMu.Lock()
		commits = append(commits, time.Since(start))
		commitMu.Unlock()
		return err
	})
	if err != nil {
		return res, err
	}
	slices.Sort(commits)
	cpuBaseline := cpuSeconds() - cpu0
	// The same, each transaction also sending a NOTIFY, as an enqueue that wakes the relay does: what the server
	// takes of notifying commits from every database at once.
	o.Logger.Info("producing without Postbox, with a NOTIFY per transaction")
	notifying, err := produceMulti(ctx, srcs, o, func(ctx context.Context, s *multiSource, seq int) error {
		return pgx.BeginFunc(ctx, s.producerPool, func(tx pgx.Tx) error {
			_, err := tx.Exec(ctx, "INSERT INTO bench_multi_plain (topic, key, payload) VALUES ($1, $2, $3)", "multi",
				strconv.Itoa(seq), []byte(`{"seq":`+strconv.Itoa(seq)+`}`))
			if err == nil {
				_, err = tx.Exec(ctx, "SELECT pg_notify('bench_multi_plain', '')")
			}
			return err
		})
	})
	if err != nil {
		return res, err
	}
	res.Extra["baseline_notify_per_s"] = rate(notifying, o.Duration)

	group, stop, err := startMulti(ctx, srcs, pub, o.NoListen)
	if err != nil {
		return res, err
	}
	o.Logger.Info("producing", "sources", o.Sources, "rate_per_source", o.Rate, "duration", o.Duration)
	lat.from = time.Now().Add(min(2*time.Second, o.Duration/5))
	cpu0 = cpuSeconds()
	sent, err := produceMulti(ctx, srcs, o, func(ctx context.Context, s *multiSource, seq int) error {
		var id string
		err := s.client.InTx(ctx, func(ctx context.Context, tx pgx.Tx) (err error) {
			id, err = s.client.Enqueue(ctx, tx, postbox.Message{Topic: "multi", Type: "bench.multi", Key: strconv.Itoa(seq),
				Payload: []byte(`{"seq":` + strconv.Itoa(seq) + `}`)})
			return err
		})
		if err == nil {
			lat.committed(id, time.Now())
		}
		return err
	})
	if err != nil {
		stop()
		return res, err
	}
	if !lat.waitDelivered(ctx, 30*time.Second) {
		stop()
		return res, fmt.Errorf("bench: multi: %d of %d events unpublished 30s after the producers stopped", lat.pending(), sent)
	}
	res.Extra["rss_mib_under_load"] = rssMiB()
	// The process's CPU time over the producing phase, producers included, against the baseline's.
	res.Extra["cpu_s"] = cpuSeconds() - cpu0
	res.Extra["cpu_s_baseline"] = cpuBaseline
	// Let every source fall idle, then count what the group asks the databases.
	pause(ctx, 3*time.Second)
	listenIdle := idleRate(ctx, relayQueries, o)
	var listening int
	for _, st := range group.Stats() {
		if st.Listening {
			listening++
		}
	}
	stop()

	_, stop, err = startMulti(ctx, srcs, pub, true)
	if err != nil {
		return res, err
	}
	pause(ctx, 3*time.Second)
	pollIdle := idleRate(ctx, relayQueries, o)
	stop()

	d := lat.sorted()
	if len(d) == 0 {
		return res, errors.New("bench: multi: no events measured")
	}
	out := newResult(rate(sent, o.Duration), rate(baseline, o.Duration))
	out.Extra["offered_per_s"] = float64(o.Rate * o.Sources)
	if len(commits) > 0 {
		out.Extra["baseline_commit_p99_ms"] = ms(quantile(commits, 0.99))
	}
	out.Scenario, out.DB = res.Scenario, res.DB
	out.Latency = &Latency{P50: quantile(d, 0.50), P99: quantile(d, 0.99), Max: d[len(d)-1], IdleQueriesPerS: listenIdle}
	out.Extra = res.Extra
	out.Extra["sources"] = float64(o.Sources)
	out.Extra["rate_per_source"] = float64(o.Rate)
	out.Extra["measured"] = float64(len(d))
	out.Extra["sources_listening"] = float64(listening)
	out.Extra["idle_statements_per_s_per_source_listen"] = listenIdle / float64(o.Sources)
	out.Extra["idle_statements_per_s_per_source_poll"] = pollIdle / float64(o.Sources)
	out.Extra["rss_mib_idle"] = rssMiB()
	out.Extra["loadavg_1m_start"] = load0
	out.Extra["loadavg_1m_end"] = loadAverage()
	return out, nil
}

// openMulti creates the databases when missing, migrates their outbox, and opens two pools on each: the
// producer's and the relay's, which counts its statements.
func openMulti(ctx context.Context, o MultiOptions, relayQueries pgx.QueryTracer) ([]*multiSource, func(), error) {
	u, err := url.Parse(o.URL)
	if err != nil {
		return nil, nil, fmt.Errorf("bench: multi: URL: %w", err)
	}
	admin, err := pgx.Connect(ctx, o.URL)
	if err != nil {
		return nil, nil, fmt.Errorf("bench: multi: PostgreSQL is not reachable at %s: %w", u.Redacted(), err)
	}
	defer admin.Close(ctx)
	var maxConns int
	var s string
	if err := admin.QueryRow(ctx, "SHOW max_connections").Scan(&s); err == nil {
		maxConns, _ = strconv.Atoi(s)
	}
	// Each source: its relay's pool, its listening connection and its producer's connection.
	if need := o.Sources*(o.MaxConns+2) + 10; maxConns > 0 && need > maxConns {
		return nil, nil, fmt.Errorf("bench: multi: %d sources need up to %d connections and the server allows %d: "+
			"give fewer sources or a server with max_connections = %d or more (docs/PERFORMANCE.md shows one)",
			o.Sources, need, maxConns, need)
	}
	var srcs []*multiSource
	closeAll := func() {
		for _, s := range srcs {
			s.relayPool.Close()
			s.producerPool.Close()
		}
	}
	for i := range o.Sources {
		name := fmt.Sprintf("%s%03d", o.Prefix, i)
		if _, err := admin.Exec(ctx, "CREATE DATABASE "+pgx.Identifier{name}.Sanitize()); err != nil {
			var pgErr *pgconn.PgError
			if !errors.As(err, &pgErr) || pgErr.Code != "42P04" { // 42P04: it exists
				closeAll()
				return nil, nil, fmt.Errorf("bench: multi: create database %s: %w", name, err)
			}
		}
		du := *u
		du.Path = "/" + name
		s := &multiSource{name: name}
		if s.producerPool, err = multiPool(ctx, du.String(), 1, nil); err == nil {
			s.relayPool, err = multiPool(ctx, du.String(), o.MaxConns, relayQueries)
		}
		if err != nil {
			if s.producerPool != nil {
				s.producerPool.Close()
			}
			closeAll()
			return nil, nil, err
		}
		srcs = append(srcs, s)
		cfg := &postbox.Config{Table: "bench_multi"}
		pcfg := *cfg
		pcfg.NotifyInterval, pcfg.DisableNotify = max(o.NotifyInterval, 0), o.NotifyInterval < 0
		if s.client, err = postbox.NewClient(pgxv5.New(s.producerPool), &pcfg); err == nil {
			s.relay, err = postbox.NewClient(pgxv5.New(s.relayPool), cfg)
		}
		if err == nil {
			_, err = s.client.Migrate(ctx)
		}
		if err == nil {
			_, err = s.producerPool.Exec(ctx, "DELETE FROM bench_multi; DROP TABLE IF EXISTS bench_multi_plain; "+
				"CREATE TABLE bench_multi_plain (id bigserial PRIMARY KEY, topic text NOT NULL, key text NOT NULL, payload bytea NOT NULL, "+
				"created_at timestamptz NOT NULL DEFAULT now())")
		}
		if err != nil {
			closeAll()
			return nil, nil, fmt.Errorf("bench: multi: %s: %w", name, err)
		}
	}
	return srcs, closeAll, nil
}

func multiPool(ctx context.Context, raw string, maxConns int, tracer pgx.QueryTracer) (*pgxpool.Pool, error) {
	cfg, err := pgxpool.ParseConfig(raw)
	if err != nil {
		return nil, err
	}
	cfg.MaxConns = int32(maxConns)
	cfg.ConnConfig.Tracer = tracer
	return pgxpool.NewWithConfig(ctx, cfg)
}

// startMulti runs a relay group over srcs, every relay polling only when poll is set, until the returned stop
// is called; stop returns once every relay has stopped.
func startMulti(ctx context.Context, srcs []*multiSource, pub postbox.Publisher, poll bool) (*postbox.RelayGroup, func(), error) {
	group, err := postbox.NewRelayGroup(&postbox.RelayGroupConfig{Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		return nil, nil, err
	}
	for _, s := range srcs {
		r, err := postbox.NewRelay(s.relay, pub, &postbox.RelayConfig{DisableListen: poll})
		if err != nil {
			return nil, nil, err
		}
		if err := group.Add(s.name, r); err != nil {
			return nil, nil, err
		}
	}
	gctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = group.Run(gctx)
	}()
	return group, func() { cancel(); <-done }, nil
}

// produceMulti commits o.Rate events per second on every source for o.Duration, one per transaction, each
// producer starting at a random offset within its period, and returns how many it committed.
func produceMulti(ctx context.Context, srcs []*multiSource, o MultiOptions, commit func(ctx context.Context, s *multiSource, seq int) error) (int64, error) {
	pctx, cancel := context.WithTimeout(ctx, o.Duration)
	defer cancel()
	period := time.Second / time.Duration(o.Rate)
	var sent atomic.Int64
	var wg sync.WaitGroup
	errs := make(chan error, len(srcs))
	for _, s := range srcs {
		wg.Go(func() {
			if !pause(pctx, rand.N(period)) {
				return
			}
			tick := time.NewTicker(period)
			defer tick.Stop()
			for seq := 0; ; seq++ {
				err := commit(pctx, s, seq)
				switch {
				case err == nil:
					sent.Add(1)
				case pctx.Err() != nil:
					return
				default:
					errs <- fmt.Errorf("bench: multi: enqueue on %s: %w", s.name, err)
					return
				}
				select {
				case <-pctx.Done():
					return
				case <-tick.C:
				}
			}
		})
	}
	wg.Wait()
	select {
	case err := <-errs:
		return sent.Load(), err
	default:
	}
	return sent.Load(), ctx.Err()
}

// idleRate counts the relays' statements over o.IdleWindow and returns them per second.
func idleRate(ctx context.Context, c *queryCounter, o MultiOptions) float64 {
	q0 := c.n.Load()
	pause(ctx, o.IdleWindow)
	return float64(c.n.Load()-q0) / o.IdleWindow.Seconds()
}

// rssMiB is the process's resident memory (VmRSS) in MiB; -1 where /proc cannot tell.
func rssMiB() float64 {
	f, err := os.Open("/proc/self/status")
	if err != nil {
		return -1
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if rest, ok := strings.CutPrefix(sc.Text(), "VmRSS:"); ok {
			kb, err := strconv.ParseFloat(strings.TrimSuffix(strings.TrimSpace(rest), " kB"), 64)
			if err != nil {
				return -1
			}
			return kb / 1024
		}
	}
	return -1
}

// loadAverage is the machine's one-minute load average; -1 where /proc cannot tell.
func loadAverage() float64 {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return -1
	}
	f := strings.Fields(string(b))
	if len(f) == 0 {
		return -1
	}
	v, err := strconv.ParseFloat(f[0], 64)
	if err != nil {
		return -1
	}
	return v
}

// cpuSeconds is the user and system CPU time this process has used.
func cpuSeconds() float64 {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano()).Seconds()
}

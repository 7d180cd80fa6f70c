package cli

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/signal"
	"slices"
	"sync"
	"syscall"
	"time"

	"go.opentelemetry.io/otel/attribute"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"

	"github.com/postbox-go/postbox"
	postboxotel "github.com/postbox-go/postbox/otel"
)

// relaySources is a relay serving many sources: a postbox.RelayGroup, and what each source holds beside its
// relay (its database, its brokers when it has routes of its own, its metrics, its progress log and cleaner).
type relaySources struct {
	rt      *runtime
	o       dbOptions
	ro      relayOptions
	reg     *postbox.Registry
	shared  *router
	tp      *sdktrace.TracerProvider
	metrics *relayMetrics
	group   *postbox.RelayGroup

	mu      sync.Mutex
	running map[string]*runningSource
}

// runningSource is one source of a running relay.
type runningSource struct {
	spec    sourceConfig
	db      database
	own     []*brokerConn // brokers of the source's own routes; closed with it
	metrics *postboxotel.Metrics
	stop    context.CancelFunc // stops the progress log and the cleaner
	done    sync.WaitGroup
}

// runSources runs the relay over every source, reloading the config file's sources list on SIGHUP, until ctx is
// done; then every source's in-flight batches settle.
func runSources(ctx context.Context, rt *runtime, o dbOptions, ro relayOptions) error {
	if ro.maxConns == 0 {
		ro.maxConns = defaultMaxConns(ro.cfg, o.ordered)
	}
	specs, err := sourceSpecs(o, ro.dbs, ro.maxConns, rt.file)
	if err != nil {
		return err
	}
	if ro.startTimeout <= 0 {
		return usageErrorf("--start-timeout %v: give a positive duration, such as 10s", ro.startTimeout)
	}
	s := &relaySources{rt: rt, o: o, ro: ro, running: map[string]*runningSource{}}
	if s.reg, err = rt.file.registry(); err != nil {
		return err
	}
	if ro.webhookSecretFrom == "--webhook-secret" {
		rt.log.Warn("--webhook-secret on the command line is visible to other users of this machine (ps, /proc); " +
			"set POSTBOX_WEBHOOK_SECRET or the config file's webhook-secret key instead")
	}
	s.shared = &router{}
	for _, sp := range specs {
		if ro.broker == "" && len(ro.routes) == 0 && sp.Broker == "" && len(sp.Route) == 0 {
			return usageErrorf("source %s has no broker: give --broker, or the source its own broker in the config file", sp.Name)
		}
	}
	if ro.broker != "" || len(ro.routes) > 0 {
		if s.shared, err = openRouter(ctx, rt, ro.broker, ro.routes, s.brokerOptions()); err != nil {
			return err
		}
	}
	defer closeBrokers(context.WithoutCancel(ctx), rt, s.shared.conns())
	if s.tp, err = newTracing(ctx, rt); err != nil {
		return err
	}
	if s.tp != nil {
		traceBrokers(s.shared, s.tp)
		defer func() {
			sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
			defer cancel()
			if err := s.tp.Shutdown(sctx); err != nil {
				rt.log.Warn("flushing trace spans", "err", err)
			}
		}()
	}
	if s.metrics, err = newMeterProvider(rt.log); err != nil {
		return fmt.Errorf("metrics: %w", err)
	}
	defer s.metrics.shutdown(context.WithoutCancel(ctx))
	if s.group, err = postbox.NewRelayGroup(&postbox.RelayGroupConfig{Logger: rt.log}); err != nil {
		return err
	}
	if err := checkBrokers(ctx, s.shared.conns(), ro.startTimeout); err != nil {
		return err
	}
	defer s.closeAll(context.WithoutCancel(ctx))
	for _, err := range s.addAll(ctx, specs) {
		if err != nil {
			return err
		}
	}

	var srv *http.Server
	serveErr := make(chan error, 1)
	if ro.http != "" {
		ln, err := net.Listen("tcp", ro.http)
		if err != nil {
			return fmt.Errorf("--http %s: %w", ro.http, err)
		}
		srv = newHTTPServer(relayHandler(newReadinessOf(s.pingers, rt.log), s.metrics))
		go func() { serveErr <- srv.Serve(ln) }()
		rt.log.Info("serving health and metrics", "addr", ln.Addr().String())
	}
	rt.log.Info("relay started", "sources", len(specs), "brokers", len(s.shared.conns()), "routes", len(s.shared.routes),
		"batch_size", ro.cfg.BatchSize, "db_max_conns", ro.maxConns, "ordered", o.ordered)

	hup := make(chan os.Signal, 1)
	signal.Notify(hup, syscall.SIGHUP)
	defer signal.Stop(hup)
	runCtx, stop := context.WithCancel(ctx)
	defer stop()
	groupDone := make(chan error, 1)
	go func() { groupDone <- s.group.Run(runCtx) }()
	var runErr error
loop:
	for {
		select {
		case runErr = <-groupDone:
			break loop
		case err := <-serveErr:
			stop()
			<-groupDone
			runErr = fmt.Errorf("http server: %w", err)
			break loop
		case <-hup:
			s.reload(runCtx)
		}
	}
	stop()
	var published, dead int64
	for _, st := range s.group.Stats() {
		published, dead = published+st.Published, dead+st.Dead
	}
	rt.log.Info("relay stopping: in-flight batches settled", "published", published, "dead", dead)
	if srv != nil {
		sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
		defer cancel()
		if err := srv.Shutdown(sctx); err != nil && !errors.Is(err, http.ErrServerClosed) {
			rt.log.Warn("http shutdown", "err", err)
		}
	}
	return runErr
}

func (s *relaySources) brokerOptions() brokerOptions {
	return brokerOptions{source: s.ro.source, webhookSecret: s.ro.webhookSecret, webhookSecretFrom: s.ro.webhookSecretFrom,
		reconnect: newReconnectPace(s.ro.cfg.ErrorBackoffMax)}
}

// add opens a source and adds its relay to the group. A source whose tables are not migrated is refused; one
// whose database does not answer is added all the same, and its relay retries until it answers.
func (s *relaySources) add(ctx context.Context, spec sourceConfig) (err error) {
	rt := s.rt
	rt.secrets.addURL(spec.DB)
	rt.secrets.addURL(spec.ListenDB)
	rt.secrets.addURL(spec.Broker)
	for _, r := range spec.Route {
		if _, u, err := parseRoute(r); err == nil {
			rt.secrets.addURL(u)
		}
	}
	log := rt.log.With("source", spec.Name)
	so := spec.options(s.o)
	if err := so.pg.check(spec.DB); err != nil {
		return fmt.Errorf("source %s: %w", spec.Name, err)
	}
	db, err := openDatabase(ctx, spec.DB, so.config(rt, s.reg), so.pg)
	if err != nil {
		return fmt.Errorf("source %s: %w", spec.Name, err)
	}
	src := &runningSource{spec: spec, db: db}
	defer func() {
		if err != nil {
			if src.metrics != nil {
				_ = src.metrics.Close()
			}
			closeBrokers(context.WithoutCancel(ctx), rt, src.own)
			db.Close()
		}
	}()
	cctx, cancel := context.WithTimeout(ctx, s.ro.startTimeout)
	err = so.checkMigrated(cctx, db)
	if err != nil && db.Ping(cctx) != nil {
		log.Warn("source database unreachable at start; its relay retries until it answers", "err", err)
		err = nil
	}
	cancel()
	if err != nil {
		return fmt.Errorf("source %s: %w", spec.Name, err)
	}

	rtr := s.shared
	if spec.Broker != "" || len(spec.Route) > 0 {
		own, err := openRouter(ctx, rt, spec.Broker, spec.Route, s.brokerOptions())
		if err != nil {
			return fmt.Errorf("source %s: %w", spec.Name, err)
		}
		src.own = own.conns()
		if s.tp != nil {
			traceBrokers(own, s.tp)
		}
		if err := checkBrokers(ctx, src.own, s.ro.startTimeout); err != nil {
			return fmt.Errorf("source %s: %w", spec.Name, err)
		}
		// The source's own routes first, then the shared ones; its own broker, else the shared one, for the rest.
		rtr = &router{routes: append(slices.Clone(own.routes), s.shared.routes...), fallback: own.fallback}
		if rtr.fallback == nil {
			rtr.fallback = s.shared.fallback
		}
	}
	if rtr.fallback == nil && len(rtr.routes) == 0 {
		return usageErrorf("source %s has no broker: give --broker, or the source its own broker in the config file", spec.Name)
	}

	stats := func(ctx context.Context) (postbox.Stats, error) {
		ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		defer cancel()
		return db.Stats(ctx)
	}
	if src.metrics, err = postboxotel.NewMetrics(s.metrics.provider, stats,
		postboxotel.WithAttributes(attribute.String("source", spec.Name))); err != nil {
		return fmt.Errorf("source %s: metrics: %w", spec.Name, err)
	}
	cfg := s.ro.cfg
	cfg.Logger, cfg.Observer = log, batchLog{next: src.metrics, log: log}
	if err := configureListen(ctx, rt, so, &cfg); err != nil {
		return fmt.Errorf("source %s: %w", spec.Name, err)
	}
	relay, err := db.NewRelay(rtr, &cfg)
	if err != nil {
		return usageErrorf("source %s: %v", spec.Name, err)
	}
	var cleaner *postbox.Cleaner
	if cfg.KeepPublished {
		cleaner, err = db.NewCleaner(&postbox.CleanupConfig{Retention: s.ro.retention, KeepInbox: true, Logger: log})
		if err != nil {
			return usageErrorf("--retention: %v", err)
		}
	}
	if err := s.group.Add(spec.Name, relay); err != nil {
		return err
	}
	bg, stop := context.WithCancel(context.WithoutCancel(ctx))
	src.stop = stop
	if s.ro.progressEvery > 0 {
		src.done.Go(func() { logProgress(bg, log, s.ro.progressEvery, tableCounts(relay), db.Stats) })
	}
	if cleaner != nil {
		src.done.Go(func() { _ = cleaner.Run(bg) })
	}
	s.mu.Lock()
	s.running[spec.Name] = src
	s.mu.Unlock()
	log.Info("source added", "db", RedactURL(spec.DB), "table", spec.Table, "own_brokers", len(src.own))
	return nil
}

// addConcurrency is how many sources are opened and checked at once: a source whose database does not answer
// costs up to --start-timeout, which the others need not wait for.
const addConcurrency = 8

// addAll adds the sources, several at a time, and returns each one's error.
func (s *relaySources) addAll(ctx context.Context, specs []sourceConfig) []error {
	errs := make([]error, len(specs))
	sem := make(chan struct{}, addConcurrency)
	var wg sync.WaitGroup
	for i, sp := range specs {
		wg.Go(func() {
			sem <- struct{}{}
			defer func() { <-sem }()
			errs[i] = s.add(ctx, sp)
		})
	}
	wg.Wait()
	return errs
}

// remove stops a source's relay, once its in-flight batches settled, and closes what it held.
func (s *relaySources) remove(ctx context.Context, name string) {
	s.mu.Lock()
	src := s.running[name]
	delete(s.running, name)
	s.mu.Unlock()
	if src == nil {
		return
	}
	wait := s.ro.cfg.PublishTimeout + s.ro.cfg.SettleTimeout + 5*time.Second
	rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), wait)
	defer cancel()
	if err := s.group.Remove(rctx, name); err != nil && !errors.Is(err, postbox.ErrUnknownSource) {
		s.rt.log.Warn("removing source", "source", name, "err", err)
	}
	s.release(ctx, src)
	s.rt.log.Info("source removed: in-flight batches settled", "source", name)
}

// release closes what a stopped source held.
func (s *relaySources) release(ctx context.Context, src *runningSource) {
	src.stop()
	src.done.Wait()
	if err := src.metrics.Close(); err != nil {
		s.rt.log.Warn("metrics of a removed source", "source", src.spec.Name, "err", err)
	}
	closeBrokers(context.WithoutCancel(ctx), s.rt, src.own)
	src.db.Close()
}

// closeAll releases every source, after the group stopped.
func (s *relaySources) closeAll(ctx context.Context) {
	s.mu.Lock()
	srcs := s.running
	s.running = map[string]*runningSource{}
	s.mu.Unlock()
	for _, src := range srcs {
		s.release(ctx, src)
	}
}

// reload reads the config file again and makes the running sources those of its sources list: sources gone or
// changed are removed (their in-flight batches settle first), new and changed ones added. A file that does not
// parse, or a source that cannot be added, is logged and leaves the rest running.
func (s *relaySources) reload(ctx context.Context) {
	rt := s.rt
	if rt.file == nil {
		rt.log.Warn("SIGHUP: no config file to reload; the sources come from --db")
		return
	}
	fc, err := loadConfigFile(rt.file.path)
	if err == nil && fc.sources == nil {
		err = fmt.Errorf("config file %s has no sources list", rt.file.path)
	}
	var specs []sourceConfig
	if err == nil {
		specs, err = sourceSpecs(s.o, nil, s.ro.maxConns, fc)
	}
	if err != nil {
		rt.log.Error("SIGHUP: config file not reloaded; the sources stay as they were", "err", err)
		return
	}
	want := map[string]sourceConfig{}
	for _, sp := range specs {
		want[sp.Name] = sp
	}
	s.mu.Lock()
	var gone []string
	for name, src := range s.running {
		if sp, ok := want[name]; !ok || !sp.same(src.spec) {
			gone = append(gone, name)
		}
	}
	s.mu.Unlock()
	var wg sync.WaitGroup
	for _, name := range gone {
		wg.Go(func() { s.remove(ctx, name) })
	}
	wg.Wait()
	var fresh []sourceConfig
	s.mu.Lock()
	for _, sp := range specs {
		if _, ok := s.running[sp.Name]; !ok {
			fresh = append(fresh, sp)
		}
	}
	s.mu.Unlock()
	var added, failed []string
	for i, err := range s.addAll(ctx, fresh) {
		if err != nil {
			rt.log.Error("SIGHUP: source not added", "source", fresh[i].Name, "err", err)
			failed = append(failed, fresh[i].Name)
			continue
		}
		added = append(added, fresh[i].Name)
	}
	rt.log.Info("sources reloaded", "sources", len(s.group.Names()), "added", added, "removed", gone, "failed", failed)
}

// pingers are the readiness checks: each source's database and own brokers, then the shared brokers.
func (s *relaySources) pingers() []pinger {
	s.mu.Lock()
	defer s.mu.Unlock()
	names := make([]string, 0, len(s.running))
	for n := range s.running {
		names = append(names, n)
	}
	slices.Sort(names)
	var out []pinger
	for _, n := range names {
		src := s.running[n]
		out = append(out, pinger{name: "source " + n, logName: "source " + n + " database", source: n, ping: src.db.Ping})
		for _, p := range brokerPingers(src.own) {
			p.name, p.source = "source "+n+" "+p.name, n
			out = append(out, p)
		}
	}
	return append(out, brokerPingers(s.shared.conns())...)
}

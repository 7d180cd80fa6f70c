package cli

import (
	"context"
	"fmt"
	"os"
	"runtime/pprof"
	"slices"
	"strings"
	"time"

	"github.com/postbox-go/postbox"
	"github.com/postbox-go/postbox/bench"
)

var benchCommand = &command{
	name:     "bench",
	synopsis: "[--db URL] [--broker URL] [--runs N] [--json] [flags] [SCENARIO ...]",
	summary:  "measure Postbox against the database's own limit for the same work",
	help: `
Runs benchmark scenarios, each timing Postbox and a baseline that does the same work with plain SQL (or, for
the broker, with the broker's client alone) on tables of the same shape, taking turns so that both meet the
same load, and prints both rates and their ratio. With no SCENARIO it runs them all. Scenarios:

` + benchScenarioList() + `

--db is the database to measure: PostgreSQL (through pgx, or database/sql with --driver databasesql; the
database is created when missing) or SQLite (sqlite:FILE). The bench makes tables named bench_* in it, dropping
any it finds by those names: give it a database of its own, not an application's. --broker is the NATS server
with JetStream for relay-nats; the bench makes a stream for --topic and deletes it afterwards.

Each result is one line, or with --json one object with scenario, db, events_per_s (Postbox), baseline_per_s,
ratio (events_per_s / baseline_per_s; with --runs the median of each run's ratio), p50_ms, p99_ms, max_ms and
idle_queries_per_s for latency, and the scenario's other figures. Progress is logged at the info level. SIGINT
stops the run: the scenario under way cleans up and the command exits 1; the results printed so far stand.
docs/PERFORMANCE.md has figures and how to read them.`,
	examples: []string{
		"postbox bench --runs 3",
		"postbox bench --json relay latency",
		"postbox bench --db postgres://postgres@localhost/postbox_bench --driver databasesql relay",
		"postbox bench --db sqlite:/tmp/bench.db relay ordered",
		"postbox bench --broker nats://localhost:4222 --workers 1 --batch-size 1000 relay-nats",
		"postbox bench --cpuprofile cpu.out relay && go tool pprof -top cpu.out",
	},
	setup: func(f *flagSet) func(ctx context.Context, rt *runtime, args []string) error {
		var bo benchOptions
		o := &bo.opts
		f.String(&bo.db, "db", "", bench.DefaultPostgresURL, "URL", "database to measure: postgres://user:pass@host:5432/db or sqlite:FILE").secret = true
		f.String(&o.ListenURL, "listen-db", "", "", "URL", "direct PostgreSQL URL the relays LISTEN on, when --db goes through a pooler (pgx only)").secret = true
		f.String(&bo.driver, "driver", "", "", "NAME", "client library for PostgreSQL: "+bench.DBPgxV5+" (default) or "+bench.DBDatabaseSQL)
		f.String(&o.NATSURL, "broker", "b", bench.DefaultNATSURL, "URL", "NATS server with JetStream, for relay-nats").secret = true
		f.Int(&o.Events, "backlog", bench.DefaultEvents, "events the relay scenarios drain")
		f.Int(&o.Rate, "rate", bench.DefaultRate, "events per second the latency scenario commits")
		f.Duration(&o.Duration, "duration", bench.DefaultDuration, "length of each timed phase (enqueue, notify, latency, inbox)")
		f.Int(&o.Clients, "clients", bench.DefaultClients, "concurrent producers in the enqueue scenario")
		f.Int(&o.NotifyClients, "notify-clients", 32, "concurrent producers in the notify scenario")
		f.Int(&o.Keys, "keys", bench.DefaultKeys, "distinct keys the events are spread over")
		f.String(&o.Topic, "topic", "t", bench.DefaultTopic, "TOPIC", "topic of every event, and the NATS subject relay-nats publishes to")
		f.Int(&o.PayloadBytes, "payload-bytes", bench.DefaultPayload, "payload bytes per event, at least 32")
		f.Int(&o.BatchSize, "batch-size", postbox.DefaultBatchSize, "most messages one relay claim takes")
		f.Int(&o.Workers, "workers", 0, fmt.Sprintf("relay workers (default %d, or 1 in ordered mode)", postbox.DefaultWorkers))
		f.Duration(&o.IdleWindow, "idle-window", bench.DefaultIdleWindow, "how long the latency scenario watches an idle relay")
		f.Duration(&o.NotifyInterval, "notify-interval", 0,
			fmt.Sprintf("clients' wake-up NotifyInterval (default %s); negative turns wake-ups off", postbox.DefaultNotifyInterval))
		f.Duration(&o.RecheckDelay, "recheck-delay", 0, fmt.Sprintf("relays' RecheckDelay (default %s)", postbox.DefaultRecheckDelay))
		f.Int(&o.Runs, "runs", 1, "run each scenario this many times and report the medians")
		f.Bool(&o.JSON, "json", "", "print one JSON object per scenario")
		f.String(&bo.cpuProfile, "cpuprofile", "", "", "FILE", "write a CPU profile of the whole run to FILE, for go tool pprof")
		return func(ctx context.Context, rt *runtime, args []string) error {
			scenarios, err := benchScenarios(args)
			if err != nil {
				return err
			}
			if err := bo.resolve(); err != nil {
				return err
			}
			bo.opts.Logger = rt.log
			return runBench(ctx, rt, bo, scenarios)
		}
	},
}

// benchScenarioList is the help's list of scenarios.
func benchScenarioList() string {
	var b strings.Builder
	for _, s := range bench.Scenarios() {
		fmt.Fprintf(&b, "  %-11s %s\n", s, bench.Describe(s))
	}
	fmt.Fprintf(&b, "  %-11s %s", "all", "every scenario above, in this order (the default)")
	return b.String()
}

type benchOptions struct {
	db, driver, cpuProfile string
	opts                   bench.Options
}

// resolve turns --db and --driver into the bench's database and URL, and checks every option before anything
// connects.
func (bo *benchOptions) resolve() error {
	o := &bo.opts
	switch dbScheme(bo.db) {
	case "postgres":
		switch bo.driver {
		case "", bench.DBPgxV5:
			o.DB = bench.DBPgxV5
		case bench.DBDatabaseSQL:
			if o.ListenURL != "" {
				return usageErrorf("--listen-db applies to PostgreSQL through pgx only; leave out --driver %s", bo.driver)
			}
			o.DB = bench.DBDatabaseSQL
		default:
			return usageErrorf("--driver %q: use %s or %s", bo.driver, bench.DBPgxV5, bench.DBDatabaseSQL)
		}
		o.URL = bo.db
	case "sqlite":
		if o.ListenURL != "" {
			return usageErrorf("--listen-db applies to PostgreSQL through pgx only")
		}
		if bo.driver != "" && bo.driver != bench.DBDatabaseSQL {
			return usageErrorf("--driver %q: SQLite is measured through %s only; leave --driver out", bo.driver, bench.DBDatabaseSQL)
		}
		path, query, err := sqlitePath(bo.db)
		if err != nil {
			return err
		}
		if query != "" {
			return usageErrorf("--db %s: the bench sets its own SQLite options; give only the file, sqlite:%s", bo.db, path)
		}
		o.DB, o.URL = bench.DBSQLite, path
	default:
		return usageErrorf("--db %s: the bench measures PostgreSQL (postgres://user:pass@host:5432/db) or SQLite (sqlite:FILE)", RedactURL(bo.db))
	}
	scheme, _, _ := strings.Cut(o.NATSURL, "://")
	if !strings.EqualFold(scheme, "nats") || strings.Contains(o.NATSURL, "?") {
		return usageErrorf("--broker %s: the bench publishes to NATS only; give the server as nats://[user:pass@]host:4222, without parameters",
			RedactURL(o.NATSURL))
	}
	if err := o.WithDefaults().Validate(); err != nil {
		return usageErrorf("%s", benchFlagNames.Replace(strings.TrimPrefix(err.Error(), "bench: ")))
	}
	return nil
}

// benchFlagNames rewrites the names of bench.Options fields in its errors as the flags that set them.
var benchFlagNames = strings.NewReplacer("NotifyClients", "--notify-clients", "Events", "--backlog", "Rate", "--rate",
	"Clients", "--clients", "Keys", "--keys", "PayloadBytes", "--payload-bytes", "BatchSize", "--batch-size",
	"Workers", "--workers", "Runs", "--runs", "Duration", "--duration", "IdleWindow", "--idle-window",
	"RecheckDelay", "--recheck-delay")

// benchScenarios returns the scenarios named on the command line, all of them when none is, and refuses an
// unknown name before any runs.
func benchScenarios(args []string) ([]string, error) {
	if len(args) == 0 {
		return []string{"all"}, nil
	}
	for _, a := range args {
		if a != "all" && !slices.Contains(bench.Scenarios(), a) {
			return nil, usageErrorf("unknown scenario %q; choose from %s, or all", a, strings.Join(bench.Scenarios(), ", "))
		}
	}
	return args, nil
}

func runBench(ctx context.Context, rt *runtime, bo benchOptions, scenarios []string) error {
	if bo.cpuProfile != "" {
		f, err := os.Create(bo.cpuProfile)
		if err != nil {
			return fmt.Errorf("--cpuprofile: %w", err)
		}
		defer f.Close()
		if err := pprof.StartCPUProfile(f); err != nil {
			return fmt.Errorf("--cpuprofile: %w", err)
		}
		defer pprof.StopCPUProfile()
	}
	start := time.Now()
	for _, s := range scenarios {
		if err := bench.Run(ctx, s, bo.opts, rt.stdout); err != nil {
			if ctx.Err() != nil {
				return fmt.Errorf("interrupted during %s after %s; the scenarios that finished are reported above", s, time.Since(start).Round(time.Second))
			}
			return err
		}
	}
	return nil
}

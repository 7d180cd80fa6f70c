// Command postbox-bench measures Postbox against the database's own limit for the same work: each scenario times
// Postbox and a baseline that does the same work with plain SQL (or, for the broker, with the broker's client
// alone) on tables of the same shape, taking turns so that both meet the same load, and prints both rates and
// their ratio. It is a command of its own, apart from the postbox relay, so that the relay binary links no
// benchmark harness.
//
//	go run ./bench/cmd/postbox-bench --runs 3
//	go run ./bench/cmd/postbox-bench --json relay latency
//
// docs/PERFORMANCE.md has figures and how to read them; --help lists the scenarios and flags.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net/url"
	"os"
	"os/signal"
	"runtime/pprof"
	"slices"
	"strings"
	"syscall"
	"time"

	"github.com/postbox-go/postbox"
	"github.com/postbox-go/postbox/bench"
)

// Exit codes of run.
const (
	exitOK      = 0 // every scenario asked for ran
	exitFailure = 1 // a scenario failed or was interrupted
	exitUsage   = 2 // a wrong flag, argument or scenario
)

const help = `Usage: postbox-bench [--db URL] [--broker URL] [--runs N] [--json] [flags] [SCENARIO ...]

Runs benchmark scenarios, each timing Postbox and a baseline that does the same work with plain SQL (or, for
the broker, with the broker's client alone) on tables of the same shape, taking turns so that both meet the
same load, and prints both rates and their ratio. With no SCENARIO it runs them all. Scenarios:

%s

--db is the database to measure: PostgreSQL (through pgx, or database/sql with --driver databasesql), MySQL or
MariaDB (mysql://user:pass@host:3306/db, through go-sql-driver/mysql) or SQLite (sqlite:FILE). A PostgreSQL or
MySQL database is created when missing. The bench makes tables named bench_* in it, dropping
any it finds by those names: give it a database of its own, not an application's. --broker is the NATS server
with JetStream for relay-nats; the bench makes a stream for --topic and deletes it afterwards.

Each result is one line, or with --json one object with scenario, db, events_per_s (Postbox), baseline_per_s,
ratio (events_per_s / baseline_per_s; with --runs the median of each run's ratio), p50_ms, p99_ms, max_ms and
idle_queries_per_s for latency, the scenario's other figures, and load_avg (the machine's one-minute load
average at the end of the run). xmin and xmin-wal run for twice --xmin-hold. Progress is logged at the info level. SIGINT
stops the run: the scenario under way cleans up and the command exits 1; the results printed so far stand.
docs/PERFORMANCE.md has figures and how to read them.

Examples:
  postbox-bench --runs 3
  postbox-bench --json relay latency
  postbox-bench --db postgres://postgres@localhost/postbox_bench --driver databasesql relay
  postbox-bench --db sqlite:/tmp/bench.db relay ordered
  postbox-bench --db mysql://root@127.0.0.1:3306/postbox_bench --runs 3 relay enqueue latency
  postbox-bench --broker nats://localhost:4222 --workers 1 --batch-size 1000 relay-nats
  postbox-bench --cpuprofile cpu.out relay && go tool pprof -top cpu.out

Flags:
`

func main() {
	// The first SIGINT or SIGTERM cancels ctx: the scenario under way cleans up. A second one kills the process.
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	go func() {
		<-ctx.Done()
		stop()
	}()
	os.Exit(run(ctx, os.Args[1:], os.Stdout, os.Stderr))
}

// usageError is a mistake in the command line: exit 2.
type usageError struct{ msg string }

func (e *usageError) Error() string { return e.msg }

func usageErrorf(format string, a ...any) error { return &usageError{fmt.Sprintf(format, a...)} }

// run is the whole program: it parses args, runs the scenarios and returns the exit code.
func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	var bo benchOptions
	o := &bo.opts
	f := flag.NewFlagSet("postbox-bench", flag.ContinueOnError)
	f.SetOutput(stderr)
	f.Usage = func() {
		fmt.Fprintf(stdout, help, benchScenarioList())
		f.SetOutput(stdout)
		f.PrintDefaults()
		f.SetOutput(stderr)
	}
	f.StringVar(&bo.db, "db", bench.DefaultPostgresURL, "database to measure: postgres://user:pass@host:5432/db, mysql://user:pass@host:3306/db or sqlite:FILE")
	f.StringVar(&o.ListenURL, "listen-db", "", "direct PostgreSQL URL the relays LISTEN on, when --db goes through a pooler (pgx only)")
	f.StringVar(&bo.driver, "driver", "", "client library for PostgreSQL: "+bench.DBPgxV5+" (default) or "+bench.DBDatabaseSQL)
	f.StringVar(&o.NATSURL, "broker", bench.DefaultNATSURL, "NATS server with JetStream, for relay-nats")
	f.IntVar(&o.Events, "backlog", bench.DefaultEvents, "events the relay scenarios drain")
	f.IntVar(&o.Rate, "rate", bench.DefaultRate, "events per second the latency and xmin scenarios commit")
	f.DurationVar(&o.Duration, "duration", bench.DefaultDuration, "length of each timed phase (enqueue, notify, latency, inbox)")
	f.IntVar(&o.Clients, "clients", bench.DefaultClients, "concurrent producers in the enqueue scenario")
	f.IntVar(&o.NotifyClients, "notify-clients", 32, "concurrent producers in the notify scenario")
	f.IntVar(&o.Keys, "keys", bench.DefaultKeys, "distinct keys the events are spread over")
	f.StringVar(&o.Topic, "topic", bench.DefaultTopic, "topic of every event, and the NATS subject relay-nats publishes to")
	f.IntVar(&o.PayloadBytes, "payload-bytes", bench.DefaultPayload, "payload bytes per event, at least 32")
	f.IntVar(&o.BatchSize, "batch-size", postbox.DefaultBatchSize, "most messages one relay claim takes")
	f.IntVar(&o.Workers, "workers", 0, fmt.Sprintf("relay workers (default %d, or 1 in ordered mode)", postbox.DefaultWorkers))
	f.IntVar(&o.Turns, "turns", bench.DefaultTurns, "times the drain scenarios switch between the relay and the baseline; each turn starts the relay again")
	f.DurationVar(&o.IdleWindow, "idle-window", bench.DefaultIdleWindow, "how long the latency scenario watches an idle relay")
	f.BoolVar(&o.LocalRelay, "local-relay", false, "latency: make the relay from the producers' client, as in one process, so that their enqueues wake it")
	f.DurationVar(&o.XminHold, "xmin-hold", bench.DefaultXminHold, "how long the xmin scenarios hold the xmin horizon back, and produce without")
	f.DurationVar(&o.NotifyInterval, "notify-interval", 0,
		fmt.Sprintf("clients' wake-up NotifyInterval (default %s); negative turns wake-ups off", postbox.DefaultNotifyInterval))
	f.DurationVar(&o.RecheckDelay, "recheck-delay", 0, fmt.Sprintf("relays' RecheckDelay (default %s)", postbox.DefaultRecheckDelay))
	f.StringVar(&o.WALURL, "wal-url", "", "PostgreSQL URL with wal_level = logical for the wal scenario (default: a cluster made with initdb in a temporary directory)")
	f.DurationVar(&o.WALOutage, "wal-outage", 0, "relay outage of the wal scenario (default: ten times --duration)")
	f.IntVar(&o.Runs, "runs", 1, "run each scenario this many times and report the medians")
	f.BoolVar(&o.JSON, "json", false, "print one JSON object per scenario")
	f.StringVar(&bo.cpuProfile, "cpuprofile", "", "write a CPU profile of the whole run to FILE, for go tool pprof")
	logLevel := f.String("log-level", "info", "log level: debug, info, warn or error")
	if err := f.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return exitOK
		}
		return exitUsage
	}
	// Passwords in --db and --broker are never printed, whoever writes them: the bench, a driver's error, a log.
	stdout, stderr = redacting(stdout, bo.db, o.NATSURL), redacting(stderr, bo.db, o.NATSURL)
	err := func() error {
		var level slog.Level
		if err := level.UnmarshalText([]byte(*logLevel)); err != nil {
			return usageErrorf("--log-level %q: use debug, info, warn or error", *logLevel)
		}
		scenarios, err := benchScenarios(f.Args())
		if err != nil {
			return err
		}
		if err := bo.resolve(); err != nil {
			return err
		}
		bo.opts.Logger = slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: level}))
		return runBench(ctx, stdout, bo, scenarios)
	}()
	if err == nil {
		return exitOK
	}
	fmt.Fprintf(stderr, "postbox-bench: %v\n", err)
	if _, ok := err.(*usageError); ok {
		return exitUsage
	}
	return exitFailure
}

// redacting returns w with the password of each URL written as xxxxx.
func redacting(w io.Writer, urls ...string) io.Writer {
	var pairs []string
	for _, raw := range urls {
		if u, err := url.Parse(raw); err == nil && u.User != nil {
			if p, ok := u.User.Password(); ok && p != "" {
				pairs = append(pairs, p, "xxxxx")
			}
		}
	}
	if len(pairs) == 0 {
		return w
	}
	return &redactingWriter{w: w, r: strings.NewReplacer(pairs...)}
}

type redactingWriter struct {
	w io.Writer
	r *strings.Replacer
}

func (rw *redactingWriter) Write(p []byte) (int, error) {
	if _, err := rw.r.WriteString(rw.w, string(p)); err != nil {
		return 0, err
	}
	return len(p), nil
}

// redactURL is raw with its password written as xxxxx.
func redactURL(raw string) string {
	if u, err := url.Parse(raw); err == nil {
		return u.Redacted()
	}
	return "(an unparsable URL)"
}

// benchScenarioList is the help's list of scenarios.
func benchScenarioList() string {
	var b strings.Builder
	for _, s := range bench.Scenarios() {
		fmt.Fprintf(&b, "  %-13s %s\n", s, bench.Describe(s))
	}
	fmt.Fprintf(&b, "  %-13s %s", "all", "every scenario above but xmin and xmin-wal, in this order (the default)")
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
	scheme, rest, _ := strings.Cut(bo.db, ":")
	switch strings.ToLower(scheme) {
	case "postgres", "postgresql":
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
	case "mysql", "mariadb":
		if o.ListenURL != "" {
			return usageErrorf("--listen-db applies to PostgreSQL through pgx only")
		}
		if bo.driver != "" && bo.driver != bench.DBDatabaseSQL {
			return usageErrorf("--driver %q: MySQL is measured through %s only; leave --driver out", bo.driver, bench.DBDatabaseSQL)
		}
		o.DB, o.URL = bench.DBMySQL, bo.db
	case "sqlite", "sqlite3", "file":
		if o.ListenURL != "" {
			return usageErrorf("--listen-db applies to PostgreSQL through pgx only")
		}
		if bo.driver != "" && bo.driver != bench.DBDatabaseSQL {
			return usageErrorf("--driver %q: SQLite is measured through %s only; leave --driver out", bo.driver, bench.DBDatabaseSQL)
		}
		path, query, _ := strings.Cut(strings.TrimPrefix(rest, "//"), "?")
		if path == "" {
			return usageErrorf("--db %s: no file; write sqlite:path/to/file.db", bo.db)
		}
		if query != "" {
			return usageErrorf("--db %s: the bench sets its own SQLite options; give only the file, sqlite:%s", bo.db, path)
		}
		o.DB, o.URL = bench.DBSQLite, path
	default:
		return usageErrorf("--db %s: the bench measures PostgreSQL (postgres://user:pass@host:5432/db), MySQL or MariaDB "+
			"(mysql://user:pass@host:3306/db) or SQLite (sqlite:FILE)", redactURL(bo.db))
	}
	if natsScheme, _, _ := strings.Cut(o.NATSURL, "://"); !strings.EqualFold(natsScheme, "nats") || strings.Contains(o.NATSURL, "?") {
		return usageErrorf("--broker %s: the bench publishes to NATS only; give the server as nats://[user:pass@]host:4222, without parameters",
			redactURL(o.NATSURL))
	}
	if err := o.WithDefaults().Validate(); err != nil {
		return usageErrorf("%s", benchFlagNames.Replace(strings.TrimPrefix(err.Error(), "bench: ")))
	}
	return nil
}

// benchFlagNames rewrites the names of bench.Options fields in its errors as the flags that set them.
var benchFlagNames = strings.NewReplacer("NotifyClients", "--notify-clients", "Events", "--backlog", "Rate", "--rate",
	"Clients", "--clients", "Keys", "--keys", "PayloadBytes", "--payload-bytes", "BatchSize", "--batch-size",
	"Workers", "--workers", "Runs", "--runs", "Turns", "--turns", "Duration", "--duration", "IdleWindow", "--idle-window",
	"RecheckDelay", "--recheck-delay", "XminHold", "--xmin-hold")

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

func runBench(ctx context.Context, stdout io.Writer, bo benchOptions, scenarios []string) error {
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
		if err := bench.Run(ctx, s, bo.opts, stdout); err != nil {
			if ctx.Err() != nil {
				return fmt.Errorf("interrupted during %s after %s; the scenarios that finished are reported above", s, time.Since(start).Round(time.Second))
			}
			return err
		}
	}
	return nil
}

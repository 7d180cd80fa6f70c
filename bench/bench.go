// Package bench measures Postbox against the database's own limit for the same work, in the same run, and reports
// the ratio. Each scenario times Postbox and a baseline that does the same work with plain SQL (or, for a broker,
// with the broker's client alone) on tables of the same shape:
//
//	enqueue     a business transaction with and without one Enqueue; EnqueueBatch of 100 against COPY
//	notify      32 producers committing with no wake-up notification, with Postbox's coalesced one, and with one
//	            NOTIFY per transaction
//	relay       draining a backlog to a no-op publisher against DELETE ... FOR UPDATE SKIP LOCKED RETURNING (on
//	            MySQL, SELECT ... FOR UPDATE SKIP LOCKED then DELETE, in one transaction)
//	relay-nats  draining the backlog to NATS JetStream with acks against publishing the same messages directly
//	latency     commit-to-ack latency of a relay fed at a steady rate, and the queries an idle relay sends
//	ordered     the relay in ordered mode over many keys against the unordered relay
//	inbox       Process (inbox claim and handler in one transaction) against the handler in a plain transaction
//	wal         the WAL mode (package wal) against the table mode: enqueue, drain, latency, WAL kept during an outage
//	latency-load  latency from each event's scheduled send time to its publish at 5,000 and 10,000 events/s
//	xmin        a relay fed at a steady rate while a transaction holds back the xmin horizon, against none
//
// Postbox and its baseline take turns, so that both meet the same load on a shared machine. The postbox-bench
// command (bench/cmd/postbox-bench) runs the scenarios; Run is the same thing for programs that embed it.
// docs/PERFORMANCE.md has the figures and how to read them.
package bench

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"slices"
	"strings"
	"time"

	"github.com/postbox-go/postbox"
)

// Databases Run can measure.
const (
	DBPgxV5       = "pgxv5"       // PostgreSQL through pgx v5 (the default)
	DBDatabaseSQL = "databasesql" // PostgreSQL through database/sql and pgx's stdlib driver
	DBSQLite      = "sqlite"      // SQLite through database/sql and modernc.org/sqlite
	DBMySQL       = "mysql"       // MySQL 8 or MariaDB 10.6+ through database/sql and go-sql-driver/mysql
)

// Defaults for Options.
const (
	DefaultPostgresURL = "postgres://postgres@127.0.0.1:5432/postbox_bench?sslmode=disable"
	DefaultNATSURL     = "nats://127.0.0.1:4222"
	DefaultEvents      = 200_000
	DefaultRate        = 1000
	DefaultDuration    = 6 * time.Second
	DefaultClients     = 8
	DefaultKeys        = 1000
	DefaultPayload     = 256
	DefaultIdleWindow  = 5 * time.Second
	DefaultTurns       = 20
	DefaultTopic       = "postbox-bench.orders"
	DefaultXminHold    = 5 * time.Minute
)

// Options configure a run. The zero value is valid: every field has a default.
type Options struct {
	// DB is the database and client library: DBPgxV5, DBDatabaseSQL, DBSQLite or DBMySQL. Default: DBPgxV5.
	DB string
	// URL is the PostgreSQL URL, the MySQL URL (mysql://user:pass@host:3306/database) or the SQLite file. The
	// PostgreSQL or MySQL database is created when missing. Default: DefaultPostgresURL, DefaultMySQLURL, or a
	// file in a temporary directory for SQLite.
	URL string
	// ListenURL is the PostgreSQL URL the relays LISTEN on through pgx, when URL goes through a pooler in
	// transaction mode (PgBouncer) where LISTEN hears nothing: a direct connection. Default: URL itself.
	ListenURL string
	// NATSURL is the NATS server with JetStream for relay-nats. Default: DefaultNATSURL.
	NATSURL string
	// Events is the backlog the relay scenarios drain. Default: DefaultEvents (200,000).
	Events int
	// Rate is the events per second the latency and xmin scenarios' producers commit. Default: DefaultRate (1,000).
	Rate int
	// Duration is how long each timed phase runs (enqueue, notify, latency). Default: DefaultDuration (6s).
	Duration time.Duration
	// Clients is the number of concurrent producer transactions in the enqueue scenario. Default: DefaultClients.
	Clients int
	// NotifyClients is the number of concurrent producers in the notify scenario. Default: 32.
	NotifyClients int
	// Keys is the number of distinct keys the events are spread over. Default: DefaultKeys (1,000).
	Keys int
	// Topic is every event's topic; relay-nats publishes to it as a NATS subject, in a stream named after it that
	// it makes and deletes. Default: DefaultTopic.
	Topic string
	// PayloadBytes is the size of each event's payload. Default: DefaultPayload (256).
	PayloadBytes int
	// BatchSize and Workers configure every relay; zero means Postbox's defaults (Workers: 2, or 1 in ordered
	// mode).
	BatchSize int
	Workers   int
	// IdleWindow is how long the latency scenario watches an idle relay. Default: DefaultIdleWindow (5s).
	IdleWindow time.Duration
	// Turns is how many times the drain scenarios (relay, relay-nats, ordered) switch between Postbox and the
	// baseline. Each turn starts the relay again, which costs it a ramp (its first claim is not chained to a
	// settle) and the claim it took ahead when it stops (rolled back, and claimed again in its next turn): fewer
	// turns show the rate of a relay that keeps running. Default: DefaultTurns (20).
	Turns int
	// LocalRelay makes the latency scenario's relay from the producers' client, as in one process, so that their
	// enqueues and commits wake it (see postbox.RelayConfig.QuietDivisor). Default: false, a relay of its own
	// client, as in another process, which finds messages by notification (PostgreSQL) or by looking.
	LocalRelay bool
	// XminHold is how long the xmin scenario holds the xmin horizon back, and how long it produces without.
	// Default: DefaultXminHold (5 minutes).
	XminHold time.Duration
	// NotifyInterval and RecheckDelay configure every client and relay; zero means Postbox's defaults. A negative
	// NotifyInterval turns notifications off.
	NotifyInterval time.Duration
	RecheckDelay   time.Duration
	// Runs is how many times each scenario runs; the result reports the median of each figure (ratios are the
	// medians of each run's ratio, not the ratio of medians). Default: 1.
	Runs int
	// WALURL is a PostgreSQL URL with wal_level = logical for the wal scenario. Default: a cluster the scenario
	// makes with initdb in a temporary directory.
	WALURL string
	// WALOutage is how long the wal scenario keeps its relay down while producers commit at Rate. Default: ten
	// times Duration (60s).
	WALOutage time.Duration
	// JSON prints one JSON object per scenario instead of a line of text.
	JSON bool
	// Logger receives progress and Postbox's own logs. Default: a logger that discards everything below Warn.
	Logger *slog.Logger
}

// WithDefaults returns a copy of o with every zero field set to its default.
func (o Options) WithDefaults() Options {
	def := func(p *int, v int) {
		if *p == 0 {
			*p = v
		}
	}
	if o.DB == "" {
		o.DB = DBPgxV5
	}
	if o.Topic == "" {
		o.Topic = DefaultTopic
	}
	if o.NATSURL == "" {
		o.NATSURL = DefaultNATSURL
	}
	def(&o.Events, DefaultEvents)
	def(&o.Rate, DefaultRate)
	def(&o.Clients, DefaultClients)
	def(&o.NotifyClients, 32)
	def(&o.Keys, DefaultKeys)
	def(&o.PayloadBytes, DefaultPayload)
	def(&o.BatchSize, postbox.DefaultBatchSize)
	def(&o.Runs, 1)
	def(&o.Turns, DefaultTurns)
	if o.Duration == 0 {
		o.Duration = DefaultDuration
	}
	if o.IdleWindow == 0 {
		o.IdleWindow = DefaultIdleWindow
	}
	if o.XminHold == 0 {
		o.XminHold = DefaultXminHold
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	return o
}

// Validate reports the first option out of range, such as a negative count or a payload too small to hold a
// sequence number. Run calls it on o.WithDefaults(); a command calls it to refuse bad input before connecting.
func (o Options) Validate() error {
	for _, v := range []struct {
		name string
		n    int
	}{{"Events", o.Events}, {"Rate", o.Rate}, {"Clients", o.Clients}, {"NotifyClients", o.NotifyClients},
		{"Keys", o.Keys}, {"PayloadBytes", o.PayloadBytes}, {"BatchSize", o.BatchSize}, {"Workers", o.Workers},
		{"Runs", o.Runs}, {"Turns", o.Turns}} {
		if v.n < 0 {
			return fmt.Errorf("bench: %s is %d; use a positive number or 0 for the default", v.name, v.n)
		}
	}
	if o.Duration < 0 || o.IdleWindow < 0 || o.RecheckDelay < 0 || o.XminHold < 0 {
		return errors.New("bench: Duration, IdleWindow, RecheckDelay and XminHold must not be negative")
	}
	if o.PayloadBytes < 32 {
		return fmt.Errorf("bench: PayloadBytes is %d; use at least 32 so that the payload holds its sequence number", o.PayloadBytes)
	}
	return nil
}

// Scenarios lists the scenarios in the order "all" runs them; "all" leaves out xmin, which takes minutes (twice
// Options.XminHold a run).
func Scenarios() []string {
	return []string{"enqueue", "notify", "sql-api", "relay", "relay-nats", "latency", "ordered", "ordered-stats", "inbox", "latency-load", "xmin", "xmin-wal", "wal"}
}

// Describe returns one line saying what a scenario times against what, for a command's help; "" for a name that
// is not a scenario.
func Describe(scenario string) string {
	switch scenario {
	case "enqueue":
		return "a business transaction with and without one Enqueue; EnqueueBatch of 100 against COPY"
	case "notify":
		return "32 producers committing with no wake-up, with Postbox's coalesced one, and with one NOTIFY per transaction"
	case "sql-api":
		return "the SQL API's enqueue (single, batch of 100) against a bare INSERT of the same rows; 32 producers with its wake-up against none"
	case "relay":
		return "draining a backlog to a no-op publisher against DELETE ... FOR UPDATE SKIP LOCKED RETURNING (MySQL: SELECT ... SKIP LOCKED, DELETE), and (pgx) against the relay's round trips in plain SQL"
	case "relay-nats":
		return "draining the backlog to NATS JetStream with acks against publishing the same messages directly"
	case "latency":
		return "commit-to-ack latency of a relay fed at a steady rate, and the queries an idle relay sends"
	case "ordered":
		return "the relay in ordered mode over many keys against the unordered relay"
	case "ordered-stats":
		return "the ordered claim on a table never analysed against the same claim after ANALYZE, and the unordered claim alike"
	case "inbox":
		return "Process (inbox claim and handler in one transaction) against the handler in a plain transaction"
	case "wal":
		return "the WAL mode against the table mode: enqueue, drain, latency at --rate, WAL kept during a relay outage"
	case "latency-load":
		return "latency from each event's scheduled send time to its publish, at 5,000 and 10,000 events/s"
	case "xmin":
		return "a relay fed at a steady rate while a transaction holds back the xmin horizon, against none"
	case "xmin-wal":
		return "the xmin scenario in the WAL mode, on a cluster with wal_level = logical (--wal-url or one made with initdb)"
	}
	return ""
}

// Run runs one scenario, or every scenario but xmin and xmin-wal when scenario is "all", and writes each result to out as it
// finishes. It returns the first error; a scenario that cannot run on the chosen database is reported, not failed.
func Run(ctx context.Context, scenario string, opts Options, out io.Writer) error {
	o := opts.WithDefaults()
	if err := o.Validate(); err != nil {
		return err
	}
	names := []string{scenario}
	if scenario == "all" {
		names = slices.DeleteFunc(Scenarios(), func(s string) bool { return s == "xmin" || s == "xmin-wal" })
	} else if !slices.Contains(Scenarios(), scenario) {
		return fmt.Errorf("bench: unknown scenario %q; choose one of %s, or all", scenario, strings.Join(Scenarios(), ", "))
	}
	var run func(ctx context.Context, name string) (Result, error)
	switch o.DB {
	case DBPgxV5:
		t, err := pgxTarget(ctx, o)
		if err != nil {
			return err
		}
		run = func(ctx context.Context, name string) (Result, error) { return runScenario(ctx, t, name, o) }
	case DBDatabaseSQL, DBSQLite:
		t, err := sqlTarget(ctx, o)
		if err != nil {
			return err
		}
		run = func(ctx context.Context, name string) (Result, error) { return runScenario(ctx, t, name, o) }
	case DBMySQL:
		t, err := mysqlTarget(ctx, o)
		if err != nil {
			return err
		}
		run = func(ctx context.Context, name string) (Result, error) { return runScenario(ctx, t, name, o) }
	default:
		return fmt.Errorf("bench: unknown database %q; choose %s, %s, %s or %s", o.DB, DBPgxV5, DBDatabaseSQL, DBSQLite, DBMySQL)
	}
	for _, name := range names {
		var runs []Result
		for i := range o.Runs {
			o.Logger.Info("scenario starting", "scenario", name, "db", o.DB, "run", i+1, "of", o.Runs)
			res, err := run(ctx, name)
			if err != nil {
				return fmt.Errorf("bench %s: %w", name, err)
			}
			if res.Skipped == "" {
				res.Extra["load_avg"] = loadAvg()
			}
			runs = append(runs, res)
			if o.Runs > 1 {
				o.Logger.Info("run finished", "scenario", name, "events_per_s", res.EventsPerS, "baseline_per_s", res.BaselinePerS, "ratio", res.Ratio)
			}
		}
		res := median(runs)
		res.Scenario, res.DB = name, o.DB
		if err := res.write(out, o.JSON); err != nil {
			return err
		}
	}
	return nil
}

func runScenario[TTx any](ctx context.Context, t *target[TTx], name string, o Options) (Result, error) {
	switch name {
	case "enqueue":
		return benchEnqueue(ctx, t, o)
	case "notify":
		return benchNotify(ctx, t, o)
	case "sql-api":
		return benchSQLAPI(ctx, t, o)
	case "relay":
		return benchRelay(ctx, t, o)
	case "relay-nats":
		return benchRelayNATS(ctx, t, o)
	case "latency":
		return benchLatency(ctx, t, o)
	case "ordered":
		return benchOrdered(ctx, t, o)
	case "ordered-stats":
		return benchOrderedStats(ctx, t, o)
	case "inbox":
		return benchInbox(ctx, t, o)
	case "wal":
		if t.dialect != "postgres" {
			return Result{Skipped: "the WAL mode needs PostgreSQL"}, nil
		}
		return benchWAL(ctx, o)
	case "latency-load":
		return benchLatencyLoad(ctx, t, o)
	case "xmin":
		if t.dialect != "postgres" {
			return Result{Skipped: "the xmin horizon is PostgreSQL's"}, nil
		}
		return benchXmin(ctx, t, o)
	case "xmin-wal":
		if t.dialect != "postgres" {
			return Result{Skipped: "the WAL mode needs PostgreSQL"}, nil
		}
		return benchXminWAL(ctx, o)
	}
	return Result{}, fmt.Errorf("no scenario %q", name)
}

// clientConfig is the configuration of every client the scenarios make.
func (o Options) clientConfig() postbox.Config {
	cfg := postbox.Config{Logger: o.Logger, NotifyInterval: max(o.NotifyInterval, 0)}
	cfg.DisableNotify = o.NotifyInterval < 0
	return cfg
}

// workers is the number of workers a relay runs with these options, for an ordered client or not (see
// postbox.RelayConfig.Workers).
func (o Options) workers(ordered bool) int {
	switch {
	case o.Workers > 0:
		return o.Workers
	case ordered:
		return 1
	}
	return postbox.DefaultWorkers
}

// Command postbox-multi measures one relay process serving many PostgreSQL databases on one server: a
// postbox.RelayGroup over --sources databases (postbox_multi_000, postbox_multi_001..., created when missing),
// each fed --rate events per second by a producer of its own. It prints the commit-to-publish latency, the
// statements per second the idle group sends per source (listening for wake-ups, then polling only), the
// process's resident memory and the load average, as one line or with --json one object like postbox-bench's.
// Its baseline is the same producers committing the same rows into a plain table with no relay running.
//
//	go run ./bench/cmd/postbox-multi --db postgres://postgres@127.0.0.1:5499/postgres --json
//
// Each source needs up to --max-conns + 2 connections (its relay's pool, its listening connection, its
// producer's): 100 sources need a server with max_connections of 510 or more. docs/PERFORMANCE.md shows how
// to start one.
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"runtime/pprof"
	"syscall"

	"github.com/postbox-go/postbox/bench"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	os.Exit(run(ctx, os.Args[1:], os.Stdout, os.Stderr))
}

func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("postbox-multi", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var o bench.MultiOptions
	var asJSON, verbose bool
	fs.StringVar(&o.URL, "db", "", "PostgreSQL URL on the server to measure (default "+bench.DefaultPostgresURL+")")
	fs.IntVar(&o.Sources, "sources", bench.DefaultMultiSources, "number of databases, each a source of the relay group")
	fs.IntVar(&o.Rate, "rate", bench.DefaultMultiRate, "events per second committed on each source")
	fs.DurationVar(&o.Duration, "duration", bench.DefaultMultiDuration, "how long the producers run")
	fs.DurationVar(&o.IdleWindow, "idle-window", bench.DefaultMultiIdleWindow, "how long the idle group's statements are counted, in each wake-up mode")
	fs.IntVar(&o.MaxConns, "max-conns", 3, "most connections of each source's relay pool")
	fs.DurationVar(&o.NotifyInterval, "notify-interval", 0, "the producers' least time between two wake-ups (default Postbox's, 10ms; negative: none)")
	fs.BoolVar(&o.NoListen, "no-listen", false, "the relays poll while the producers run, instead of listening for wake-ups")
	fs.StringVar(&o.Prefix, "prefix", bench.MultiDatabasePrefix, "prefix of the databases' names")
	fs.BoolVar(&asJSON, "json", false, "print one JSON object")
	cpuprofile := fs.String("cpuprofile", "", "write a CPU profile of the run to this file")
	fs.BoolVar(&verbose, "v", false, "log progress")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(stderr, "postbox-multi: unexpected argument %q\n", fs.Arg(0))
		return 2
	}
	if verbose {
		o.Logger = slog.New(slog.NewTextHandler(stderr, nil))
	}
	if *cpuprofile != "" {
		f, err := os.Create(*cpuprofile)
		if err != nil {
			fmt.Fprintln(stderr, "postbox-multi:", err)
			return 1
		}
		defer f.Close()
		if err := pprof.StartCPUProfile(f); err != nil {
			fmt.Fprintln(stderr, "postbox-multi:", err)
			return 1
		}
		defer pprof.StopCPUProfile()
	}
	res, err := bench.RunMulti(ctx, o)
	if err != nil {
		fmt.Fprintln(stderr, "postbox-multi:", err)
		return 1
	}
	if asJSON {
		b, err := json.Marshal(res)
		if err != nil {
			fmt.Fprintln(stderr, "postbox-multi:", err)
			return 1
		}
		fmt.Fprintf(stdout, "%s\n", b)
		return 0
	}
	fmt.Fprintf(stdout, "multi %d sources at %.0f/s each: published %.0f/s of %.0f/s offered (plain inserts: %.0f/s, commit p99 %.1fms); p50 %v p99 %v max %v; "+
		"idle statements/s per source %.2f listening, %.2f polling; RSS %.1f MiB under load, %.1f MiB idle; load average %.2f\n",
		o.Sources, res.Extra["rate_per_source"], res.EventsPerS, res.Extra["offered_per_s"], res.BaselinePerS,
		res.Extra["baseline_commit_p99_ms"], res.Latency.P50, res.Latency.P99, res.Latency.Max,
		res.Extra["idle_statements_per_s_per_source_listen"], res.Extra["idle_statements_per_s_per_source_poll"],
		res.Extra["rss_mib_under_load"], res.Extra["rss_mib_idle"], res.Extra["loadavg_1m_end"])
	return 0
}

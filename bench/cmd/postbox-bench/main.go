// Command postbox-bench measures Postbox against the database's own limit for the same work and prints the
// ratios. Usage:
//
//	postbox-bench [flags] [scenario ...]
//
// Scenarios: enqueue, notify, relay, relay-nats, latency, ordered, inbox, or all (the default). Run
// postbox-bench -h for the flags.
package main

import (
	"context"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"runtime/pprof"
	"strings"

	"github.com/postbox-go/postbox/bench"
)

func main() {
	os.Exit(run(os.Args[1:]))
}

func run(args []string) int {
	fs := flag.NewFlagSet("postbox-bench", flag.ContinueOnError)
	var o bench.Options
	o.RegisterFlags(fs)
	verbose := fs.Bool("v", false, "log progress to stderr")
	cpuProfile := fs.String("cpuprofile", "", "write a CPU profile of the whole run to this file (go tool pprof)")
	fs.Usage = func() {
		fmt.Fprintf(fs.Output(), "usage: postbox-bench [flags] [scenario ...]\nscenarios: %s, all (default)\n",
			strings.Join(bench.Scenarios(), ", "))
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		return 2
	}
	level := slog.LevelWarn
	if *verbose {
		level = slog.LevelInfo
	}
	o.Logger = slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: level}))
	scenarios := fs.Args()
	if len(scenarios) == 0 {
		scenarios = []string{"all"}
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	if *cpuProfile != "" {
		f, err := os.Create(*cpuProfile)
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
		defer f.Close()
		if err := pprof.StartCPUProfile(f); err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
		defer pprof.StopCPUProfile()
	}
	for _, s := range scenarios {
		if err := bench.Run(ctx, s, o, os.Stdout); err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
	}
	return 0
}

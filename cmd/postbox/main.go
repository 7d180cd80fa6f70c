// Command postbox runs the transactional outbox relay and the operator's tools around it: migrations, sending,
// status and dead letters.
//
//	go install ./cmd/postbox      (from a clone of the repository; no version is published yet)
//
// The demo is a command of its own: go run ./cmd/postbox/demo (or make demo). The README's Install section has
// the other ways in: the container image, and the library from a clone through a go.work file.
//
// See 'postbox --help' and package internal/cli.
package main

import (
	"context"
	"os"
	"os/signal"
	"syscall"

	"github.com/postbox-go/postbox/cmd/postbox/internal/cli"
)

func main() {
	// The first SIGINT or SIGTERM cancels ctx: the relay stops claiming and drains. A second one kills the
	// process the usual way, once stop restores the default handling.
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	go func() {
		<-ctx.Done()
		stop()
	}()
	os.Exit(cli.Run(ctx, os.Args[1:], os.Stdout, os.Stderr, os.Getenv))
}

// Package embedded runs a NATS server with JetStream inside the process: for demos, examples and tests that
// should not need a NATS installation. It is a separate package so that programs using natsbroker against a
// real server do not compile the server.
package embedded

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/nats-io/nats-server/v2/server"
)

// Run starts a NATS server listening on a free port of 127.0.0.1, with JetStream storing its files under dir,
// and returns its client URL and a function that shuts it down and waits until it has stopped. ctx bounds the
// start only: the server runs until shutdown is called. dir must be writable; reuse it to keep streams across
// runs.
func Run(ctx context.Context, dir string) (url string, shutdown func(), err error) {
	if dir == "" {
		return "", nil, errors.New("embedded: Run needs a directory for JetStream's files, such as t.TempDir() or os.MkdirTemp")
	}
	s, err := server.NewServer(&server.Options{
		Host:      "127.0.0.1",
		Port:      server.RANDOM_PORT,
		JetStream: true,
		StoreDir:  dir,
		NoSigs:    true,
		NoLog:     true,
	})
	if err != nil {
		return "", nil, fmt.Errorf("embedded: configure NATS server: %w", err)
	}
	s.Start()
	stop := func() {
		s.Shutdown()
		s.WaitForShutdown()
	}
	for !s.ReadyForConnections(50 * time.Millisecond) {
		if ctx.Err() != nil {
			stop()
			return "", nil, fmt.Errorf("embedded: NATS server not ready: %w", ctx.Err())
		}
	}
	if !s.JetStreamEnabled() {
		stop()
		return "", nil, errors.New("embedded: NATS server started without JetStream; is the store directory writable?")
	}
	return s.ClientURL(), stop, nil
}

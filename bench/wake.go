package bench

import (
	"context"

	"github.com/postbox-go/postbox"
)

// startLocalRelay runs in the background a relay made from client itself, on client's connections c: the relay
// of a process that also produces, which client's enqueues and commits wake (see Options.LocalRelay). Closing it
// leaves c open.
func startLocalRelay[TTx any](ctx context.Context, c *conns[TTx], client *postbox.Client[TTx], pub postbox.Publisher, o Options) (*backgroundRelay[TTx], error) {
	relay, err := postbox.NewRelay(client, pub, &postbox.RelayConfig{BatchSize: o.BatchSize, Workers: o.Workers,
		RecheckDelay: o.RecheckDelay, Logger: o.Logger})
	if err != nil {
		return nil, err
	}
	shared := *c
	shared.close = func() {} // the caller's connections
	rctx, cancel := context.WithCancel(ctx)
	r := &backgroundRelay[TTx]{Relay: relay, conns: &shared, cancel: cancel, done: make(chan error, 1)}
	go func() { r.done <- relay.Run(rctx) }()
	return r, nil
}

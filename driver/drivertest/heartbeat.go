package drivertest

import (
	"context"
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/postbox-go/postbox"
	"github.com/postbox-go/postbox/postboxtest"
)

// testHeartbeats checks that a running relay records its heartbeat with its health per destination, which
// Client.Relays reads from any process, and that a relay that stopped is reported gone.
func testHeartbeats[TTx any](t *testing.T, newDriver NewDriver[TTx]) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	c := Client(t, newDriver(t), nil)
	enqueue(t, c, postbox.Message{Topic: "orders", Type: "order.created"}, postbox.Message{Topic: "stock", Type: "stock.reserved"})
	down := postbox.PublisherFunc(func(context.Context, []postbox.Record) error {
		return postbox.Unavailable(errors.New("connection refused"))
	})
	pub := &postbox.Router{Routes: []postbox.Route{{Topics: "stock", Publisher: down, Name: "warehouse"}}, Default: &postboxtest.Recorder{}}
	r := relay(t, c, pub, &postbox.RelayConfig{HeartbeatInterval: 20 * time.Millisecond, Instance: "relay-under-test"})
	rctx, stop := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- r.Run(rctx) }()
	stopped := false
	halt := func() {
		if !stopped {
			stopped = true
			stop()
			if err := <-done; err != nil {
				t.Error(err)
			}
		}
	}
	defer halt()

	var seen postbox.RelayStatus
	waitUntil(ctx, t, "a heartbeat naming the down destination", func() bool {
		relays, err := c.Relays(ctx)
		if err != nil {
			t.Fatalf("Relays: %v", err)
		}
		for _, s := range relays {
			if s.Instance != "relay-under-test" {
				continue
			}
			for _, d := range s.Destinations {
				if d.Name == "warehouse" && d.State == postbox.DestinationDown && slices.Contains(d.Topics, "stock") && s.Published >= 1 {
					seen = s
					return true
				}
			}
		}
		return false
	})
	if seen.Gone || seen.StartedAt.IsZero() || seen.SeenAt.Before(seen.StartedAt) || seen.Interval != 20*time.Millisecond {
		t.Errorf("relay status %+v: want a live relay with its start, its last beat and its interval", seen)
	}
	halt()
	waitUntil(ctx, t, "the stopped relay reported gone", func() bool {
		relays, err := c.Relays(ctx)
		return err == nil && len(relays) == 1 && relays[0].Gone
	})
}

// waitUntil polls ok until it holds, and fails the test naming what did not happen when ctx ends first.
func waitUntil(ctx context.Context, t *testing.T, what string, ok func() bool) {
	t.Helper()
	for !ok() {
		select {
		case <-ctx.Done():
			t.Fatalf("no %s before the test's deadline", what)
		case <-time.After(10 * time.Millisecond):
		}
	}
}

package console_test

import (
	"context"
	"errors"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/postbox-go/postbox"
	"github.com/postbox-go/postbox/console"
	"github.com/postbox-go/postbox/postboxtest"
)

// TestOverviewNamesADownDestination: a relay in another process (here, one the console does not observe) records
// in its heartbeat that one of its destinations is down; the overview says so in its banner, with the
// destination, its topic and since when, marks the topic held by it rather than flowing, and lists the relay.
func TestOverviewNamesADownDestination(t *testing.T) {
	srv, client := handlerEnv(t, console.Config{})
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	err := client.InTx(ctx, func(ctx context.Context, tx pgxTx) error {
		return client.EnqueueBatch(ctx, tx, append(msgs(1, "stock", "stock.reserved"), msgs(1, "orders", "order.created")...))
	})
	if err != nil {
		t.Fatal(err)
	}
	down := postbox.PublisherFunc(func(context.Context, []postbox.Record) error {
		return postbox.Unavailable(errors.New("connection refused"))
	})
	relay, err := postbox.NewRelay(client, &postbox.Router{Routes: []postbox.Route{{Topics: "stock", Publisher: down, Name: "warehouse"}},
		Default: &postboxtest.Recorder{}}, &postbox.RelayConfig{HeartbeatInterval: 50 * time.Millisecond, Instance: "relay-a",
		PollInterval: 20 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	rctx, stop := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- relay.Run(rctx) }()
	defer func() {
		stop()
		if err := <-done; err != nil {
			t.Error(err)
		}
	}()
	var page string
	for {
		resp, err := http.Get(srv.URL + "/ops/postbox/")
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("GET the overview: %s\n%s", resp.Status, b)
		}
		resp.Body.Close()
		page = string(b)
		if strings.Contains(page, "destination warehouse is down") {
			break
		}
		select {
		case <-ctx.Done():
			t.Fatalf("the overview never named the down destination; last page:\n%s", page)
		case <-time.After(50 * time.Millisecond):
		}
	}
	for _, want := range []string{"Something is stuck", "relay-a", "topics stock", `data-topic="stock"`, "destination down", "running"} {
		if !strings.Contains(page, want) {
			t.Errorf("the overview lacks %q", want)
		}
	}
}

package chaos

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// buildDaemon builds the postbox daemon (cmd/postbox) into a temporary directory and returns its path.
func buildDaemon(t *testing.T) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "postbox")
	cmd := exec.Command("go", "build", "-o", bin, "./cmd/postbox")
	cmd.Dir = ".."
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("build the daemon: %v\n%s", err, out)
	}
	return bin
}

// TestDaemonKilled: the relay is the daemon users deploy, `postbox relay`, killed with SIGKILL at random moments,
// two processes at a time, while producers commit and a consumer processes through the inbox. The daemon reports
// nothing to the ledger, so what the daemons publish is counted on the wire, by a plain NATS subscription to the
// topic that sees every copy, also those the stream then drops as duplicates of a message ID it already holds.
// The stream, with its default duplicate window, must hold each committed message once.
func TestDaemonKilled(t *testing.T) {
	events, minKills := size(3000, 50000), size(10, 20)
	over := size(6*time.Second, 40*time.Second)
	bin := buildDaemon(t)
	ctx, cancel := context.WithTimeout(context.Background(), deadline())
	defer cancel()
	w := newWorld(t, "daemonkill", worldOptions{})
	wire, err := w.countWire()
	if err != nil {
		t.Fatal(err)
	}
	w.goConsumer(w.consumerConfig())
	w.produce(ctx, events, over)
	rc := w.relayConfig()
	daemon := func() (*exec.Cmd, chan struct{}, error) {
		cmd := exec.Command(bin, "relay", "--db", rc.DB, "--table", rc.outbox(), "--inbox-table", rc.inbox(),
			"--broker", rc.URL, "--batch-size", strconv.Itoa(rc.BatchSize), "--workers", strconv.Itoa(rc.Workers),
			"--poll-interval", rc.PollInterval.String(),
			"--backoff-base", "100ms", "--backoff-max", "1s", "--max-attempts", "1000")
		cmd.Stdout, cmd.Stderr = w.logs, w.logs
		cmd.Env = os.Environ()
		dieWithParent(cmd)
		if err := cmd.Start(); err != nil {
			return nil, nil, err
		}
		done := make(chan struct{})
		go func() {
			_ = cmd.Wait()
			close(done)
		}()
		return cmd, done, nil
	}

	var kills atomic.Int64
	w.killers(ctx, &kills, minKills, func() bool {
		cmd, done, err := daemon()
		if err != nil {
			t.Error(err)
			return false
		}
		wait(ctx, randDuration(200*time.Millisecond, 1200*time.Millisecond))
		select {
		case <-done:
			t.Errorf("a postbox relay exited on its own before it was killed (see the log)")
			return false
		default:
		}
		_ = cmd.Process.Kill()
		<-done
		kills.Add(1)
		return true
	})
	survivor, done, err := daemon()
	if err != nil {
		t.Fatal(err)
	}
	w.settle(ctx)
	_ = survivor.Process.Signal(os.Interrupt)
	<-done

	counts, err := wire(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for id, n := range counts {
		for range n {
			w.ledger.Published(id)
		}
	}
	k := kills.Load()
	tally := w.verdict(ctx, expect{events: events, dupBound: k * int64(rc.BatchSize),
		bound: fmt.Sprintf("one batch of %d per kill, one worker a daemon", rc.BatchSize),
		fault: fmt.Sprintf("%d postbox relay daemons killed with SIGKILL; publishes counted on the wire", k)})
	info, err := w.js.Stream(ctx, w.role.Stream)
	if err != nil {
		t.Fatal(err)
	}
	stored := info.CachedInfo().State.Msgs
	fmt.Printf("%s: %d copies published, the stream keeps %d for %d committed events\n",
		t.Name(), tally.Committed+tally.DuplicatesPublished, stored, tally.Committed)
	if stored != uint64(tally.Committed) {
		t.Errorf("the stream holds %d messages for %d committed events; its duplicate window should keep one copy of each", stored, tally.Committed)
	}
}

// countWire subscribes to the scenario's topic with plain NATS, and counts every message published to it by its
// Nats-Msg-Id: what relays sent, each copy, before the stream drops those whose ID it already holds. Call it before
// any relay runs. Call the function it returns once the relays have stopped: it waits until every message the
// server has routed to the subscription is counted and returns the counts, or an error if a message may have been
// missed.
func (w *world) countWire() (func(ctx context.Context) (map[string]int, error), error) {
	closed := make(chan struct{})
	var asyncErr atomic.Value
	nc, err := nats.Connect(w.nats.URL(), nats.Name("chaos-wire"), nats.MaxReconnects(0),
		nats.ClosedHandler(func(*nats.Conn) { close(closed) }),
		nats.ErrorHandler(func(_ *nats.Conn, _ *nats.Subscription, err error) { asyncErr.CompareAndSwap(nil, err) }))
	if err != nil {
		return nil, fmt.Errorf("wire count: %w", err)
	}
	var mu sync.Mutex
	counts := map[string]int{}
	sub, err := nc.Subscribe(w.topic, func(m *nats.Msg) {
		mu.Lock()
		defer mu.Unlock()
		counts[m.Header.Get(jetstream.MsgIDHeader)]++
	})
	if err == nil {
		err = sub.SetPendingLimits(-1, -1) // never drop a message for a slow callback
	}
	if err == nil {
		err = nc.Flush() // the server has the subscription before any relay publishes
	}
	if err != nil {
		nc.Close()
		return nil, fmt.Errorf("wire count: %w", err)
	}
	w.t.Cleanup(nc.Close)
	return func(ctx context.Context) (map[string]int, error) {
		if n := nc.Stats().Reconnects; n > 0 {
			return nil, fmt.Errorf("wire count: the subscription's connection was cut %d times; messages may have been missed", n)
		}
		if err := nc.Drain(); err != nil { // flushes, counts what was routed to the subscription, then closes
			return nil, fmt.Errorf("wire count: %w", err)
		}
		select {
		case <-closed:
		case <-ctx.Done():
			return nil, fmt.Errorf("wire count: draining the subscription: %w", ctx.Err())
		}
		if err, _ := asyncErr.Load().(error); err != nil {
			return nil, fmt.Errorf("wire count: messages may have been missed: %w", err)
		}
		mu.Lock()
		defer mu.Unlock()
		return counts, nil
	}, nil
}

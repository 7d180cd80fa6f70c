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
// nothing to the ledger, so published duplicates are counted at the broker: the stream's duplicate window is the
// shortest JetStream allows (100ms), and every message it stored beyond the first of its ID is a duplicate. (A
// republish within 100ms of the first is dropped by the broker and not counted.)
func TestDaemonKilled(t *testing.T) {
	events, minKills := size(3000, 50000), size(10, 20)
	over := size(6*time.Second, 40*time.Second)
	bin := buildDaemon(t)
	ctx, cancel := context.WithTimeout(context.Background(), deadline())
	defer cancel()
	w := newWorld(t, "daemonkill", worldOptions{dedup: 100 * time.Millisecond})
	w.goConsumer(w.consumerConfig())
	w.produce(ctx, events, over)
	rc := w.relayConfig()
	daemon := func() (*exec.Cmd, chan struct{}, error) {
		cmd := exec.Command(bin, "relay", "--db", rc.DB, "--table", rc.outbox(), "--inbox-table", rc.inbox(),
			"--broker", rc.URL, "--batch-size", strconv.Itoa(rc.BatchSize), "--poll-interval", rc.PollInterval.String(),
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
	var wg sync.WaitGroup
	for range 2 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for ctx.Err() == nil && (w.producersRunning() || kills.Load() < int64(minKills)) {
				cmd, done, err := daemon()
				if err != nil {
					t.Error(err)
					return
				}
				wait(ctx, randDuration(200*time.Millisecond, 1200*time.Millisecond))
				select {
				case <-done:
					t.Errorf("a postbox relay exited on its own before it was killed (see the log)")
					return
				default:
				}
				_ = cmd.Process.Kill()
				<-done
				kills.Add(1)
			}
		}()
	}
	wg.Wait()
	if t.Failed() {
		t.FailNow()
	}
	survivor, done, err := daemon()
	if err != nil {
		t.Fatal(err)
	}
	w.settle(ctx)
	_ = survivor.Process.Signal(os.Interrupt)
	<-done

	counts, err := streamCounts(ctx, w.js, w.role.Stream)
	if err != nil {
		t.Fatal(err)
	}
	for id, n := range counts {
		for range n {
			w.ledger.Published(id)
		}
	}
	k := kills.Load()
	w.verdict(ctx, expect{events: events, dupBound: k * int64(rc.BatchSize),
		bound: fmt.Sprintf("one batch of %d per kill", rc.BatchSize),
		fault: fmt.Sprintf("%d postbox relay daemons killed with SIGKILL; duplicates counted at the broker", k)})
}

// streamCounts reads every message of the stream and counts them by message ID.
func streamCounts(ctx context.Context, js jetstream.JetStream, stream string) (map[string]int, error) {
	cons, err := js.OrderedConsumer(ctx, stream, jetstream.OrderedConsumerConfig{})
	if err != nil {
		return nil, err
	}
	info, err := js.Stream(ctx, stream)
	if err != nil {
		return nil, err
	}
	total := info.CachedInfo().State.Msgs
	counts := map[string]int{}
	for read := uint64(0); read < total; {
		batch, err := cons.Fetch(500, jetstream.FetchMaxWait(5*time.Second))
		if err != nil {
			return nil, err
		}
		n := 0
		for m := range batch.Messages() {
			counts[m.Headers().Get(jetstream.MsgIDHeader)]++
			n++
		}
		if err := batch.Error(); err != nil {
			return nil, err
		}
		if n == 0 {
			return nil, fmt.Errorf("stream %s: read %d of %d messages, then nothing more came", stream, read, total)
		}
		read += uint64(n)
	}
	return counts, nil
}

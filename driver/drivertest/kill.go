package drivertest

import (
	"bufio"
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/postbox-go/postbox"
	"github.com/postbox-go/postbox/driver"
	"github.com/postbox-go/postbox/postboxtest"
)

const (
	childTableEnv = "POSTBOX_DRIVERTEST_CHILD_TABLE"
	childBatch    = 50
)

// IsChild reports whether this test binary was started by ExerciseKilledRelay as the relay to kill. Call it first
// in TestMain and, if true, exit with RunChild's result.
func IsChild() bool { return os.Getenv(childTableEnv) != "" }

// RunChild runs a relay on the table ExerciseKilledRelay named, printing each published ID on stdout, until the
// parent kills it. It returns the process exit code.
func RunChild[TTx any](drv driver.Driver[TTx]) int {
	c, err := postbox.NewClient(drv, &postbox.Config{Table: os.Getenv(childTableEnv), InboxTable: os.Getenv(childTableEnv) + "_inbox"})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	out := bufio.NewWriter(os.Stdout)
	pub := postbox.PublisherFunc(func(ctx context.Context, batch []postbox.Record) error {
		for _, r := range batch {
			fmt.Fprintln(out, r.ID)
		}
		if err := out.Flush(); err != nil {
			return err
		}
		time.Sleep(2 * time.Millisecond) // the broker's ack round trip: the window a kill lands in
		return nil
	})
	// One worker: the bound on duplicates below is one in-flight batch per kill.
	r, err := postbox.NewRelay(c, pub, &postbox.RelayConfig{BatchSize: childBatch, Workers: 1, PollInterval: 5 * time.Millisecond})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	_ = r.Run(ctx)
	return 0
}

// ExerciseKilledRelay kills relays (real processes: this test binary re-run as RunChild) with SIGKILL at random
// moments while they publish, then drains the rest in process, and checks that nothing was lost and that each
// kill duplicated at most the killed relay's in-flight batch. env is added to the child's environment so it can
// reach the same database.
func ExerciseKilledRelay[TTx any](t *testing.T, drv driver.Driver[TTx], env ...string) {
	const total, kills = 6000, 3
	c := Client(t, drv, nil)
	var want []string
	for i := 0; i < total; i += 1000 {
		msgs := messages(1000, "orders")
		enqueue(t, c, msgs...)
		want = append(want, ids(msgs)...)
	}

	var mu sync.Mutex
	counts := map[string]int{}
	published := 0
	for kill := range kills {
		cmd := exec.Command(os.Args[0], "-test.run=^$")
		cmd.Env = append(append(os.Environ(), env...), childTableEnv+"="+c.Config().Table)
		cmd.Stderr = os.Stderr
		stdout, err := cmd.StdoutPipe()
		if err != nil {
			t.Fatal(err)
		}
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		killAfter := published + 300 + rand.IntN(1200)
		sc := bufio.NewScanner(stdout)
		killed := false
		for sc.Scan() {
			mu.Lock()
			counts[sc.Text()]++
			published++
			mu.Unlock()
			if !killed && published >= killAfter {
				if err := cmd.Process.Signal(syscall.SIGKILL); err != nil {
					t.Fatal(err)
				}
				killed = true
			}
		}
		_ = cmd.Wait()
		if !killed {
			t.Fatalf("relay %d finished before it could be killed: %d published", kill, published)
		}
	}

	rec := &postboxtest.Recorder{}
	drain(t, relay(t, c, rec, nil))
	for id, n := range rec.Counts() {
		counts[id] += n
	}
	dups := 0
	for _, id := range want {
		switch n := counts[id]; {
		case n == 0:
			t.Errorf("message %s lost", id)
		case n > 1:
			dups += n - 1
		}
	}
	t.Logf("lost=0 published=%d duplicates=%d after %d SIGKILLs", len(want), dups, kills)
	if dups > kills*childBatch {
		t.Fatalf("%d duplicates after %d kills; at most one in-flight batch (%d) per kill is allowed", dups, kills, childBatch)
	}
	if s := stats(t, c); s.Pending != 0 || s.Dead != 0 {
		t.Fatalf("stats after drain: %+v", s)
	}
}

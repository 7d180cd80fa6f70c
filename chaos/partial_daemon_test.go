package chaos

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/postbox-go/postbox"
	"github.com/postbox-go/postbox/driver/pgxv5"
)

// lockedBuffer is a daemon's stderr, read while it runs.
type lockedBuffer struct {
	mu sync.Mutex
	b  strings.Builder
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// await waits until the buffer matches re, and returns the first match's submatches.
func (l *lockedBuffer) await(ctx context.Context, t *testing.T, re *regexp.Regexp, what string) []string {
	t.Helper()
	for {
		if m := re.FindStringSubmatch(l.String()); m != nil {
			return m
		}
		if ctx.Err() != nil {
			t.Fatalf("the daemon never logged %s; its log:\n%s", what, l.String())
		}
		wait(ctx, 20*time.Millisecond)
	}
}

// TestPartialDaemonRoute: the route outage an operator meets, through the `postbox relay` binary with its default
// flags: a --route to a webhook receiver that refuses connections (nothing listens on port 1) with messages
// pending for it, and the default broker (stdout:) healthy. Messages on the healthy topic committed after the
// route went down are published within a second, /readyz, /metrics and `postbox status` (from the relay's heartbeat)
// name the down destination, and the daemon never says that it cannot work.
func TestPartialDaemonRoute(t *testing.T) {
	bin := buildDaemon(t)
	ctx, cancel := context.WithTimeout(context.Background(), deadline())
	defer cancel()
	pool, err := pgxpool.New(ctx, sharedDB)
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Close()
	table := fmt.Sprintf("partial_daemon_%d", time.Now().UnixNano()%1_000_000)
	client, err := postbox.NewClient(pgxv5.New(pool), &postbox.Config{Table: table + "_outbox", InboxTable: table + "_inbox"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := client.Migrate(ctx); err != nil {
		t.Fatal(err)
	}
	enqueue := func(topic string) (string, time.Time) {
		t.Helper()
		var id string
		err := client.InTx(ctx, func(ctx context.Context, tx pgx.Tx) error {
			var err error
			id, err = client.Enqueue(ctx, tx, postbox.Message{Topic: topic, Type: "partial", Payload: []byte(`{}`)})
			return err
		})
		if err != nil {
			t.Fatal(err)
		}
		return id, time.Now()
	}
	for range 5 {
		enqueue("warehouse.pick")
	}

	cmd := exec.Command(bin, "relay", "--db", sharedDB, "--table", table+"_outbox", "--inbox-table", table+"_inbox",
		"--broker", "stdout:", "--route", "warehouse.*=http://127.0.0.1:1/pick", "--http", "127.0.0.1:0")
	cmd.Env = append(os.Environ(), "POSTBOX_WEBHOOK_SECRET="+partialSecret)
	stderr := &lockedBuffer{}
	cmd.Stderr = stderr
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	dieWithParent(cmd)
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	received := map[string]time.Time{}
	scanned := make(chan struct{})
	go func() {
		defer close(scanned)
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			var e struct{ ID string }
			if json.Unmarshal(sc.Bytes(), &e) == nil && e.ID != "" {
				mu.Lock()
				if _, ok := received[e.ID]; !ok {
					received[e.ID] = time.Now()
				}
				mu.Unlock()
			}
		}
	}()
	stopped := false
	stop := func() {
		if stopped {
			return
		}
		stopped = true
		_ = cmd.Process.Signal(os.Interrupt)
		_ = cmd.Wait()
		<-scanned
	}
	defer stop()
	addr := stderr.await(ctx, t, regexp.MustCompile(`serving health and metrics.* addr=(\S+)`), "its HTTP address")[1]
	stderr.await(ctx, t, regexp.MustCompile(`destination down`), "the route going down")

	commits := map[string]time.Time{}
	tick := time.NewTicker(20 * time.Millisecond) // the healthy topic's producer: 50 messages a second
	for i := 0; i < 250; i++ {
		<-tick.C
		id, at := enqueue("orders.created")
		commits[id] = at
	}
	tick.Stop()
	var lat []time.Duration
	for id, at := range commits {
		for {
			mu.Lock()
			got, ok := received[id]
			mu.Unlock()
			if ok {
				lat = append(lat, got.Sub(at))
				break
			}
			if time.Since(at) > 10*time.Second || ctx.Err() != nil {
				t.Fatalf("message %s on the healthy topic was not published within 10 s while the route was down; the daemon's log:\n%s", id, stderr)
			}
			wait(ctx, 10*time.Millisecond)
		}
	}
	slices.Sort(lat)
	fmt.Printf("%s: with a --route down, the healthy topic's commit-to-publish through the daemon: p50 %v, p99 %v, max %v (%d messages)\n",
		t.Name(), quantile(lat, 0.5).Round(100*time.Microsecond), quantile(lat, 0.99).Round(100*time.Microsecond),
		lat[len(lat)-1].Round(100*time.Microsecond), len(lat))
	if worst := lat[len(lat)-1]; worst > time.Second {
		t.Errorf("a healthy message took %v to be published while a route was down, want within 1s", worst)
	}

	get := func(path string) string {
		t.Helper()
		resp, err := http.Get("http://" + addr + path)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, err := io.ReadAll(resp.Body)
		if err != nil {
			t.Fatal(err)
		}
		return string(b)
	}
	var ready struct {
		Ready        bool
		Destinations []struct {
			Name, State string
			Topics      []string
			Waiting     int
		}
	}
	if err := json.Unmarshal([]byte(get("/readyz")), &ready); err != nil {
		t.Fatal(err)
	}
	down := false
	for _, d := range ready.Destinations {
		down = down || (d.State == postbox.DestinationDown && slices.Contains(d.Topics, "warehouse.pick") && d.Waiting == 5)
	}
	if !down {
		t.Errorf("/readyz destinations = %+v, want the route down, naming warehouse.pick with 5 waiting", ready.Destinations)
	}
	metrics := get("/metrics")
	if !regexp.MustCompile(`postbox_destination_up\{destination="http://127.0.0.1:1/pick"\} 0`).MatchString(metrics) ||
		!regexp.MustCompile(`postbox_destination_up\{destination="stdout:"\} 1`).MatchString(metrics) {
		t.Errorf("/metrics does not show the route down and stdout: up:\n%s", grepLines(metrics, "postbox_destination"))
	}
	// postbox status, from another process, reads the relay's heartbeat: the route down, its topic, what waits.
	var status struct {
		Relays []struct {
			Gone         bool
			Destinations []struct {
				Name, State string
				Topics      []string
				Waiting     int
			}
		}
	}
	out, err := exec.CommandContext(ctx, bin, "status", "--db", sharedDB, "--table", table+"_outbox", "--inbox-table", table+"_inbox", "--json").Output()
	if err != nil {
		t.Fatalf("postbox status: %v", err)
	}
	if err := json.Unmarshal(out, &status); err != nil {
		t.Fatalf("postbox status --json: %v\n%s", err, out)
	}
	shown := false
	for _, r := range status.Relays {
		for _, d := range r.Destinations {
			shown = shown || (!r.Gone && d.State == postbox.DestinationDown && d.Name == "http://127.0.0.1:1/pick" &&
				slices.Contains(d.Topics, "warehouse.pick") && d.Waiting == 5)
		}
	}
	if !shown {
		t.Errorf("postbox status --json = %s, want the running relay with its route down, naming warehouse.pick with 5 waiting", out)
	}
	stop()
	if log := stderr.String(); strings.Contains(log, "relay cannot work") {
		t.Errorf("the daemon said it cannot work while its default broker took messages:\n%s", log)
	}
}

func grepLines(s, sub string) string {
	var out []string
	for _, l := range strings.Split(s, "\n") {
		if strings.Contains(l, sub) {
			out = append(out, l)
		}
	}
	return strings.Join(out, "\n")
}

package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	pb "github.com/postbox-go/postbox"
	"github.com/postbox-go/postbox/driver/pgxv5"
)

// TestBinaryRelayReloadsSourcesOnSIGHUP runs one relay over several sources listed in its config file, with
// producers on every source, and rewrites the list while messages flow: SIGHUP removes a source (its in-flight
// batches settle first) and adds another. Every committed message of a source still served is published once;
// the removed source's messages are published once or are still pending in its table, none lost, none twice.
// /readyz, /metrics and status --json show one entry per source.
func TestBinaryRelayReloadsSourcesOnSIGHUP(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	tables := map[string]string{}
	for _, name := range []string{"a", "b", "c"} {
		tables[name] = freshTable("src_" + name)
		mustPostbox(t, nil, "migrate", "up", "--db", pgURL, "--table", tables[name])
	}

	var mu sync.Mutex
	counts := map[string]int{}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		mu.Lock()
		counts[r.Header.Get("ce-id")]++
		mu.Unlock()
	}))
	defer srv.Close()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	httpAddr := ln.Addr().String()
	ln.Close()

	dir := t.TempDir()
	configPath := filepath.Join(dir, "postbox.yaml")
	writeConfig := func(sources ...string) {
		t.Helper()
		var b strings.Builder
		fmt.Fprintf(&b, "broker: %q\nwebhook-secret: sources-test-secret-0123456789\nhttp: %q\npoll-interval: 50ms\nsources:\n",
			srv.URL+"/{topic}", httpAddr)
		for _, s := range sources {
			fmt.Fprintf(&b, "  - name: %s\n    db: %q\n    table: %s\n", s, pgURL, tables[s])
		}
		if err := os.WriteFile(configPath, []byte(b.String()), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	writeConfig("a", "b")
	relay := startRelay(t, nil, "--config", configPath)
	relay.waitFor(t, "relay started", func() bool { return strings.Contains(relay.stderr.String(), "relay started") })

	pool, err := pgxpool.New(ctx, pgURL)
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Close()
	committed := map[string][]string{}
	var producers sync.WaitGroup
	prodCtx, stopProducers := context.WithCancel(ctx)
	for name, table := range tables {
		client, err := pb.NewClient(pgxv5.New(pool), &pb.Config{Table: table})
		if err != nil {
			t.Fatal(err)
		}
		producers.Go(func() {
			for prodCtx.Err() == nil {
				var id string
				err := client.InTx(prodCtx, func(ctx context.Context, tx pgx.Tx) (err error) {
					id, err = client.Enqueue(ctx, tx, pb.Message{Topic: "src." + name, Type: "test", Payload: []byte("{}")})
					return err
				})
				if err == nil {
					mu.Lock()
					committed[name] = append(committed[name], id)
					mu.Unlock()
				}
				time.Sleep(5 * time.Millisecond)
			}
		})
	}
	published := func(name string) int {
		mu.Lock()
		defer mu.Unlock()
		n := 0
		for _, id := range committed[name] {
			if counts[id] > 0 {
				n++
			}
		}
		return n
	}
	relay.waitFor(t, "messages of a and b published", func() bool { return published("a") > 20 && published("b") > 20 })

	var ready struct {
		Ready  bool `json:"ready"`
		Checks []struct {
			Name, Source string
			OK           bool
		} `json:"checks"`
	}
	getJSON(t, "http://"+httpAddr+"/readyz", &ready)
	var sources []string
	for _, c := range ready.Checks {
		if c.Source != "" {
			sources = append(sources, c.Source)
		}
	}
	if !ready.Ready || fmt.Sprint(sources) != "[a b]" {
		t.Errorf("/readyz: ready %v, source checks %v; want ready with a and b", ready.Ready, sources)
	}
	metrics := getText(t, "http://"+httpAddr+"/metrics")
	for _, want := range []string{`postbox_published_total{source="a",topic="src.a"}`, `postbox_outbox_up{source="b"}`} {
		if !strings.Contains(metrics, want) {
			t.Errorf("/metrics has no %s", want)
		}
	}

	writeConfig("b", "c")
	if err := relay.cmd.Process.Signal(syscall.SIGHUP); err != nil {
		t.Fatal(err)
	}
	relay.waitFor(t, "sources reloaded", func() bool { return strings.Contains(relay.stderr.String(), "sources reloaded") })
	relay.waitFor(t, "messages of c published", func() bool { return published("c") > 20 })
	stopProducers()
	producers.Wait()

	for _, name := range []string{"b", "c"} {
		relay.waitFor(t, "every message of "+name+" published", func() bool {
			mu.Lock()
			n := len(committed[name])
			mu.Unlock()
			return published(name) == n
		})
	}
	// Only the messages whose commit returned count: a producer stopped mid-commit may have left a row whose
	// transaction committed after its context ended.
	mu.Lock()
	idsA := slices.Clone(committed["a"])
	mu.Unlock()
	var pendingA int
	if err := pool.QueryRow(ctx, "SELECT count(*) FROM "+pgx.Identifier{tables["a"]}.Sanitize()+" WHERE id::text = ANY($1)", idsA).Scan(&pendingA); err != nil {
		t.Fatal(err)
	}
	publishedA := published("a")
	mu.Lock()
	if publishedA+pendingA != len(committed["a"]) {
		t.Errorf("removed source a: %d published + %d pending, want the %d committed", publishedA, pendingA, len(committed["a"]))
	}
	for name, ids := range committed {
		for _, id := range ids {
			if counts[id] > 1 {
				t.Errorf("source %s: message %s published %d times", name, id, counts[id])
			}
		}
	}
	t.Logf("committed a=%d b=%d c=%d; a left pending after its removal: %d", len(committed["a"]), len(committed["b"]),
		len(committed["c"]), pendingA)
	mu.Unlock()

	out := mustPostbox(t, nil, "status", "--config", configPath, "--json")
	var status struct {
		Sources []struct {
			Source  string `json:"source"`
			Pending int64  `json:"pending"`
		} `json:"sources"`
	}
	if err := json.Unmarshal([]byte(out), &status); err != nil || len(status.Sources) != 2 || status.Sources[0].Source != "b" ||
		status.Sources[1].Source != "c" {
		t.Errorf("status --json with sources b and c: %v\n%s", err, out)
	}
	relay.stop(t)
}

func getJSON(t *testing.T, u string, v any) {
	t.Helper()
	if err := json.Unmarshal([]byte(getText(t, u)), v); err != nil {
		t.Fatalf("GET %s: %v", u, err)
	}
}

func getText(t *testing.T, u string) string {
	t.Helper()
	resp, err := http.Get(u)
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

package main

import (
	"database/sql"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	_ "github.com/jackc/pgx/v5/stdlib"
	_ "modernc.org/sqlite"
)

// TestBinaryRelayDrainsOnSIGTERM stops the built relay while a webhook holds its requests: SIGTERM must let every
// request in flight finish and settle, so that a message the receiver got is no longer pending, nothing is lost
// or marked failed, and the next relay publishes exactly the rest.
func TestBinaryRelayDrainsOnSIGTERM(t *testing.T) {
	for name, db := range map[string]string{
		"postgres": pgURL,
		"sqlite":   "sqlite:" + filepath.Join(t.TempDir(), "drain.db"),
	} {
		t.Run(name, func(t *testing.T) { testRelayDrain(t, db) })
	}
}

func testRelayDrain(t *testing.T, db string) {
	const (
		n     = 20
		batch = 4
		hold  = 300 * time.Millisecond // how long the receiver takes over each request
	)
	table := freshTable("drain_outbox")
	env := []string{"POSTBOX_DB=" + db, "POSTBOX_TABLE=" + table, "POSTBOX_WEBHOOK_SECRET=drain-test-secret-0123456789"}
	ok := func(args ...string) string {
		t.Helper()
		return mustPostbox(t, env, args...)
	}
	ok("migrate", "up")
	sent := map[string]bool{}
	for i := range n {
		sent[strings.TrimSpace(ok("send", "-t", "orders", "--type", "order.created", "-k", fmt.Sprint(i), "-d", "{}"))] = true
	}

	// The receiver records each request's message ID per relay run as it arrives, then holds the request.
	var (
		mu       sync.Mutex
		runIdx   int
		received [2][]string
		arrived  = [2]chan struct{}{make(chan struct{}), make(chan struct{})}
		faults   []string
	)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		id := r.Header.Get("webhook-id")
		mu.Lock()
		run := runIdx
		if ce := r.Header.Get("ce-id"); id == "" || ce != id {
			faults = append(faults, fmt.Sprintf("webhook-id %q, ce-id %q", id, ce))
		}
		if a := r.Header.Get("Postbox-Attempt"); a != "1" {
			faults = append(faults, fmt.Sprintf("message %s arrived as attempt %s: an earlier publish was recorded as failed", id, a))
		}
		received[run] = append(received[run], id)
		if len(received[run]) == 1 {
			close(arrived[run])
		}
		mu.Unlock()
		select {
		case <-time.After(hold):
			w.WriteHeader(http.StatusNoContent)
		case <-r.Context().Done():
			mu.Lock()
			faults = append(faults, fmt.Sprintf("run %d: the relay abandoned the request for message %s", run+1, id))
			mu.Unlock()
		}
	}))
	defer srv.Close()
	snapshot := func() (ids [2][]string, bad []string) {
		mu.Lock()
		defer mu.Unlock()
		return [2][]string{append([]string(nil), received[0]...), append([]string(nil), received[1]...)},
			append([]string(nil), faults...)
	}
	relayArgs := []string{"--broker", srv.URL + "/hooks", "--batch-size", fmt.Sprint(batch), "--poll-interval", "20ms"}

	// Run 1: SIGTERM as soon as the first request arrives, with its batch still in flight.
	relay := startRelay(t, env, relayArgs...)
	select {
	case <-arrived[0]:
	case <-relay.done:
		t.Fatalf("relay exited (%v) before publishing; stderr:\n%s", relay.err, relay.stderr.String())
	case <-time.After(30 * time.Second):
		t.Fatalf("no webhook request within 30s; relay stderr:\n%s", relay.stderr.String())
	}
	relay.stop(t)
	got, _ := snapshot() // faults accumulate and are checked once, after run 2
	first := map[string]bool{}
	for _, id := range got[0] {
		if first[id] {
			t.Errorf("run 1 published message %s twice", id)
		}
		first[id] = true
	}
	if len(first) == 0 || len(first) >= n {
		t.Fatalf("run 1 published %d of %d messages; the test needs some in flight at SIGTERM and some left over", len(first), n)
	}
	rows := outboxRows(t, db, table)
	for id := range first {
		if r, ok := rows[id]; ok {
			t.Errorf("message %s reached the receiver, yet after the drain it is %s with %d attempts", id, r.status, r.attempts)
		}
	}
	for id, r := range rows {
		if !sent[id] || r.status != "pending" || r.attempts != 0 {
			t.Errorf("after the drain: message %s (sent: %v) is %s with %d attempts; want pending, untouched", id, sent[id], r.status, r.attempts)
		}
	}
	if len(rows)+len(first) != n {
		t.Errorf("after the drain: %d pending + %d received; want %d", len(rows), len(first), n)
	}
	var st struct{ Pending, Dead int }
	if err := json.Unmarshal([]byte(ok("status", "--json")), &st); err != nil || st.Pending != n-len(first) || st.Dead != 0 {
		t.Errorf("status after the drain: %+v %v; want %d pending, 0 dead", st, err, n-len(first))
	}

	// Run 2 publishes the rest, and is stopped with its last requests in flight too.
	mu.Lock()
	runIdx = 1
	mu.Unlock()
	relay = startRelay(t, env, relayArgs...)
	relay.waitFor(t, fmt.Sprintf("all %d messages at the receiver", n), func() bool {
		got, _ := snapshot()
		all := map[string]bool{}
		for _, id := range append(got[0], got[1]...) {
			all[id] = true
		}
		return len(all) == n
	})
	relay.stop(t)
	got, bad := snapshot()
	times := map[string]int{}
	for _, id := range append(got[0], got[1]...) {
		times[id]++
	}
	for id, k := range times {
		if !sent[id] || k > 2 {
			t.Errorf("message %s (sent: %v) was received %d times", id, sent[id], k)
		}
	}
	if len(times) != n {
		t.Errorf("the receiver got %d distinct messages; want %d", len(times), n)
	}
	if rows := outboxRows(t, db, table); len(rows) != 0 {
		t.Errorf("after run 2, %d messages are left in the outbox: %v", len(rows), rows)
	}
	if err := json.Unmarshal([]byte(ok("status", "--json")), &st); err != nil || st.Pending != 0 || st.Dead != 0 {
		t.Errorf("status after run 2: %+v %v", st, err)
	}
	for _, f := range bad {
		t.Error(f)
	}
	t.Logf("run 1 received %d of %d messages before exiting, run 2 %d", len(got[0]), n, len(got[1]))
}

type outboxRow struct {
	status   string
	attempts int
}

// outboxRows reads every row of the outbox table straight from the database the CLI URL db names.
func outboxRows(t *testing.T, db, table string) map[string]outboxRow {
	t.Helper()
	driverName, dsn := "pgx", db
	if path, ok := strings.CutPrefix(db, "sqlite:"); ok {
		driverName, dsn = "sqlite", path
	}
	conn, err := sql.Open(driverName, dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	rows, err := conn.Query("SELECT id, status, attempts FROM " + table) // table is the test's constant
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	out := map[string]outboxRow{}
	for rows.Next() {
		var id string
		var r outboxRow
		if err := rows.Scan(&id, &r.status, &r.attempts); err != nil {
			t.Fatal(err)
		}
		out[id] = r
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

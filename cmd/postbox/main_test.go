package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/go-sql-driver/mysql"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/postbox-go/postbox/internal/testenv"
)

var (
	binary string
	pgURL  string
	myURL  string
)

func TestMain(m *testing.M) {
	os.Exit(func() int {
		var err error
		if pgURL, err = testenv.FreshPostgres("postbox_test_cmd"); err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
		dsn, err := testenv.FreshMySQL("postbox_test_cmd")
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
		cfg, err := mysql.ParseDSN(dsn)
		if err != nil || cfg.Net != "tcp" {
			fmt.Fprintf(os.Stderr, "test MySQL DSN %q: want a TCP address (%v)\n", dsn, err)
			return 1
		}
		myURL = (&url.URL{Scheme: "mysql", User: url.UserPassword(cfg.User, cfg.Passwd), Host: cfg.Addr, Path: "/" + cfg.DBName}).String()
		dir, err := os.MkdirTemp("", "postbox-bin-")
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
		defer os.RemoveAll(dir)
		binary = filepath.Join(dir, "postbox")
		build := exec.Command("go", "build", "-o", binary, ".")
		if out, err := build.CombinedOutput(); err != nil {
			fmt.Fprintf(os.Stderr, "go build: %v\n%s", err, out)
			return 1
		}
		return m.Run()
	}())
}

type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
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

// postbox runs the binary to completion and returns its exit code and output.
func postbox(t *testing.T, env []string, args ...string) (int, string, string) {
	t.Helper()
	cmd := exec.Command(binary, args...)
	cmd.Env = append(os.Environ(), env...)
	return run(t, cmd)
}

// mustPostbox runs the binary to completion, fails the test unless it exits 0, and returns its standard output.
func mustPostbox(t *testing.T, env []string, args ...string) string {
	t.Helper()
	code, out, errOut := postbox(t, env, args...)
	if code != 0 {
		t.Fatalf("postbox %v: exit %d\n%s%s", args, code, out, errOut)
	}
	return out
}

// run runs cmd to completion and returns its exit code and output.
func run(t *testing.T, cmd *exec.Cmd) (int, string, string) {
	t.Helper()
	var out, errOut bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errOut
	err := cmd.Run()
	code := 0
	if ee, ok := err.(*exec.ExitError); ok {
		code = ee.ExitCode()
	} else if err != nil {
		t.Fatal(err)
	}
	return code, out.String(), errOut.String()
}

// relayProcess is a `postbox relay` running in the background.
type relayProcess struct {
	cmd            *exec.Cmd
	stdout, stderr lockedBuffer
	done           chan struct{} // closed once the process has exited
	err            error         // Wait's result, once done is closed
}

// startRelay starts `postbox relay args...`; the test's cleanup kills it if it is still running.
func startRelay(t *testing.T, env []string, args ...string) *relayProcess {
	t.Helper()
	r := &relayProcess{cmd: exec.Command(binary, append([]string{"relay"}, args...)...), done: make(chan struct{})}
	r.cmd.Env = append(os.Environ(), env...)
	r.cmd.Stdout, r.cmd.Stderr = &r.stdout, &r.stderr
	if err := r.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() {
		r.err = r.cmd.Wait()
		close(r.done)
	}()
	t.Cleanup(func() {
		_ = r.cmd.Process.Kill() // fails harmlessly once the process has exited
		<-r.done
	})
	return r
}

// waitFor polls cond until it holds; after 30s, or if the relay exits meanwhile, it fails the test.
func (r *relayProcess) waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for !cond() {
		select {
		case <-r.done:
			t.Fatalf("relay exited (%v) before %s; stderr:\n%s", r.err, what, r.stderr.String())
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("no %s within 30s; relay stderr:\n%s", what, r.stderr.String())
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// stop sends SIGTERM and fails the test unless the relay settles its in-flight work and exits 0 within 30s.
func (r *relayProcess) stop(t *testing.T) {
	t.Helper()
	if err := r.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	select {
	case <-r.done:
	case <-time.After(30 * time.Second):
		t.Fatalf("relay did not exit within 30s of SIGTERM; stderr:\n%s", r.stderr.String())
	}
	if r.err != nil {
		t.Fatalf("relay after SIGTERM: %v; stderr:\n%s", r.err, r.stderr.String())
	}
	if !strings.Contains(r.stderr.String(), "relay stopping") {
		t.Errorf("relay log has no graceful stop:\n%s", r.stderr.String())
	}
}

// freshTable returns a table name no earlier run used, so that repeated runs (go test -count=N) start empty.
func freshTable(prefix string) string { return fmt.Sprintf("%s_%x", prefix, time.Now().UnixNano()) }

// TestBinary drives the built binary as an operator would: migrate, send, relay until SIGTERM, status, dead
// letters; against PostgreSQL, MariaDB and SQLite, configured through the environment.
func TestBinary(t *testing.T) {
	for name, db := range map[string]string{
		"postgres": pgURL,
		"mysql":    myURL,
		"sqlite":   "sqlite:" + filepath.Join(t.TempDir(), "bin.db"),
	} {
		t.Run(name, func(t *testing.T) { testBinary(t, db) })
	}
}

func testBinary(t *testing.T, db string) {
	env := []string{"POSTBOX_DB=" + db, "POSTBOX_TABLE=" + freshTable("bin_outbox")}
	ok := func(args ...string) string {
		t.Helper()
		return mustPostbox(t, env, args...)
	}
	ok("migrate", "up")
	const n = 12
	sent := map[string]int{} // message ID → i
	for i := range n {
		id := strings.TrimSpace(ok("send", "--topic", "orders", "--type", "order.created", "--key", fmt.Sprint(i), "--data", fmt.Sprintf(`{"n":%d}`, i)))
		sent[id] = i
	}
	ok("send", "--topic", "orders", "--type", "order.bogus", "--data", `{}`)

	// The registry in the config file knows order.created only: the bogus event is parked dead.
	config := filepath.Join(t.TempDir(), "postbox.yaml")
	if err := os.WriteFile(config, []byte("poll-interval: 20ms\nevents:\n  - {type: order.created, topic: orders}\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	relay := startRelay(t, env, "--broker", "stdout:", "--config", config)
	relay.waitFor(t, fmt.Sprintf("%d lines on stdout", n), func() bool { return strings.Count(relay.stdout.String(), "\n") >= n })
	relay.stop(t)

	// Each order.created message is on stdout once, as the CloudEvent of what was sent.
	published := map[string]bool{}
	for _, line := range strings.Split(strings.TrimSuffix(relay.stdout.String(), "\n"), "\n") {
		var e struct {
			ID, Type, Topic, Subject string
			Data                     struct{ N int }
		}
		if err := json.Unmarshal([]byte(line), &e); err != nil {
			t.Fatalf("stdout broker line %q: %v", line, err)
		}
		i, ok := sent[e.ID]
		switch {
		case !ok:
			t.Errorf("stdout has message %s, which send did not print: %s", e.ID, line)
		case published[e.ID]:
			t.Errorf("stdout has message %s twice", e.ID)
		case e.Type != "order.created" || e.Topic != "orders" || e.Subject != fmt.Sprint(i) || e.Data.N != i:
			t.Errorf("message %s was sent with key %d and data {\"n\":%d}; stdout has %s", e.ID, i, i, line)
		}
		published[e.ID] = true
	}
	for id := range sent {
		if !published[id] {
			t.Errorf("message %s was sent but is not on stdout", id)
		}
	}

	var st struct {
		Pending, Dead int
	}
	if err := json.Unmarshal([]byte(ok("status", "--json")), &st); err != nil || st.Pending != 0 || st.Dead != 1 {
		t.Fatalf("status after relay: %+v %v", st, err)
	}
	list := ok("dead", "list")
	if !strings.Contains(list, "order.bogus") || !strings.Contains(list, "not in the registry") {
		t.Fatalf("dead list:\n%s", list)
	}
	if got := ok("dead", "retry", "--topic", "orders"); !strings.Contains(got, "retried 1") {
		t.Fatalf("dead retry: %s", got)
	}
	if err := json.Unmarshal([]byte(ok("status", "--json")), &st); err != nil || st.Pending != 1 || st.Dead != 0 {
		t.Fatalf("status after retry: %+v %v", st, err)
	}
	if code, _, errOut := postbox(t, env, "dead", "purge"); code != 2 || !strings.Contains(errOut, "needs a filter") {
		t.Fatalf("dead purge without a filter: exit %d, %s", code, errOut)
	}
}

func TestBinaryVersionAndHelp(t *testing.T) {
	code, out, _ := postbox(t, nil, "version")
	if code != 0 || !strings.HasPrefix(out, "postbox ") || !strings.Contains(out, "go1.") {
		t.Fatalf("version: %d %q", code, out)
	}
	if code, _, errOut := postbox(t, nil, "frobnicate"); code != 2 || !strings.Contains(errOut, "unknown command") {
		t.Fatalf("unknown command: %d %s", code, errOut)
	}
}

// TestBinaryRelayToNATS: the built relay publishes to a real NATS JetStream server, the message ID becoming the
// Nats-Msg-Id, and drains on SIGTERM.
func TestBinaryRelayToNATS(t *testing.T) {
	ctx := context.Background()
	nc, err := nats.Connect(natsURL())
	if err != nil {
		t.Fatalf("NATS is not reachable at %s (start it with `make services`, or set POSTBOX_TEST_NATS): %v", natsURL(), err)
	}
	defer nc.Close()
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	suffix := fmt.Sprint(time.Now().UnixNano())
	stream, topic := "PBCMD_"+suffix, "pbcmd"+suffix+".orders"
	t.Cleanup(func() { _ = js.DeleteStream(context.Background(), stream) })

	db := "sqlite:" + filepath.Join(t.TempDir(), "nats.db")
	env := []string{"POSTBOX_DB=" + db}
	if code, _, errOut := postbox(t, env, "migrate", "up"); code != 0 {
		t.Fatal(errOut)
	}
	var ids []string
	for i := range 5 {
		code, out, errOut := postbox(t, env, "send", "-t", topic, "--type", "order.created", "-k", fmt.Sprint(i), "-d", "{}")
		if code != 0 {
			t.Fatal(errOut)
		}
		ids = append(ids, strings.TrimSpace(out))
	}
	relay := startRelay(t, env, "--poll-interval", "20ms", "--broker", natsURL()+"?stream="+stream+"&subjects="+topic)
	var s jetstream.Stream
	relay.waitFor(t, fmt.Sprintf("%d messages in stream %s", len(ids), stream), func() bool {
		s, err = js.Stream(ctx, stream)
		return err == nil && s.CachedInfo().State.Msgs == uint64(len(ids))
	})
	relay.stop(t)
	for i, id := range ids {
		msg, err := s.GetMsg(ctx, uint64(i+1))
		if err != nil {
			t.Fatal(err)
		}
		if got := msg.Header.Get("Nats-Msg-Id"); got != id || msg.Subject != topic {
			t.Errorf("message %d: subject %s, Nats-Msg-Id %q; want %s and %s", i+1, msg.Subject, got, topic, id)
		}
	}
	if code, out, _ := postbox(t, env, "status", "--json"); code != 0 || !strings.Contains(out, `"pending":0,`) {
		t.Fatalf("status after the relay: %s", out)
	}
}

func natsURL() string {
	if u := os.Getenv("POSTBOX_TEST_NATS"); u != "" {
		return u
	}
	return "nats://127.0.0.1:4222"
}

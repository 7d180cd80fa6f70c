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
	"runtime"
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
		build := exec.Command(filepath.Join(runtime.GOROOT(), "bin", "go"), "build", "-o", binary, ".")
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
	env := []string{"POSTBOX_DB=" + db, "POSTBOX_TABLE=bin_outbox"}
	ok := func(args ...string) string {
		t.Helper()
		code, out, errOut := postbox(t, env, args...)
		if code != 0 {
			t.Fatalf("postbox %v: exit %d\n%s%s", args, code, out, errOut)
		}
		return out
	}
	ok("migrate", "up")
	const n = 12
	for i := range n {
		ok("send", "--topic", "orders", "--type", "order.created", "--key", fmt.Sprint(i), "--data", fmt.Sprintf(`{"n":%d}`, i))
	}
	ok("send", "--topic", "orders", "--type", "order.bogus", "--data", `{}`)

	// The registry in the config file knows order.created only: the bogus event is parked dead.
	config := filepath.Join(t.TempDir(), "postbox.yaml")
	if err := os.WriteFile(config, []byte("poll-interval: 20ms\nevents:\n  - {type: order.created, topic: orders}\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	relay := exec.Command(binary, "relay", "--broker", "stdout:", "--config", config)
	relay.Env = append(os.Environ(), env...)
	var out, errOut lockedBuffer
	relay.Stdout, relay.Stderr = &out, &errOut
	if err := relay.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- relay.Wait() }()
	deadline := time.Now().Add(30 * time.Second)
	for strings.Count(out.String(), "\n") < n {
		if time.Now().After(deadline) {
			relay.Process.Kill()
			<-exited
			t.Fatalf("relay published %d of %d lines; stderr:\n%s", strings.Count(out.String(), "\n"), n, errOut.String())
		}
		time.Sleep(20 * time.Millisecond)
	}
	if err := relay.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-exited:
		if err != nil {
			t.Fatalf("relay after SIGTERM: %v; stderr:\n%s", err, errOut.String())
		}
	case <-time.After(30 * time.Second):
		relay.Process.Kill()
		t.Fatal("relay did not exit within 30s of SIGTERM")
	}
	if !strings.Contains(errOut.String(), "relay stopping") {
		t.Errorf("relay log has no graceful stop:\n%s", errOut.String())
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
	relay := exec.Command(binary, "relay", "--poll-interval", "20ms",
		"--broker", natsURL()+"?stream="+stream+"&subjects="+topic)
	relay.Env = append(os.Environ(), env...)
	var errOut lockedBuffer
	relay.Stderr = &errOut
	if err := relay.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- relay.Wait() }()
	defer func() {
		if relay.ProcessState == nil {
			relay.Process.Kill()
		}
	}()

	var s jetstream.Stream
	deadline := time.Now().Add(30 * time.Second)
	for {
		if s, err = js.Stream(ctx, stream); err == nil && s.CachedInfo().State.Msgs == uint64(len(ids)) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("stream %s did not get %d messages: %v; relay stderr:\n%s", stream, len(ids), err, errOut.String())
		}
		time.Sleep(50 * time.Millisecond)
	}
	if err := relay.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-exited:
		if err != nil {
			t.Fatalf("relay after SIGTERM: %v\n%s", err, errOut.String())
		}
	case <-time.After(30 * time.Second):
		t.Fatal("relay did not exit within 30s of SIGTERM")
	}
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

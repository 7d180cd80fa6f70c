package main

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

type result struct {
	code           int
	stdout, stderr string
}

func runDemoCmd(args ...string) result {
	var out, errOut bytes.Buffer
	code := run(context.Background(), args, &out, &errOut)
	return result{code, out.String(), errOut.String()}
}

// TestDemoJSON: the demo delivers every committed event exactly once, duplicates injected and skipped.
func TestDemoJSON(t *testing.T) {
	r := runDemoCmd("--json", "--orders", "400", "--duplicates", "30")
	if r.code != 0 {
		t.Fatalf("demo exit %d: %s", r.code, r.stderr)
	}
	var s map[string]any
	if err := json.Unmarshal([]byte(r.stdout), &s); err != nil || strings.Count(strings.TrimSpace(r.stdout), "\n") != 0 {
		t.Fatalf("demo --json printed %q, not one JSON object: %v", r.stdout, err)
	}
	for _, k := range []string{"committed", "published", "delivered", "duplicates_skipped", "lost"} {
		if _, ok := s[k]; !ok {
			t.Errorf("demo --json has no %q: %s", k, r.stdout)
		}
	}
	if s["committed"] != 400.0 || s["published"] != s["committed"] || s["delivered"] != s["committed"] || s["lost"] != 0.0 ||
		s["processed_twice"] != 0.0 || s["duplicates_skipped"].(float64) <= 0 ||
		s["deliveries"] != s["delivered"].(float64)+s["duplicates_skipped"].(float64) {
		t.Fatalf("demo summary %s", r.stdout)
	}
}

func TestDemoText(t *testing.T) {
	r := runDemoCmd("--orders", "50")
	if r.code != 0 {
		t.Fatalf("demo exit %d: %s", r.code, r.stderr)
	}
	for _, want := range []string{"orders committed with their event        50", "events lost                               0", "events/s"} {
		if !strings.Contains(r.stdout, want) {
			t.Errorf("demo printed no %q:\n%s", want, r.stdout)
		}
	}
}

// TestDemoUsage: a wrong flag value exits 2 and names the flag.
func TestDemoUsage(t *testing.T) {
	for _, args := range [][]string{{"--duplicates", "200"}, {"--orders", "0"}, {"extra"}, {"--log-level", "loud"}} {
		r := runDemoCmd(args...)
		if r.code != exitUsage || !strings.Contains(r.stderr, strings.TrimPrefix(args[0], "extra")) {
			t.Errorf("demo %q: exit %d, stderr %q; want exit 2 naming %s", args, r.code, r.stderr, args[0])
		}
	}
}

// TestBinaryDemo runs the demo as someone trying Postbox for the first time would: no POSTBOX_* settings and, where
// network namespaces allow it, no network service to reach, since the demo embeds its database and broker.
func TestBinaryDemo(t *testing.T) {
	binary := filepath.Join(t.TempDir(), "demo")
	if out, err := exec.Command("go", "build", "-o", binary, ".").CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	cmd := exec.Command(binary, "--json")
	// The probe brings the loopback up too: the embedded NATS server listens on 127.0.0.1.
	if err := exec.Command("unshare", "-rn", "ip", "link", "set", "lo", "up").Run(); err == nil {
		cmd = exec.Command("unshare", "-rn", "sh", "-c", `ip link set lo up 2>/dev/null; exec "$0" "$@"`, binary, "--json")
	} else {
		t.Logf("no unprivileged network namespace here (unshare -rn: %v): the demo runs with this machine's network", err)
	}
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "POSTBOX_") {
			cmd.Env = append(cmd.Env, kv)
		}
	}
	var out, errOut bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errOut
	err := cmd.Run()
	var sum struct {
		Committed, Published, Lost int64
		ProcessedTwice             int64 `json:"processed_twice"`
	}
	if jerr := json.Unmarshal(out.Bytes(), &sum); jerr != nil || err != nil {
		t.Fatalf("demo --json: %v, %v\n%s%s", err, jerr, out.String(), errOut.String())
	}
	if sum.Lost != 0 || sum.ProcessedTwice != 0 || sum.Committed <= 0 || sum.Published != sum.Committed {
		t.Fatalf("demo: want lost 0, processed twice 0 and committed == published > 0; got %s", out.String())
	}
}

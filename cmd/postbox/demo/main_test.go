package main

import (
	"bytes"
	"context"
	"encoding/json"
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

package cli

import (
	"encoding/json"
	"strings"
	"testing"
)

// TestDemoJSON: the demo delivers every committed event exactly once, duplicates injected and skipped.
func TestDemoJSON(t *testing.T) {
	r := run(t, nil, "demo", "--json", "--orders", "400", "--duplicates", "30")
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
	r := run(t, nil, "demo", "--orders", "50")
	if r.code != 0 {
		t.Fatalf("demo exit %d: %s", r.code, r.stderr)
	}
	mustContain(t, "demo", r.stdout, "orders committed with their event        50", "events lost                               0", "events/s")
}

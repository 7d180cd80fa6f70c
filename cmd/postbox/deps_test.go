package main

import (
	"os/exec"
	"strings"
	"testing"
)

// TestRelayLinksNoServerNorBench: the production binary links neither an embedded NATS server (the demo's) nor the
// benchmark harness; each lives in a command of its own.
func TestRelayLinksNoServerNorBench(t *testing.T) {
	out, err := exec.Command("go", "list", "-deps", ".").CombinedOutput()
	if err != nil {
		t.Fatalf("go list -deps: %v\n%s", err, out)
	}
	for _, pkg := range strings.Fields(string(out)) {
		for _, banned := range []string{"github.com/nats-io/nats-server/", "github.com/postbox-go/postbox/bench",
			"github.com/postbox-go/postbox/broker/natsbroker/embedded", "github.com/twmb/franz-go/pkg/kfake"} {
			if strings.HasPrefix(pkg, banned) {
				t.Errorf("the postbox binary links %s", pkg)
			}
		}
	}
}

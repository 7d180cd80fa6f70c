package deploytest

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// The helm install lines of the README and docs/DEPLOY.md render, and their objects decode strictly: a value
// renamed in the chart fails here instead of in a reader's cluster.
func TestDocsHelmInstallRenders(t *testing.T) {
	helm := tool(t, "POSTBOX_HELM")
	found := 0
	for _, doc := range []string{"README.md", "docs/DEPLOY.md"} {
		b, err := os.ReadFile(filepath.Join(root, doc))
		if err != nil {
			t.Fatal(err)
		}
		for l := range strings.Lines(string(b)) {
			fields := strings.Fields(l)
			if len(fields) < 2 || fields[0] != "helm" || fields[1] != "install" {
				continue
			}
			found++
			fields[1] = "template"
			out, err := runErr(helm, fields[1:]...)
			if err != nil {
				t.Errorf("%s: %s: %v", doc, strings.TrimSpace(l), err)
				continue
			}
			r := decodeAll(t, doc, out)
			if len(r.deployments) != 1 || len(r.serviceMonitor) != 1 {
				t.Errorf("%s: %s rendered %d Deployments and %d ServiceMonitors, want one of each",
					doc, strings.TrimSpace(l), len(r.deployments), len(r.serviceMonitor))
			}
		}
	}
	if found < 2 {
		t.Errorf("found %d helm install lines in README.md and docs/DEPLOY.md, want one in each", found)
	}
}

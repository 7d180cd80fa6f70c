package cli

import (
	"path/filepath"
	"strings"
	"testing"
)

// TestMigrateTakesTheConfigFileSources: with a config file listing two sources and no --db, migrate up migrates
// each source and migrate status shows each (issue 35: both answered "--db is required"); a command that works on
// one database says that it reads no sources list, instead of asking for --db as if the file had none.
func TestMigrateTakesTheConfigFileSources(t *testing.T) {
	dir := t.TempDir()
	a, b := "sqlite:"+filepath.Join(dir, "a.db"), "sqlite:"+filepath.Join(dir, "b.db")
	file := writeFile(t, "postbox.yaml", "sources:\n  - name: tenant-a\n    db: "+a+"\n  - name: tenant-b\n    db: "+b+"\n")

	r := run(t, nil, "migrate", "up", "--config", file)
	if r.code != ExitOK {
		t.Fatalf("migrate up --config with two sources: exit %d, stderr %q", r.code, r.stderr)
	}
	if !strings.Contains(r.stdout, "== source tenant-a\napplied migration 0001") || !strings.Contains(r.stdout, "== source tenant-b\napplied migration 0001") {
		t.Errorf("migrate up --config did not migrate both sources:\n%s", r.stdout)
	}
	r = run(t, nil, "migrate", "status", "--config", file)
	if r.code != ExitOK || strings.Count(r.stdout, "0001     outbox") != 2 || strings.Contains(r.stdout, "to apply") {
		t.Errorf("migrate status --config: exit %d, stdout:\n%s\nstderr %q; want both sources up to date", r.code, r.stdout, r.stderr)
	}
	if r := run(t, nil, "status", "--config", file); r.code != ExitOK {
		t.Errorf("status --config after migrate up: exit %d, stderr %q", r.code, r.stderr)
	}
	r = run(t, nil, "dead", "list", "--config", file)
	if r.code != ExitUsage || !strings.Contains(r.stderr, "reads no sources list") || !strings.Contains(r.stderr, file) {
		t.Errorf("dead list --config with sources: exit %d, stderr %q; want exit 2 saying it reads no sources list", r.code, r.stderr)
	}
}

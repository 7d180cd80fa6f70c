package cli

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/postbox-go/postbox/internal/testenv"
)

// TestMistypedSQLitePathCreatesNoFile: a command given a sqlite: path that does not exist must not create the
// file (issue 35: `postbox status --db sqlite:tpyo.db` created it, then suggested migrating it). It exits 1 naming
// the path and the migrate up command that would create it; only migrate up creates the file.
func TestMistypedSQLitePathCreatesNoFile(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "tpyo.db")
	db := "sqlite:" + path
	for _, args := range [][]string{
		{"status", "--db", db},
		{"migrate", "status", "--db", db},
		{"dead", "list", "--db", db},
		{"dead", "count", "--db", db},
		{"topics", "list", "--db", db},
		{"cleanup", "--once", "--db", db},
		{"send", "--db", db, "--topic", "orders", "--type", "order.created"},
		{"relay", "--db", db, "--broker", "stdout:"},
	} {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		var out, errOut testenv.Buffer
		code := Run(ctx, args, &out, &errOut, env())
		cancel()
		if code != ExitFailure || !strings.Contains(errOut.String(), "the database file "+path+" does not exist") ||
			!strings.Contains(errOut.String(), "run `postbox migrate up --db "+db+"`") {
			t.Errorf("postbox %s: exit %d, stderr %q; want exit 1 naming the missing file and migrate up", strings.Join(args, " "), code, errOut.String())
		}
		if _, err := os.Stat(path); err == nil {
			t.Fatalf("postbox %s created %s", strings.Join(args, " "), path)
		}
	}
	if r := run(t, nil, "migrate", "up", "--db", db); r.code != ExitOK {
		t.Fatalf("migrate up: exit %d, %s", r.code, r.stderr)
	}
	if _, err := os.Stat(path); err != nil {
		t.Fatalf("migrate up did not create the database file: %v", err)
	}
	if r := run(t, nil, "status", "--db", db); r.code != ExitOK {
		t.Fatalf("status after migrate up: exit %d, %s", r.code, r.stderr)
	}
}

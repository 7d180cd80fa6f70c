package cli

import (
	"path/filepath"
	"testing"
)

// TestPoolerFlagsRefuseBadInput: a wrong --db-pooler, --listen-db or combination is a usage error in the flags'
// words, before anything connects.
func TestPoolerFlagsRefuseBadInput(t *testing.T) {
	sqlite := "sqlite:" + filepath.Join(t.TempDir(), "pooler.db")
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"status", "--db", sqlite, "--db-pooler", "bogus"}, `--db-pooler "bogus": use transaction`},
		{[]string{"status", "--db", sqlite, "--db-pooler", "transaction"}, "--db-pooler transaction applies to PostgreSQL"},
		{[]string{"relay", "--db", sqlite, "--broker", "stdout:", "--listen-db", "postgres://127.0.0.1:1/app"},
			"--listen-db postgres://127.0.0.1:1/app: give a direct PostgreSQL URL"},
		{[]string{"relay", "--db", "postgres://127.0.0.1:1/app", "--broker", "stdout:", "--listen-db", "mysql://127.0.0.1:1/app"},
			"give a direct PostgreSQL URL"},
		{[]string{"relay", "--db", "postgres://127.0.0.1:1/app", "--broker", "stdout:", "--no-listen", "--listen-db",
			"postgres://127.0.0.1:1/app"}, "--no-listen and --listen-db contradict each other"},
	} {
		r := run(t, nil, c.args...)
		if r.code != ExitUsage {
			t.Errorf("postbox %v: exit %d, want %d (usage)\n%s", c.args, r.code, ExitUsage, r.stderr)
			continue
		}
		mustContain(t, "postbox "+c.args[0]+" stderr", r.stderr, c.want)
	}
}

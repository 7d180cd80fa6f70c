package cli

import (
	"os/user"
	"strings"
	"testing"
)

// TestMessagesSpeakTheCLIsWords: errors and listings a CLI user reads name the CLI's flags and commands, not the
// library's fields (issue 35: `partitions` spoke of Config.Partitioned, `dead --id` said "invalid config",
// `migrate status` skipped 0003 without a word, and operations were logged with actor="").
func TestMessagesSpeakTheCLIsWords(t *testing.T) {
	tg := sqliteTarget(t)
	tg.ok(t, nil, "migrate", "up")

	r := run(t, nil, tg.args("dead", "retry", "--id", "nope")...)
	if r.code != ExitUsage || !strings.Contains(r.stderr, `--id nope: "nope" is not a UUID`) || strings.Contains(r.stderr, "invalid config") {
		t.Errorf("dead retry --id nope: exit %d, stderr %q; want exit 2 naming --id, without \"invalid config\"", r.code, r.stderr)
	}

	st := tg.ok(t, nil, "migrate", "status").stdout
	mustContain(t, "migrate status without --ordered", st, "0003", "not used without --ordered (migrate up --ordered adds it)", "0004")
	st = tg.ok(t, nil, "migrate", "status", "--ordered").stdout
	mustContain(t, "migrate status --ordered", st, "ordered_index", "run postbox migrate up --db "+shellQuote(tg.db)+" --table "+tg.table)
	if !strings.Contains(st, " --ordered\n") {
		t.Errorf("migrate status --ordered: the command to run lacks --ordered:\n%s", st)
	}

	// No USER in the environment: the operation is logged as the account the process runs as, never "".
	r = tg.ok(t, env(), "topics", "pause", "orders")
	want := "unknown (give --actor)"
	if u, err := user.Current(); err == nil && u.Username != "" {
		want = u.Username
	}
	if strings.Contains(r.stderr, `actor=""`) || !strings.Contains(r.stderr, "actor="+want) {
		t.Errorf("topics pause without USER or --actor logged:\n%s\nwant actor=%s", r.stderr, want)
	}
}

// TestPartitionsOnPlainTableSaysWhatToDo: `postbox partitions` on tables migrated without --partitioned exits 1
// naming the table, --partitioned and postbox cleanup, not the library's Config.Partitioned.
func TestPartitionsOnPlainTableSaysWhatToDo(t *testing.T) {
	tg := target{name: "postgres", db: postgresURL(t), table: freshTable(), quote: `"`}
	tg.ok(t, nil, "migrate", "up")
	r := run(t, nil, tg.args("partitions", "--once")...)
	if r.code != ExitFailure || strings.Contains(r.stderr, "Config.Partitioned") ||
		!strings.Contains(r.stderr, "was created without --partitioned") || !strings.Contains(r.stderr, "postbox cleanup") {
		t.Errorf("partitions on a plain table: exit %d, stderr %q; want exit 1 in the CLI's words", r.code, r.stderr)
	}
}

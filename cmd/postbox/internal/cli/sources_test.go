package cli

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestSourceNames(t *testing.T) {
	for raw, want := range map[string]string{
		"postgres://relay:secret@db-1:5432/tenant_a?sslmode=disable": "tenant_a",
		"mysql://root@127.0.0.1:3306/shop":                           "shop",
		"sqlite:/var/lib/app/orders.db":                              "orders",
		"postgres://db-1":                                            "postgres",
	} {
		if got := sourceNameOf(raw); got != want {
			t.Errorf("sourceNameOf(%q) = %q, want %q", raw, got, want)
		}
	}
}

// TestSourcesConfigErrors: a sources list the relay cannot serve is refused at start with the words the user
// wrote.
func TestSourcesConfigErrors(t *testing.T) {
	dir := t.TempDir()
	for name, c := range map[string]struct{ file, want string }{
		"unknown key":    {"sources:\n  - name: a\n    db: sqlite:a.db\n    tabel: x\n", `sources[0]: unknown key "tabel"`},
		"not a list":     {"sources: sqlite:a.db\n", "want a list of sources"},
		"no db":          {"sources:\n  - name: a\n", "sources[0] (a): db is required"},
		"same name":      {"sources:\n  - db: sqlite:x/a.db\n  - db: sqlite:y/a.db\n", `two sources are named "a"`},
		"bad name":       {"sources:\n  - name: a b\n    db: sqlite:a.db\n", `source name "a b"`},
		"empty list":     {"sources: []\n", "sources is empty"},
		"listen-db":      {"listen-db: postgres://x/y\nsources:\n  - db: postgres://x/a\n  - db: postgres://x/b\n", "--listen-db names one database"},
		"no broker":      {"sources:\n  - db: sqlite:" + filepath.Join(dir, "nb.db") + "\n", "source nb has no broker"},
		"db and sources": {"db: sqlite:x.db\nsources:\n  - db: sqlite:a.db\n", "--db and the config file's sources list both"},
		"negative max":   {"sources:\n  - db: sqlite:a.db\n    db-max-conns: -1\n", "db-max-conns -1"},
	} {
		t.Run(name, func(t *testing.T) {
			path := filepath.Join(dir, strings.ReplaceAll(name, " ", "_")+".yaml")
			if err := os.WriteFile(path, []byte(c.file), 0o600); err != nil {
				t.Fatal(err)
			}
			res := run(t, nil, "relay", "--config", path)
			if res.code == 0 || !strings.Contains(res.stderr, c.want) {
				t.Errorf("exit %d, stderr:\n%s\nwant it to say %q", res.code, res.stderr, c.want)
			}
		})
	}
}

// TestRelayServesRepeatedDB: --db given twice serves both databases from one relay, each source named after its
// file, and a message sent to either is published.
func TestRelayServesRepeatedDB(t *testing.T) {
	dir := t.TempDir()
	var ids []string
	var args []string
	for _, name := range []string{"alpha", "beta"} {
		db := "sqlite:" + filepath.Join(dir, name+".db")
		if r := run(t, nil, "migrate", "up", "--db", db); r.code != 0 {
			t.Fatalf("migrate %s: %s", name, r.stderr)
		}
		r := run(t, nil, "send", "--db", db, "-t", "orders", "--type", "order.created", "--data", "{}")
		if r.code != 0 {
			t.Fatalf("send %s: %s", name, r.stderr)
		}
		ids = append(ids, strings.TrimSpace(r.stdout))
		args = append(args, "--db", db)
	}
	stdout, stderr, stop := background(t, nil, append([]string{"relay", "--broker", "stdout:", "--poll-interval", "50ms"}, args...)...)
	eventually(t, "both messages published", func() bool {
		return strings.Contains(stdout.String(), ids[0]) && strings.Contains(stdout.String(), ids[1])
	})
	res := stop()
	if res.code != 0 {
		t.Fatalf("relay exit %d:\n%s", res.code, res.stderr)
	}
	for _, want := range []string{"source=alpha", "source=beta", "sources=2"} {
		if !strings.Contains(stderr.String(), want) {
			t.Errorf("relay log has no %s:\n%s", want, stderr.String())
		}
	}
}

// TestReadyWhileAnySourceIs: a relay of many sources is ready while every shared broker answers and at least one
// source is wholly ready, its database and its own brokers.
func TestReadyWhileAnySourceIs(t *testing.T) {
	for name, c := range map[string]struct {
		checks []check
		want   bool
	}{
		"one source down": {[]check{{Name: "source a", Source: "a", OK: true}, {Name: "source b", Source: "b"},
			{Name: "broker 1 (nats)", OK: true}}, true},
		"every source down": {[]check{{Name: "source a", Source: "a"}, {Name: "source b", Source: "b"},
			{Name: "broker 1 (nats)", OK: true}}, false},
		"shared broker down": {[]check{{Name: "source a", Source: "a", OK: true}, {Name: "broker 1 (nats)"}}, false},
		"the only up source's own broker down": {[]check{{Name: "source a", Source: "a", OK: true},
			{Name: "source a broker 1 (kafka)", Source: "a"}, {Name: "source b", Source: "b"}}, false},
		"one database":      {[]check{{Name: "database", OK: true}, {Name: "broker 1 (nats)", OK: true}}, true},
		"one database down": {[]check{{Name: "database"}, {Name: "broker 1 (nats)", OK: true}}, false},
	} {
		if got := isReady(c.checks); got != c.want {
			t.Errorf("%s: ready %v, want %v", name, got, c.want)
		}
	}
}

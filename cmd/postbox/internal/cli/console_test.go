package cli

import (
	"io"
	"net/http"
	"net/url"
	"regexp"
	"strings"
	"testing"
)

// TestConsole: postbox console serves the pages over two databases, names them without their credentials, and
// never shows the URL's password or the login token on a page or in its logs.
func TestConsole(t *testing.T) {
	const password, token = "C0nsoleURLSecret", "C0nsoleT0kenSecret"
	tg := target{name: "postgres", db: postgresURL(t), table: freshTable()}
	tg.ok(t, nil, "migrate", "up")
	tg.ok(t, nil, "send", "--topic", "orders", "--type", "order.created", "--data", `{"n":1}`)
	u, err := url.Parse(tg.db)
	if err != nil {
		t.Fatal(err)
	}
	u.User = url.UserPassword(u.User.Username(), password) // trust authentication ignores it
	other := sqliteTarget(t)
	other.table = tg.table
	other.ok(t, nil, "migrate", "up")

	_, stderr, stop := background(t, env("POSTBOX_CONSOLE_TOKEN", token), "console", "--db", u.String(), "--db", other.db,
		"--table", tg.table, "--inbox-table", tg.table+"_inbox", "--http", "127.0.0.1:0", "--sample-interval", "100ms")
	var base string
	eventually(t, "the console serving", func() bool {
		m := regexp.MustCompile(`url=(http://\S+)/`).FindStringSubmatch(stderr.String())
		if m != nil {
			base = m[1]
		}
		return m != nil
	})
	get := func(path string) string {
		t.Helper()
		resp, err := http.Get(base + path)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("GET %s: %s\n%s", path, resp.Status, b)
		}
		return string(b)
	}
	eventually(t, "the overview showing the pending message", func() bool {
		return strings.Contains(get("/"), `data-topic="orders"`)
	})
	name := u.Host + "/" + strings.Trim(u.Path, "/")
	for _, path := range []string{"/", "/dead", "/login", "/schema", "/api/overview", "/find?q=x"} {
		page := get(path)
		if strings.Contains(page, password) || strings.Contains(page, token) {
			t.Errorf("%s shows a secret:\n%s", path, page)
		}
		if path == "/" {
			mustContain(t, "the overview", page, name, "cli.db")
		}
	}
	r := stop()
	if r.code != 0 {
		t.Fatalf("console exit %d:\n%s", r.code, r.stderr)
	}
	if strings.Contains(r.stderr, password) || strings.Contains(r.stderr, token) {
		t.Errorf("the console's log shows a secret:\n%s", r.stderr)
	}
}

// TestConsoleUsage: the console takes its credentials from the environment only, and says what it needs.
func TestConsoleUsage(t *testing.T) {
	for _, c := range []struct {
		args    []string
		environ func(string) string
		want    string
	}{
		{[]string{"console"}, nil, "--db is required"},
		{[]string{"console", "--db", "sqlite::memory:", "--token", "x"}, nil, "--token"},
		{[]string{"console", "--db", "sqlite::memory:"}, env("POSTBOX_CONSOLE_USER", "ops"), "POSTBOX_CONSOLE_PASSWORD"},
	} {
		r := run(t, c.environ, c.args...)
		if r.code != ExitUsage || !strings.Contains(r.stderr, c.want) {
			t.Errorf("postbox %v: exit %d, want %d with %q:\n%s", c.args, r.code, ExitUsage, c.want, r.stderr)
		}
	}
}

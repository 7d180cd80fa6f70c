package cli

import (
	"io"
	"net/http"
	"net/http/cookiejar"
	"net/url"
	"regexp"
	"strings"
	"testing"
)

// TestConsole: postbox console serves the pages over two databases, and a third that is down at start, names
// them without their credentials, needs a login to read, answers only for its own host, and never shows the
// URL's password or the login token on a page or in its logs.
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

	const down = "postgres://postbox@127.0.0.1:1/nowhere?connect_timeout=1"
	_, stderr, stop := background(t, env("POSTBOX_CONSOLE_TOKEN", token), "console", "--db", u.String(), "--db", other.db,
		"--db", down, "--table", tg.table, "--inbox-table", tg.table+"_inbox", "--http", "127.0.0.1:0", "--sample-interval", "100ms")
	var base string
	eventually(t, "the console serving", func() bool {
		m := regexp.MustCompile(`url=(http://\S+)/`).FindStringSubmatch(stderr.String())
		if m != nil {
			base = m[1]
		}
		return m != nil
	})
	jar, _ := cookiejar.New(nil)
	client := &http.Client{Jar: jar, Transport: &http.Transport{}, CheckRedirect: func(*http.Request, []*http.Request) error {
		return http.ErrUseLastResponse
	}}
	defer client.CloseIdleConnections()
	status := func(req *http.Request) int {
		t.Helper()
		resp, err := client.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	req, _ := http.NewRequest(http.MethodGet, base+"/", nil)
	if code := status(req); code != http.StatusSeeOther {
		t.Fatalf("the overview before login: %d, want 303 to the login page", code)
	}
	req, _ = http.NewRequest(http.MethodGet, base+"/login", nil)
	req.Host = "rebound.example"
	if code := status(req); code != http.StatusMisdirectedRequest {
		t.Fatalf("a request naming another host: %d, want 421", code)
	}
	resp, err := client.Get(base + "/login")
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	csrf := regexp.MustCompile(`name="csrf" value="([^"]+)"`).FindSubmatch(b)
	if csrf == nil {
		t.Fatalf("the login page has no form:\n%s", b)
	}
	resp, err = client.PostForm(base+"/login", url.Values{"csrf": {string(csrf[1])}, "token": {token}})
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusSeeOther {
		t.Fatalf("login: %s", resp.Status)
	}
	get := func(path string) string {
		t.Helper()
		resp, err := client.Get(base + path)
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
			mustContain(t, "the overview", page, name, "cli.db", "127.0.0.1:1/nowhere", `data-down="true"`)
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

package console_test

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/cookiejar"
	"net/http/httptest"
	"net/url"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/postbox-go/postbox"
	"github.com/postbox-go/postbox/console"
	"github.com/postbox-go/postbox/driver/drivertest"
	"github.com/postbox-go/postbox/driver/pgxv5"
	"github.com/postbox-go/postbox/postboxtest"
)

// handlerEnv serves a console over fresh tables, without a browser, under the prefix /ops/postbox.
func handlerEnv(t *testing.T, cfg console.Config) (*httptest.Server, *postbox.Client[pgxTx]) {
	t.Helper()
	return handlerEnvAt(t, cfg, "/ops/postbox")
}

// handlerEnvAt serves a console over fresh tables under prefix ("" for the root of the site).
func handlerEnvAt(t *testing.T, cfg console.Config, prefix string) (*httptest.Server, *postbox.Client[pgxTx]) {
	t.Helper()
	pool, err := pgxpool.New(context.Background(), dbURL)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	logger, _ := testLogger(t)
	tables := drivertest.Tables(nil)
	tables.Logger = logger
	client := drivertest.Client(t, pgxv5.New(pool), tables)
	cfg.Databases = []console.Database{{Name: "main", Source: console.FromClient(client)}}
	if cfg.Logger == nil {
		cfg.Logger = logger
	}
	con, err := console.New(&cfg)
	if err != nil {
		t.Fatal(err)
	}
	mux := http.NewServeMux()
	mux.Handle(prefix+"/", http.StripPrefix(prefix, con))
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	return srv, client
}

// session is a browser-like client: cookies, and the CSRF token of the last page.
type session struct {
	t    *testing.T
	base string
	c    *http.Client
	csrf string
}

func newSession(t *testing.T, base string) *session {
	jar, _ := cookiejar.New(nil)
	return &session{t: t, base: base, c: &http.Client{Jar: jar, CheckRedirect: func(*http.Request, []*http.Request) error {
		return http.ErrUseLastResponse
	}}}
}

func (s *session) get(path string) (*http.Response, string) {
	s.t.Helper()
	resp, err := s.c.Get(s.base + path)
	if err != nil {
		s.t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if m := regexp.MustCompile(`name="csrf" value="([^"]+)"`).FindSubmatch(b); m != nil {
		s.csrf = string(m[1])
	}
	return resp, string(b)
}

func (s *session) post(path string, form url.Values) *http.Response {
	s.t.Helper()
	resp, err := s.c.PostForm(s.base+path, form)
	if err != nil {
		s.t.Fatal(err)
	}
	resp.Body.Close()
	return resp
}

func (s *session) login(token string) *http.Response {
	s.get("/login")
	return s.post("/login", url.Values{"csrf": {s.csrf}, "token": {token}, "next": {"/"}})
}

// TestHandlerSecurityHeaders: every page forbids framing, inline scripts and caching.
func TestHandlerSecurityHeaders(t *testing.T) {
	srv, _ := handlerEnv(t, console.Config{Token: token})
	s := newSession(t, srv.URL+"/ops/postbox")
	s.login(token)
	for _, path := range []string{"/", "/dead", "/find", "/replay", "/inbox", "/schema", "/login", "/api/overview"} {
		resp, _ := s.get(path)
		h := resp.Header
		if resp.StatusCode != http.StatusOK {
			t.Errorf("%s: %s", path, resp.Status)
		}
		csp := h.Get("Content-Security-Policy")
		if !strings.Contains(csp, "script-src 'self'") || strings.Contains(csp, "unsafe-inline") || !strings.Contains(csp, "frame-ancestors 'none'") {
			t.Errorf("%s: Content-Security-Policy %q", path, csp)
		}
		if h.Get("X-Frame-Options") != "DENY" || h.Get("Cache-Control") != "no-store" || h.Get("X-Content-Type-Options") != "nosniff" {
			t.Errorf("%s: headers %v", path, h)
		}
	}
}

// TestHandlerMountedUnderPrefix: under http.StripPrefix the links and cookies follow the prefix.
func TestHandlerMountedUnderPrefix(t *testing.T) {
	srv, _ := handlerEnv(t, console.Config{Token: token})
	s := newSession(t, srv.URL+"/ops/postbox")
	if resp, _ := s.get("/dead"); resp.StatusCode != http.StatusSeeOther || resp.Header.Get("Location") != "/ops/postbox/login?next=%2Fdead" {
		t.Errorf("/dead before login: %s to %q, want the login page under the prefix", resp.Status, resp.Header.Get("Location"))
	}
	resp, _ := s.get("/login")
	for _, c := range resp.Cookies() {
		if c.Path != "/ops/postbox/" || !c.HttpOnly || c.SameSite != http.SameSiteStrictMode {
			t.Errorf("cookie %s: path %q, HttpOnly %v, SameSite %v", c.Name, c.Path, c.HttpOnly, c.SameSite)
		}
	}
	if resp := s.login(token); resp.StatusCode != http.StatusSeeOther || resp.Header.Get("Location") != "/ops/postbox/" {
		t.Errorf("login: %s to %q", resp.Status, resp.Header.Get("Location"))
	}
	_, page := s.get("/dead")
	for _, want := range []string{`href="/ops/postbox/assets/console.css"`, `action="/ops/postbox/dead"`, `href="/ops/postbox/find"`} {
		if !strings.Contains(page, want) {
			t.Errorf("the page lacks %s", want)
		}
	}
	if resp, _ := s.get("/assets/console.js"); resp.StatusCode != http.StatusOK {
		t.Errorf("the script under the prefix: %s", resp.Status)
	}
}

// TestHandlerRefusals: a wrong credential, a read-only console and a console without credentials refuse changes.
func TestHandlerRefusals(t *testing.T) {
	srv, client := handlerEnv(t, console.Config{User: "ops", Password: "correct horse"})
	s := newSession(t, srv.URL+"/ops/postbox")
	s.get("/login")
	if resp := s.post("/login", url.Values{"csrf": {s.csrf}, "user": {"ops"}, "password": {"wrong"}}); resp.StatusCode != http.StatusUnauthorized {
		t.Errorf("a wrong password: %s, want 401", resp.Status)
	}
	if resp := s.post("/login", url.Values{"user": {"ops"}, "password": {"correct horse"}}); resp.StatusCode != http.StatusForbidden {
		t.Errorf("a login without the CSRF token: %s, want 403", resp.Status)
	}
	if resp := s.post("/login", url.Values{"csrf": {s.csrf}, "user": {"ops"}, "password": {"correct horse"}}); resp.StatusCode != http.StatusSeeOther {
		t.Errorf("the right password: %s, want 303", resp.Status)
	}
	s.get("/")
	if resp := s.post("/topics/main/pause", url.Values{"csrf": {s.csrf}, "topic": {"orders"}, "confirm": {"1"}}); resp.StatusCode != http.StatusSeeOther {
		t.Errorf("pause when logged in: %s, want 303", resp.Status)
	}
	paused, err := client.PausedTopics(context.Background())
	if err != nil || len(paused) != 1 || paused[0].PausedBy != "ops" {
		t.Errorf("paused topics %+v, %v; want orders paused by ops", paused, err)
	}

	for _, cfg := range []console.Config{{Token: token, ReadOnly: true}, {}} {
		srv, _ := handlerEnv(t, cfg)
		s := newSession(t, srv.URL+"/ops/postbox")
		s.login(token)
		_, page := s.get("/")
		if strings.Contains(page, "data-pause") || strings.Contains(page, `action="/ops/postbox/topics/`) {
			t.Errorf("read-only %v, token %q: the overview offers a change", cfg.ReadOnly, cfg.Token)
		}
		if resp := s.post("/topics/main/pause", url.Values{"csrf": {s.csrf}, "topic": {"orders"}, "confirm": {"1"}}); resp.StatusCode < 400 {
			t.Errorf("read-only %v, token %q: pause answered %s", cfg.ReadOnly, cfg.Token, resp.Status)
		}
	}
}

// TestHandlerOverviewJSON: the JSON endpoint reports what waits, ready and scheduled apart, and the publish
// rate and latency of the kept published messages when no relay reports to the console.
func TestHandlerOverviewJSON(t *testing.T) {
	srv, client := handlerEnv(t, console.Config{})
	publishKept(t, client, 3)
	enqueueScheduled(t, client, 7, 2)
	resp, err := http.Get(srv.URL + "/ops/postbox/api/overview")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var out struct {
		Databases []struct {
			Name                      string
			Pending, Ready, Scheduled struct{ N int64 }
			Published                 struct{ N int64 }
			PublishedPerSecond        *float64 `json:"published_per_second"`
			LatencyP95Seconds         *float64 `json:"latency_p95_seconds"`
			Relays                    []string
			Topics                    []struct {
				Topic   string
				Pending int64
			}
		}
	}
	if err := json.NewDecoder(resp.Body).Decode(&out); err != nil {
		t.Fatal(err)
	}
	if len(out.Databases) != 1 {
		t.Fatalf("overview JSON %+v, want one database", out)
	}
	db := out.Databases[0]
	if db.Pending.N != 9 || db.Ready.N != 7 || db.Scheduled.N != 2 || len(db.Topics) != 1 || db.Topics[0].Pending != 9 {
		t.Errorf("overview JSON %+v, want 9 pending on orders: 7 ready, 2 scheduled", db)
	}
	if db.Published.N != 3 || db.PublishedPerSecond == nil || *db.PublishedPerSecond <= 0 || db.LatencyP95Seconds == nil || len(db.Relays) != 0 {
		t.Errorf("overview JSON %+v, want 3 kept published, a publish rate and a latency from them, and no relay seen", db)
	}
}

// TestHandlerOverviewStandalone: without relays reporting to it, the overview says what its publish figures
// need, then shows them once published messages are kept.
func TestHandlerOverviewStandalone(t *testing.T) {
	// Without Run, a page load samples the database unless the last sample is younger than two intervals.
	srv, client := handlerEnv(t, console.Config{SampleInterval: time.Millisecond})
	page := func() string {
		t.Helper()
		resp, err := http.Get(srv.URL + "/ops/postbox/")
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return string(b)
	}
	note := func(page, name string) string {
		m := regexp.MustCompile(`data-note="` + name + `">([^<]*)`).FindStringSubmatch(page)
		if m == nil {
			t.Fatalf("the overview has no %s note:\n%s", name, page)
		}
		return m[1]
	}
	p := page()
	for _, name := range []string{"rate", "latency"} {
		if n := note(p, name); n != "needs RelayConfig.KeepPublished or Console.Observer" {
			t.Errorf("%s note with nothing kept = %q, want what it needs", name, n)
		}
	}
	if n := note(p, "relays"); !strings.Contains(n, "needs Console.Observer") {
		t.Errorf("relays note = %q, want that it needs Console.Observer", n)
	}

	publishKept(t, client, 3)
	enqueueScheduled(t, client, 7, 2)
	p = page()
	for stat, want := range map[string]string{"pending": "9", "ready": "7", "scheduled": "2"} {
		if !strings.Contains(p, `data-stat="`+stat+`">`+want+`<`) {
			t.Errorf("the overview does not show %s %s:\n%s", want, stat, p)
		}
	}
	if n := note(p, "rate"); !strings.Contains(n, "from 3 kept") {
		t.Errorf("rate note = %q, want the rate from the 3 kept published messages", n)
	}
	if n := note(p, "latency"); !strings.Contains(n, "kept messages") {
		t.Errorf("latency note = %q, want the latency of the kept published messages", n)
	}
}

// publishKept enqueues n messages on "invoices" and publishes them with a relay that keeps them.
func publishKept(t *testing.T, client *postbox.Client[pgxTx], n int) {
	t.Helper()
	ctx := context.Background()
	err := client.InTx(ctx, func(ctx context.Context, tx pgxTx) error {
		return client.EnqueueBatch(ctx, tx, msgs(n, "invoices", "invoice.issued"))
	})
	if err != nil {
		t.Fatal(err)
	}
	r, err := postbox.NewRelay(client, &postboxtest.Recorder{}, &postbox.RelayConfig{KeepPublished: true})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := r.RunOnce(ctx); err != nil {
		t.Fatal(err)
	}
}

// enqueueScheduled enqueues ready messages due now and scheduled ones due in an hour, on "orders".
func enqueueScheduled(t *testing.T, client *postbox.Client[pgxTx], ready, scheduled int) {
	t.Helper()
	later := msgs(scheduled, "orders", "order.reminder")
	for i := range later {
		later[i].AvailableAt = time.Now().Add(time.Hour)
	}
	err := client.InTx(context.Background(), func(ctx context.Context, tx pgxTx) error {
		return client.EnqueueBatch(ctx, tx, append(msgs(ready, "orders", "order.created"), later...))
	})
	if err != nil {
		t.Fatal(err)
	}
}

// TestConfigRefused: a configuration that cannot work is refused with what to change.
func TestConfigRefused(t *testing.T) {
	for _, c := range []struct {
		cfg  console.Config
		want string
	}{
		{console.Config{}, "no database"},
		{console.Config{Databases: []console.Database{{Name: "a"}}}, "console.FromClient"},
		{console.Config{Databases: []console.Database{{Name: "a", Source: unusedSource{}}, {Name: "a", Source: unusedSource{}}}}, `two databases are named "a"`},
		{console.Config{Databases: []console.Database{{Name: "a", Source: unusedSource{}}}, User: "ops"}, "both User and Password"},
	} {
		_, err := console.New(&c.cfg)
		if !errors.Is(err, postbox.ErrInvalidConfig) || !strings.Contains(err.Error(), c.want) {
			t.Errorf("New(%+v): %v, want ErrInvalidConfig with %q", c.cfg, err, c.want)
		}
	}
}

// unusedSource is a Source New never calls: it only checks the configuration.
type unusedSource struct{ console.Source }

// TestHandlerKeySearchCut: a search by key that runs out of time says so and offers the whole table; an ID is
// found through the primary key whatever the budget.
func TestHandlerKeySearchCut(t *testing.T) {
	srv, client := handlerEnv(t, console.Config{Token: token, KeySearchTimeout: time.Nanosecond})
	var id string
	err := client.InTx(context.Background(), func(ctx context.Context, tx pgxTx) (err error) {
		id, err = client.Enqueue(ctx, tx, postbox.Message{Topic: "orders", Type: "order.created", Key: "customer-9", Payload: []byte("{}")})
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	s := newSession(t, srv.URL+"/ops/postbox")
	s.login(token)
	if _, page := s.get("/find?q=customer-9"); !strings.Contains(page, "stopped early") || !strings.Contains(page, "whole=1") {
		t.Errorf("a cut key search does not say so:\n%s", page)
	}
	if _, page := s.get("/find?q=customer-9&whole=1"); !strings.Contains(page, id) {
		t.Errorf("the whole-table search does not find %s", id)
	}
	if _, page := s.get("/find?q=" + id); !strings.Contains(page, id) || strings.Contains(page, "stopped early") {
		t.Errorf("the ID is not found by its primary key:\n%s", page)
	}
}

// TestHandlerRedactsSecrets: a configured secret never reaches a page, even when a message carries it (the
// request's own parameters aside: see TestRedactionIsNoOracle).
func TestHandlerRedactsSecrets(t *testing.T) {
	const secret = `pa<ss"w0rd`
	srv, client := handlerEnv(t, console.Config{Token: token, Secrets: []string{secret}})
	var id string
	err := client.InTx(context.Background(), func(ctx context.Context, tx pgxTx) (err error) {
		id, err = client.Enqueue(ctx, tx, postbox.Message{Topic: "orders", Type: "order.created", Key: secret,
			Payload: []byte(`{"password":"pa<ss\"w0rd"}`), Headers: map[string]string{"x-token": token}})
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	s := newSession(t, srv.URL+"/ops/postbox")
	s.login(token)
	for _, path := range []string{"/find?q=" + id, "/message/main/" + id, "/api/overview"} {
		_, page := s.get(path)
		for _, form := range []string{secret, "pa&lt;ss&#34;w0rd", `pa\u003css\"w0rd`, token} {
			if strings.Contains(page, form) {
				t.Errorf("%s shows the secret as %s", path, form)
			}
		}
		if path != "/api/overview" && !strings.Contains(page, "xxxxx") {
			t.Errorf("%s shows no redaction:\n%s", path, page)
		}
	}
}

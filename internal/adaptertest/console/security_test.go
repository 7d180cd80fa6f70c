package console_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"mime/multipart"
	"net/http"
	"net/url"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/postbox-go/postbox"
	"github.com/postbox-go/postbox/console"
	"github.com/postbox-go/postbox/internal/testenv"
	"github.com/postbox-go/postbox/postboxtest"
)

// The tests of this file each reproduce a finding of the console's second security review (issue 29): H2, M2,
// M3, M5, M6 and the console's low ones.

// strongToken and strongPassword pass the console's minimum strength.
const (
	strongToken    = "s3cure-console-token-0123456789"
	strongPassword = "a long enough passphrase"
)

// send makes a request with extra headers, without following redirects, and returns its response and body.
func (s *session) send(method, path string, body io.Reader, header http.Header) (*http.Response, string) {
	s.t.Helper()
	req, err := http.NewRequest(method, s.base+path, body)
	if err != nil {
		s.t.Fatal(err)
	}
	for k, v := range header {
		req.Header[k] = v
	}
	if h := header.Get("Host"); h != "" {
		req.Host = h
	}
	resp, err := s.c.Do(req)
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

// deadWith parks msgs as dead at once, their last error made by lastError.
func deadWith(t *testing.T, client *postbox.Client[pgxTx], lastError func(postbox.Record) string, msgs ...postbox.Message) []string {
	t.Helper()
	ctx := context.Background()
	var ids []string
	err := client.InTx(ctx, func(ctx context.Context, tx pgx.Tx) error {
		for _, m := range msgs {
			id, err := client.Enqueue(ctx, tx, m)
			if err != nil {
				return err
			}
			ids = append(ids, id)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	rec := &postboxtest.Recorder{Fail: func(r postbox.Record) error { return postbox.Permanent(errors.New(lastError(r))) }}
	r, err := postbox.NewRelay(client, rec, &postbox.RelayConfig{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := r.RunOnce(ctx); err != nil {
		t.Fatal(err)
	}
	return ids
}

// TestRedactionIsNoOracle (H2): the console never redacts what the request itself carries, so a guess sent in a
// parameter comes back as it was sent whether or not it is a secret: the page of a right guess and the page of a
// wrong one are the same.
func TestRedactionIsNoOracle(t *testing.T) {
	const dbPassword = "db-password-4711"
	srv, _ := handlerEnv(t, console.Config{Token: strongToken, Secrets: []string{dbPassword}})
	s := newSession(t, srv.URL+"/ops/postbox")
	csrf := regexp.MustCompile(`value="[A-Za-z0-9_-]{43}"`)
	page := func(path, guess string) string {
		_, p := s.get(strings.ReplaceAll(path, "GUESS", url.QueryEscape(guess)))
		return strings.ReplaceAll(csrf.ReplaceAllString(p, `value="csrf"`), guess, "GUESS")
	}
	paths := []string{"/login?next=/GUESS"}
	check := func() {
		for _, path := range paths {
			for _, secret := range []string{strongToken, dbPassword} {
				wrong := strings.Repeat("z", len(secret))
				if right, other := page(path, secret), page(path, wrong); right != other {
					i := 0
					for i < min(len(right), len(other)) && right[i] == other[i] {
						i++
					}
					t.Errorf("%s: a right guess of a secret answers another page than a wrong guess of its length, from %q",
						path, right[max(0, i-60):min(len(right), i+40)])
				}
			}
		}
	}
	check()
	if resp := s.login(strongToken); resp.StatusCode != http.StatusSeeOther {
		t.Fatalf("login: %s", resp.Status)
	}
	paths = []string{"/find?q=GUESS", "/dead?error=GUESS", "/dead?from=GUESS", "/replay?topic=GUESS", "/inbox?consumer=GUESS"}
	check()
}

// TestRedactionLeavesThePage (H2): a secret that is also a word of the page's own text does not blank it.
func TestRedactionLeavesThePage(t *testing.T) {
	srv, _ := handlerEnv(t, console.Config{Token: strongToken, Secrets: []string{"Replay", "Dead letters"}})
	s := newSession(t, srv.URL+"/ops/postbox")
	s.login(strongToken)
	_, page := s.get("/")
	for _, word := range []string{">Replay</a>", ">Dead letters</a>"} {
		if !strings.Contains(page, word) {
			t.Errorf("the navigation lost %s to redaction:\n%s", word, page)
		}
	}
}

// TestRedactionAtTheSources (H2): a secret inside a message's payload, headers, key, topic and last error is
// replaced before the page or the JSON escapes it, so that no escaped form of it (html/template's &#43;,
// JSON's \u003c) reaches the reader.
func TestRedactionAtTheSources(t *testing.T) {
	const secret = `pa+ss<w0rd>`
	srv, client := handlerEnv(t, console.Config{Token: strongToken, Secrets: []string{secret}})
	ids := deadWith(t, client, func(r postbox.Record) string {
		return "webhook: post message " + r.ID + " to https://u:" + secret + "@hooks.example/: 401"
	}, postbox.Message{Topic: "orders." + secret, Type: "order.created", Key: "k-" + secret,
		Payload: []byte(`{"password":"` + secret + `"}`), Headers: map[string]string{"x-auth": secret}})
	s := newSession(t, srv.URL+"/ops/postbox")
	s.login(strongToken)
	forms := []string{secret, "pa&#43;ss&lt;w0rd&gt;", `pa+ss\u003cw0rd\u003e`, "pa+ss&lt;w0rd&gt;", `pa+ss\u003Cw0rd\u003E`}
	for _, path := range []string{"/dead/main/" + ids[0], "/message/main/" + ids[0], "/dead?db=main", "/", "/api/overview"} {
		_, page := s.get(path)
		for _, form := range forms {
			if strings.Contains(page, form) {
				t.Errorf("%s shows the secret as %s", path, form)
			}
		}
		if !strings.Contains(page, "xxxxx") {
			t.Errorf("%s shows no redaction:\n%s", path, page)
		}
	}
}

// browserURL resolves a Location header as a browser does: it drops TAB, LF and CR, and reads a backslash as a
// slash.
func browserURL(base *url.URL, loc string) (*url.URL, error) {
	loc = strings.NewReplacer("\t", "", "\n", "", "\r", "", `\`, "/").Replace(loc)
	ref, err := url.Parse(loc)
	if err != nil {
		return nil, err
	}
	return base.ResolveReference(ref), nil
}

// TestLoginNextStaysInside (M2): the destination after a login is a path inside the console, whatever next says.
func TestLoginNextStaysInside(t *testing.T) {
	srv, _ := handlerEnv(t, console.Config{Token: strongToken})
	base, _ := url.Parse(srv.URL + "/ops/postbox/login")
	for _, next := range []string{"/\t/evil.example", "/\n/evil.example", "/\r/evil.example", "/%09/evil.example",
		`/\evil.example`, `/\/evil.example`, "/./", "/.//evil.example", "/..//evil.example", "//evil.example",
		"https://evil.example/", "/\x00/evil.example", "/ops/../\t/evil.example"} {
		s := newSession(t, srv.URL+"/ops/postbox")
		s.get("/login")
		resp := s.post("/login", url.Values{"csrf": {s.csrf}, "token": {strongToken}, "next": {next}})
		loc := resp.Header.Get("Location")
		if resp.StatusCode != http.StatusSeeOther {
			t.Errorf("next %q: %s", next, resp.Status)
			continue
		}
		u, err := browserURL(base, loc)
		if err != nil || u.Host != base.Host || !strings.HasPrefix(u.Path, "/ops/postbox/") || strings.ContainsAny(loc, "\t\r\n\\\x00") {
			t.Errorf("next %q: the login sends the browser to %q (%v), outside the console", next, loc, u)
		}
	}
	s := newSession(t, srv.URL+"/ops/postbox")
	s.get("/login")
	if resp := s.post("/login", url.Values{"csrf": {s.csrf}, "token": {strongToken}, "next": {"/dead?topic=orders"}}); resp.Header.Get("Location") != "/ops/postbox/dead?topic=orders" {
		t.Errorf("a page of the console as next: sent to %q", resp.Header.Get("Location"))
	}
}

// TestReadingNeedsLogin (M3): with credentials configured, no page, message or JSON is shown before a login.
func TestReadingNeedsLogin(t *testing.T) {
	srv, client := handlerEnv(t, console.Config{Token: strongToken})
	const card = "4111111111111111"
	ids := deadWith(t, client, func(postbox.Record) string { return "declined" },
		postbox.Message{Topic: "payments", Type: "payment.captured", Key: "customer-7", Payload: []byte(`{"card":"` + card + `"}`)})
	s := newSession(t, srv.URL+"/ops/postbox")
	for _, path := range []string{"/", "/live", "/api/overview", "/dead", "/dead/main/" + ids[0], "/message/main/" + ids[0],
		"/find?q=customer-7", "/replay", "/inbox", "/schema"} {
		resp, page := s.get(path)
		if resp.StatusCode == http.StatusOK || strings.Contains(page, card) {
			t.Errorf("%s before login: %s\n%s", path, resp.Status, page)
		}
		if path != "/api/overview" && path != "/live" && (resp.StatusCode != http.StatusSeeOther || !strings.HasPrefix(resp.Header.Get("Location"), "/ops/postbox/login?next=")) {
			t.Errorf("%s before login: %s to %q, want 303 to the login page", path, resp.Status, resp.Header.Get("Location"))
		}
	}
	s.login(strongToken)
	if resp, page := s.get("/dead/main/" + ids[0]); resp.StatusCode != http.StatusOK || !strings.Contains(page, card) {
		t.Errorf("the dead letter after login: %s", resp.Status)
	}
	// PublicReads keeps the pages open to read; changes still need the login.
	srv, _ = handlerEnv(t, console.Config{Token: strongToken, PublicReads: true})
	if resp, _ := newSession(t, srv.URL+"/ops/postbox").get("/dead"); resp.StatusCode != http.StatusOK {
		t.Errorf("PublicReads: /dead answered %s", resp.Status)
	}
}

// TestHostChecked (M3): with Config.Hosts set, a request naming another host (DNS rebinding) gets 421.
func TestHostChecked(t *testing.T) {
	srv, _ := handlerEnv(t, console.Config{Token: strongToken, Hosts: []string{"console.example", "127.0.0.1"}})
	s := newSession(t, srv.URL+"/ops/postbox")
	if resp, _ := s.send("GET", "/login", nil, http.Header{"Host": {"rebound.example"}}); resp.StatusCode != http.StatusMisdirectedRequest {
		t.Errorf("Host rebound.example: %s, want 421", resp.Status)
	}
	for _, host := range []string{"console.example", "console.example:8443", strings.TrimPrefix(srv.URL, "http://")} {
		if resp, _ := s.send("GET", "/login", nil, http.Header{"Host": {host}}); resp.StatusCode != http.StatusOK {
			t.Errorf("Host %s: %s, want 200", host, resp.Status)
		}
	}
}

// TestLoginLimitPerClient (M5): failed logins from one address hold back that address and that user only: an
// operator elsewhere still logs in, and parallel guesses cannot overrun the budget.
func TestLoginLimitPerClient(t *testing.T) {
	srv, _ := handlerEnv(t, console.Config{Token: strongToken, User: "ops", Password: strongPassword,
		TrustedProxies: []string{"127.0.0.1/32", "::1"}})
	from := func(addr string) http.Header {
		return http.Header{"X-Forwarded-For": {addr}, "Content-Type": {"application/x-www-form-urlencoded"}}
	}
	attacker := newSession(t, srv.URL+"/ops/postbox")
	attacker.get("/login")
	try := func(s *session, addr string, form url.Values) int {
		form.Set("csrf", s.csrf)
		resp, _ := s.send("POST", "/login", strings.NewReader(form.Encode()), from(addr))
		return resp.StatusCode
	}
	// Parallel guesses from one address: the budget is taken with each check, so most are refused unread.
	var wg sync.WaitGroup
	var mu sync.Mutex
	codes := map[int]int{}
	for range 40 {
		wg.Go(func() {
			c := try(attacker, "203.0.113.9", url.Values{"token": {"guess"}})
			mu.Lock()
			codes[c]++
			mu.Unlock()
		})
	}
	wg.Wait()
	if codes[http.StatusUnauthorized] > 10 || codes[http.StatusTooManyRequests] < 30 {
		t.Errorf("40 parallel guesses from one address: %v, want at most 10 checked (401), the rest 429", codes)
	}
	if c := try(attacker, "203.0.113.9", url.Values{"token": {strongToken}}); c != http.StatusTooManyRequests {
		t.Errorf("the right token from the guessing address: %d, want 429 while it backs off", c)
	}
	operator := newSession(t, srv.URL+"/ops/postbox")
	operator.get("/login")
	if c := try(operator, "198.51.100.4", url.Values{"token": {strongToken}}); c != http.StatusSeeOther {
		t.Errorf("the right token from another address: %d, want 303", c)
	}
	operator.get("/login") // the form's token is bound to the session the login started
	// Guesses at one user from many addresses hold that user back, and only that user.
	for i := range 12 {
		try(attacker, fmt.Sprintf("192.0.2.%d", i+1), url.Values{"user": {"ops"}, "password": {"guess"}})
	}
	if c := try(operator, "198.51.100.5", url.Values{"user": {"ops"}, "password": {strongPassword}}); c != http.StatusTooManyRequests {
		t.Errorf("user ops after 12 guesses from 12 addresses: %d, want 429", c)
	}
	if c := try(operator, "198.51.100.5", url.Values{"token": {strongToken}}); c != http.StatusSeeOther {
		t.Errorf("the token from a fresh address while user ops backs off: %d, want 303", c)
	}
	// X-Forwarded-For from an address that is not a trusted proxy is ignored: it names no client.
	srv, _ = handlerEnv(t, console.Config{Token: strongToken})
	s := newSession(t, srv.URL+"/ops/postbox")
	s.get("/login")
	for i := range 12 {
		try(s, fmt.Sprintf("192.0.2.%d", i+1), url.Values{"token": {"guess"}})
	}
	if c := try(s, "198.51.100.6", url.Values{"token": {strongToken}}); c != http.StatusTooManyRequests {
		t.Errorf("a forged X-Forwarded-For from an untrusted peer escaped the limit: %d, want 429", c)
	}
}

// TestRequestBodies (M6): no page reads a multipart body, GET parameters come from the URL only, and bodies are
// bounded.
func TestRequestBodies(t *testing.T) {
	srv, _ := handlerEnv(t, console.Config{Token: strongToken})
	s := newSession(t, srv.URL+"/ops/postbox")
	s.login(strongToken)
	var body strings.Builder
	mw := multipart.NewWriter(&body)
	_ = mw.WriteField("topic", "from-the-body")
	fw, _ := mw.CreateFormFile("upload", "big.bin")
	_, _ = io.WriteString(fw, strings.Repeat("x", 1<<20))
	_ = mw.Close()
	resp, page := s.send("GET", "/dead?db=main", strings.NewReader(body.String()), http.Header{"Content-Type": {mw.FormDataContentType()}})
	if strings.Contains(page, "from-the-body") {
		t.Errorf("a GET took a parameter from its multipart body (%s)", resp.Status)
	}
	resp, _ = s.send("POST", "/topics/main/pause", strings.NewReader(body.String()), http.Header{"Content-Type": {mw.FormDataContentType()}})
	if resp.StatusCode != http.StatusUnsupportedMediaType {
		t.Errorf("a multipart POST: %s, want 415", resp.Status)
	}
	big := "csrf=" + s.csrf + "&token=" + strings.Repeat("a", 2<<20)
	resp, _ = s.send("POST", "/login", strings.NewReader(big), http.Header{"Content-Type": {"application/x-www-form-urlencoded"}})
	if resp.StatusCode != http.StatusRequestEntityTooLarge {
		t.Errorf("a 2 MiB login form: %s, want 413", resp.Status)
	}
}

// TestWholeTableSearch (M6): a search of the whole table needs a login, runs one at a time, and stops at
// Config.WholeSearchTimeout.
func TestWholeTableSearch(t *testing.T) {
	srv, client := handlerEnv(t, console.Config{Token: strongToken, WholeSearchTimeout: 2 * time.Second})
	anon := newSession(t, srv.URL+"/ops/postbox")
	if resp, _ := anon.get("/find?q=customer-1&whole=1"); resp.StatusCode == http.StatusOK {
		t.Errorf("a whole-table search without login: %s", resp.Status)
	}
	s := newSession(t, srv.URL+"/ops/postbox")
	s.c.Timeout = 20 * time.Second // a search that never stops fails the test rather than hanging it
	s.login(strongToken)
	// A transaction holding the outbox locked keeps a search waiting.
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, dbURL)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	tx, err := conn.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = tx.Rollback(ctx) }()
	cfg := client.Config()
	table := pgx.Identifier{cfg.Table}.Sanitize()
	if cfg.Schema != "" {
		table = pgx.Identifier{cfg.Schema, cfg.Table}.Sanitize()
	}
	if _, err := tx.Exec(ctx, "LOCK TABLE "+table+" IN ACCESS EXCLUSIVE MODE"); err != nil {
		t.Fatal(err)
	}
	type answer struct {
		code int
		page string
	}
	first := make(chan answer, 1)
	go func() {
		resp, err := s.c.Get(s.base + "/find?q=customer-1&whole=1")
		if err != nil {
			first <- answer{0, err.Error()}
			return
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		first <- answer{resp.StatusCode, string(b)}
	}()
	watch, err := pgx.Connect(ctx, dbURL)
	if err != nil {
		t.Fatal(err)
	}
	defer watch.Close(ctx)
	testenv.Eventually(t, "the first search waiting for the lock", func() bool {
		var n int
		err := watch.QueryRow(ctx, "SELECT count(*) FROM pg_locks WHERE NOT granted AND relation = to_regclass($1)", table).Scan(&n)
		return err == nil && n > 0
	})
	second := newSession(t, srv.URL+"/ops/postbox")
	second.c.Timeout = 10 * time.Second
	second.login(strongToken)
	if resp, page := second.get("/find?q=customer-2&whole=1"); resp.StatusCode != http.StatusTooManyRequests || !strings.Contains(page, "Another search of the whole table is running") {
		t.Errorf("a second whole-table search while one runs: %s\n%s", resp.Status, page)
	}
	select {
	case a := <-first:
		if !strings.Contains(a.page, "stopped after") {
			t.Errorf("the search held by the lock answered %d without saying it stopped:\n%s", a.code, a.page)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("the whole-table search held by a lock did not stop at WholeSearchTimeout (2s) within 30s")
	}
}

// TestCookiesBehindTLSProxy (low): behind a trusted proxy saying the browser used HTTPS, cookies are Secure, and
// __Host- prefixed at the root of the site.
func TestCookiesBehindTLSProxy(t *testing.T) {
	srv, _ := handlerEnvAt(t, console.Config{Token: strongToken, TrustedProxies: []string{"127.0.0.1", "::1"}}, "")
	s := newSession(t, srv.URL)
	resp, _ := s.send("GET", "/login", nil, http.Header{"X-Forwarded-Proto": {"https"}})
	if len(resp.Cookies()) == 0 {
		t.Fatal("the login page sets no cookie")
	}
	for _, c := range resp.Cookies() {
		if !c.Secure || !strings.HasPrefix(c.Name, "__Host-") || c.Path != "/" {
			t.Errorf("cookie %s behind a TLS proxy: Secure %v, path %q; want Secure, __Host-, /", c.Name, c.Secure, c.Path)
		}
	}
	// Under a prefix, __Host- cannot be used; __Secure- can.
	srv, _ = handlerEnv(t, console.Config{Token: strongToken, TrustedProxies: []string{"127.0.0.1", "::1"}})
	s = newSession(t, srv.URL+"/ops/postbox")
	resp, _ = s.send("GET", "/login", nil, http.Header{"X-Forwarded-Proto": {"https"}})
	for _, c := range resp.Cookies() {
		if !c.Secure || !strings.HasPrefix(c.Name, "__Secure-") {
			t.Errorf("cookie %s behind a TLS proxy under a prefix: Secure %v; want Secure and __Secure-", c.Name, c.Secure)
		}
	}
	// The same header from a peer that is not a trusted proxy changes nothing.
	srv, _ = handlerEnvAt(t, console.Config{Token: strongToken}, "")
	resp, _ = newSession(t, srv.URL).send("GET", "/login", nil, http.Header{"X-Forwarded-Proto": {"https"}})
	for _, c := range resp.Cookies() {
		if c.Secure {
			t.Errorf("cookie %s Secure on the word of an untrusted peer", c.Name)
		}
	}
}

// TestCSRFBoundToSession (low): a CSRF cookie and token pair taken from one session do not carry another's
// change.
func TestCSRFBoundToSession(t *testing.T) {
	srv, client := handlerEnv(t, console.Config{Token: strongToken})
	attacker := newSession(t, srv.URL+"/ops/postbox")
	attacker.login(strongToken)
	attacker.get("/")
	u, _ := url.Parse(srv.URL + "/ops/postbox/")
	var csrfCookie *http.Cookie
	for _, c := range attacker.c.Jar.Cookies(u) {
		if strings.Contains(c.Name, "csrf") {
			csrfCookie = c
		}
	}
	victim := newSession(t, srv.URL+"/ops/postbox")
	victim.login(strongToken)
	victim.get("/")
	victim.c.Jar.SetCookies(u, []*http.Cookie{{Name: csrfCookie.Name, Value: csrfCookie.Value, Path: "/ops/postbox/"}})
	if resp := victim.post("/topics/main/pause", url.Values{"csrf": {attacker.csrf}, "topic": {"orders"}, "confirm": {"1"}}); resp.StatusCode != http.StatusForbidden {
		t.Errorf("another session's CSRF pair: %s, want 403", resp.Status)
	}
	if paused, _ := client.PausedTopics(context.Background()); len(paused) != 0 {
		t.Errorf("paused %v with another session's CSRF token", paused)
	}
}

// TestLogoutEndsSession (low): after a logout, a copy of the session cookie acts no more.
func TestLogoutEndsSession(t *testing.T) {
	srv, client := handlerEnv(t, console.Config{Token: strongToken})
	s := newSession(t, srv.URL+"/ops/postbox")
	s.login(strongToken)
	s.get("/")
	u, _ := url.Parse(srv.URL + "/ops/postbox/")
	saved := s.c.Jar.Cookies(u)
	csrf := s.csrf
	if resp := s.post("/logout", url.Values{"csrf": {csrf}}); resp.StatusCode != http.StatusSeeOther {
		t.Fatalf("logout: %s", resp.Status)
	}
	copied := newSession(t, srv.URL+"/ops/postbox")
	copied.c.Jar.SetCookies(u, saved)
	if resp := copied.post("/topics/main/pause", url.Values{"csrf": {csrf}, "topic": {"orders"}, "confirm": {"1"}}); resp.StatusCode != http.StatusUnauthorized {
		t.Errorf("a copied session cookie after logout: %s, want 401", resp.Status)
	}
	if paused, _ := client.PausedTopics(context.Background()); len(paused) != 0 {
		t.Errorf("paused %v through a logged-out session", paused)
	}
}

// TestTokensNamed (low): each token has its own name, which the page and the log lines show.
func TestTokensNamed(t *testing.T) {
	logger, logs := testLogger(t)
	srv, client := handlerEnv(t, console.Config{Tokens: map[string]string{"alice": strongToken + "-a", "bob": strongToken + "-b"}, Logger: logger})
	s := newSession(t, srv.URL+"/ops/postbox")
	s.login(strongToken + "-b")
	_, page := s.get("/")
	if !strings.Contains(page, `<span class="user">bob</span>`) {
		t.Errorf("the page does not name bob:\n%s", page)
	}
	s.post("/topics/main/pause", url.Values{"csrf": {s.csrf}, "topic": {"orders"}, "confirm": {"1"}})
	if paused, err := client.PausedTopics(context.Background()); err != nil || len(paused) != 1 || paused[0].PausedBy != "bob" {
		t.Errorf("paused %v, %v; want orders paused by bob", paused, err)
	}
	if !strings.Contains(logs.String(), "who=bob") {
		t.Errorf("the log does not name bob:\n%s", logs.String())
	}
}

// TestWeakCredentialsRefused (low): a console refuses tokens and passwords shorter than its minimums.
func TestWeakCredentialsRefused(t *testing.T) {
	dbs := []console.Database{{Name: "a", Source: unusedSource{}}}
	for _, c := range []struct {
		cfg  console.Config
		want string
	}{
		{console.Config{Databases: dbs, Token: "short-token"}, "Token is 11 bytes"},
		{console.Config{Databases: dbs, User: "ops", Password: "hunter2"}, "Password is 7 characters"},
		{console.Config{Databases: dbs, Tokens: map[string]string{"alice": "tiny"}}, `token "alice" is 4 bytes`},
	} {
		_, err := console.New(&c.cfg)
		if !errors.Is(err, postbox.ErrInvalidConfig) || !strings.Contains(err.Error(), c.want) {
			t.Errorf("New with a weak credential: %v, want ErrInvalidConfig with %q", err, c.want)
		}
		if err != nil && (strings.Contains(err.Error(), "short-token") || strings.Contains(err.Error(), "hunter2")) {
			t.Errorf("the refusal quotes the credential: %v", err)
		}
	}
}

// TestActionByFilterRecounted (low): retrying or purging by filter refuses when more messages match than the
// operator confirmed, and acts in batches of Config.ActionBatch.
func TestActionByFilterRecounted(t *testing.T) {
	logger, logs := testLogger(t)
	srv, client := handlerEnv(t, console.Config{Token: strongToken, ActionBatch: 2, Logger: logger})
	fail := func(postbox.Record) string { return "refused" }
	deadWith(t, client, fail, msgs(3, "payments", "payment.captured")...)
	s := newSession(t, srv.URL+"/ops/postbox")
	s.login(strongToken)
	s.get("/dead?topic=payments")
	_, page := s.send("POST", "/dead/main/act", strings.NewReader(url.Values{"csrf": {s.csrf}, "do": {"purge:filter"}, "topic": {"payments"}}.Encode()),
		http.Header{"Content-Type": {"application/x-www-form-urlencoded"}})
	if !strings.Contains(page, "This will purge <strong>3</strong>") {
		t.Fatalf("the confirmation page does not count 3:\n%s", page)
	}
	deadWith(t, client, fail, msgs(2, "payments", "payment.captured")...)
	confirm := func(n string) (*http.Response, string) {
		return s.send("POST", "/dead/main/act", strings.NewReader(url.Values{"csrf": {s.csrf}, "do": {"purge:filter"},
			"topic": {"payments"}, "confirm": {n}}.Encode()), http.Header{"Content-Type": {"application/x-www-form-urlencoded"}})
	}
	resp, page := confirm("3")
	if resp.StatusCode != http.StatusConflict || !strings.Contains(page, "This will purge <strong>5</strong>") {
		t.Errorf("confirming 3 when 5 match: %s, want 409 and a new confirmation of 5:\n%s", resp.Status, page)
	}
	if n, _ := client.CountDead(context.Background(), postbox.DeadFilter{Topic: "payments"}, 100); n.N != 5 {
		t.Fatalf("%d dead left after a refused purge, want 5", n.N)
	}
	if resp, _ := confirm("5"); resp.StatusCode != http.StatusSeeOther {
		t.Errorf("confirming 5: %s", resp.Status)
	}
	if n, _ := client.CountDead(context.Background(), postbox.DeadFilter{Topic: "payments"}, 100); n.N != 0 {
		t.Errorf("%d dead left after the purge, want 0", n.N)
	}
	if !strings.Contains(logs.String(), "count=5 batches=3") {
		t.Errorf("the purge was not done in 3 batches of at most 2:\n%s", logs.String())
	}
}

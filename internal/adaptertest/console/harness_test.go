// Package console_test drives the operator console in headless Chromium against the real handler, PostgreSQL and
// NATS JetStream.
package console_test

import (
	"context"
	"fmt"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/postbox-go/postbox"
	"github.com/postbox-go/postbox/broker/natsbroker"
	"github.com/postbox-go/postbox/console"
	"github.com/postbox-go/postbox/driver/drivertest"
	"github.com/postbox-go/postbox/driver/pgxv5"
	"github.com/postbox-go/postbox/internal/testenv"
)

// chromium is Debian's chromium, which scripts/chromium.sh installs.
const chromium = "/usr/bin/chromium"

// natsURL is the NATS server with JetStream the development machines run.
const natsURL = "nats://127.0.0.1:4222"

// token logs an operator in.
const token = "console-test-token"

var dbURL string

func TestMain(m *testing.M) {
	dbURL = testenv.OrExit(testenv.FreshPostgres("postbox_test_console"))
	os.Exit(m.Run())
}

// env is one test's world: its own tables, a console serving them, a NATS stream, and a browser tab.
type env struct {
	t      *testing.T
	client *postbox.Client[pgx.Tx]
	pool   *pgxpool.Pool
	con    *console.Console
	srv    *httptest.Server
	tab    context.Context
	js     jetstream.JetStream
	prefix string // every topic of the test starts with it
	log    *testenv.Buffer
	// readOnly is the console's Config.ReadOnly.
	readOnly bool
}

type envOptions struct {
	readOnly bool
	// downDB adds a second database, "down-db", whose server does not answer.
	downDB bool
}

func newEnv(t *testing.T, o envOptions) *env {
	t.Helper()
	if _, err := os.Stat(chromium); err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("%s is missing: run scripts/chromium.sh", chromium)
		}
		t.Skipf("%s is missing: run scripts/chromium.sh", chromium)
	}
	ctx := context.Background()
	pool, err := pgxpool.New(ctx, dbURL)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	logger, logBuf := testLogger(t)
	cfg := drivertest.Tables(nil)
	cfg.Logger = logger
	client := drivertest.Client(t, pgxv5.New(pool), cfg)
	dbs := []console.Database{{Name: "orders-db", Source: console.FromClient(client)}}
	if o.downDB {
		// Nothing listens on port 1: every query fails at once with connection refused.
		down, err := pgxpool.New(ctx, "postgres://postbox@127.0.0.1:1/nowhere?connect_timeout=1")
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(down.Close)
		downClient, err := postbox.NewClient(pgxv5.New(down), &postbox.Config{Table: cfg.Table, InboxTable: cfg.InboxTable})
		if err != nil {
			t.Fatal(err)
		}
		dbs = append(dbs, console.Database{Name: "down-db", Source: console.FromClient(downClient)})
	}
	con, err := console.New(&console.Config{
		Databases:      dbs,
		Token:          token,
		ReadOnly:       o.readOnly,
		SampleInterval: 300 * time.Millisecond,
		History:        time.Minute,
		// A loaded test machine must not cut the key searches the tests check; TestHandlerKeySearchCut cuts one.
		KeySearchTimeout: time.Minute,
		Logger:           logger,
	})
	if err != nil {
		t.Fatal(err)
	}
	runCtx, stop := context.WithCancel(ctx)
	var wg sync.WaitGroup
	wg.Go(func() { _ = con.Run(runCtx) })
	t.Cleanup(func() { stop(); wg.Wait() })
	srv := httptest.NewServer(con)
	t.Cleanup(srv.Close)

	nc, err := nats.Connect(natsURL, nats.Name(t.Name()))
	if err != nil {
		t.Fatalf("connect to NATS at %s: %v (the tests need a NATS server with JetStream there)", natsURL, err)
	}
	t.Cleanup(nc.Close)
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	prefix := "console" + strings.ToLower(regexp.MustCompile(`[^A-Za-z0-9]`).ReplaceAllString(t.Name(), ""))
	return &env{t: t, client: client, pool: pool, con: con, srv: srv, tab: browser(t), js: js, prefix: prefix, log: logBuf,
		readOnly: o.readOnly}
}

// browser starts a headless Chromium of the test's own, with a fresh profile, and returns a tab.
func browser(t *testing.T) context.Context {
	t.Helper()
	opts := []chromedp.ExecAllocatorOption{
		chromedp.ExecPath(chromium),
		chromedp.UserDataDir(t.TempDir()),
		chromedp.WindowSize(1280, 860),
		chromedp.Flag("headless", true),
		chromedp.Flag("no-sandbox", true),
		chromedp.Flag("disable-gpu", true),
		chromedp.Flag("disable-quic", true),
		chromedp.Flag("no-first-run", true),
		chromedp.Flag("disable-background-networking", true),
		chromedp.Flag("disable-component-update", true),
		chromedp.Flag("disable-sync", true),
		chromedp.Flag("disable-dev-shm-usage", true),
		chromedp.Flag("hide-scrollbars", true),
		chromedp.Flag("mute-audio", true),
	}
	alloc, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
	tab, cancelTab := chromedp.NewContext(alloc)
	t.Cleanup(func() { cancelTab(); cancelAlloc() })
	tab, cancelTimeout := context.WithTimeout(tab, 2*time.Minute)
	t.Cleanup(cancelTimeout)
	if err := chromedp.Do(tab); err != nil { // starts the browser
		t.Fatalf("start %s: %v", chromium, err)
	}
	return tab
}

// topic returns a topic name of the test's own.
func (e *env) topic(name string) string { return e.prefix + "." + name }

// stream makes a JetStream stream taking topic, removed when the test ends.
func (e *env) stream(topic string) jetstream.Stream {
	e.t.Helper()
	ctx := context.Background()
	name := strings.ToUpper(strings.ReplaceAll(topic, ".", "_"))
	s, err := natsbroker.EnsureStream(ctx, e.js, jetstream.StreamConfig{Name: name, Subjects: []string{topic},
		Storage: jetstream.MemoryStorage})
	if err != nil {
		e.t.Fatal(err)
	}
	e.t.Cleanup(func() { _ = e.js.DeleteStream(context.Background(), name) })
	return s
}

// streamIDs returns the message IDs (Nats-Msg-Id) a stream holds.
func (e *env) streamIDs(s jetstream.Stream) []string {
	e.t.Helper()
	ctx := context.Background()
	info, err := s.Info(ctx)
	if err != nil {
		e.t.Fatal(err)
	}
	var ids []string
	for seq := info.State.FirstSeq; seq > 0 && seq <= info.State.LastSeq; seq++ {
		m, err := s.GetMsg(ctx, seq)
		if err != nil {
			continue
		}
		ids = append(ids, m.Header.Get("Nats-Msg-Id"))
	}
	return ids
}

// relay runs a relay over the test's tables publishing to NATS until the test ends. A publish to a topic no
// stream takes fails, and with one attempt allowed the message goes dead at once.
func (e *env) relay() {
	e.t.Helper()
	pub, err := natsbroker.NewPublisher(e.js, nil)
	if err != nil {
		e.t.Fatal(err)
	}
	r, err := postbox.NewRelay(e.client, pub, &postbox.RelayConfig{PollInterval: 50 * time.Millisecond, MaxAttempts: 1,
		PublishTimeout: 2 * time.Second, PausedRefresh: 100 * time.Millisecond, KeepPublished: true,
		Observer: e.con.Observer("orders-db", "relay-1")})
	if err != nil {
		e.t.Fatal(err)
	}
	ctx, stop := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Go(func() { _ = r.Run(ctx) })
	e.t.Cleanup(func() { stop(); wg.Wait() })
}

// enqueue commits msgs and returns their IDs.
func (e *env) enqueue(msgs ...postbox.Message) []string {
	e.t.Helper()
	ids := make([]string, len(msgs))
	err := e.client.InTx(context.Background(), func(ctx context.Context, tx pgx.Tx) error {
		for i, m := range msgs {
			id, err := e.client.Enqueue(ctx, tx, m)
			if err != nil {
				return err
			}
			ids[i] = id
		}
		return nil
	})
	if err != nil {
		e.t.Fatal(err)
	}
	return ids
}

func msgs(n int, topic, typ string) []postbox.Message {
	out := make([]postbox.Message, n)
	for i := range out {
		out[i] = postbox.Message{Topic: topic, Type: typ, Key: fmt.Sprintf("customer-%d", i%3),
			Payload: fmt.Appendf(nil, `{"order":%d,"total":%d.50,"currency":"EUR"}`, 1000+i, 20+i)}
	}
	return out
}

// dead waits until n messages of topic are dead.
func (e *env) dead(topic string, n int) []postbox.Record {
	e.t.Helper()
	var recs []postbox.Record
	testenv.Eventually(e.t, fmt.Sprintf("%d dead messages on %s", n, topic), func() bool {
		var err error
		recs, err = e.client.ListDead(context.Background(), postbox.DeadFilter{Topic: topic})
		return err == nil && len(recs) == n
	})
	return recs
}

// do runs browser actions, failing the test on error.
func (e *env) do(what string, steps ...chromedp.Action[chromedp.Void]) {
	e.t.Helper()
	if err := chromedp.Do(e.tab, steps...); err != nil {
		e.t.Fatalf("%s: %v", what, err)
	}
}

// open loads a console page.
func (e *env) open(path string) {
	e.t.Helper()
	e.do("open "+path, chromedp.Navigate(e.srv.URL+path), chromedp.WaitReady(chromedp.CSS("main")))
}

// eval evaluates a JavaScript expression in the page.
func eval[T any](e *env, expr string) T {
	e.t.Helper()
	v, err := chromedp.Run(e.tab, chromedp.Evaluate[T](expr))
	if err != nil {
		e.t.Fatalf("evaluate %s: %v", expr, err)
	}
	return v
}

// waitText waits until the element sel matches contains want.
func (e *env) waitText(sel, want string) {
	e.t.Helper()
	expr := fmt.Sprintf(`(() => { const el = document.querySelector(%q); return !!el && el.textContent.includes(%q); })()`, sel, want)
	if _, err := chromedp.Run(e.tab, chromedp.Poll[bool](expr, chromedp.WithPollingTimeout(30*time.Second),
		chromedp.WithPollingInterval(100*time.Millisecond))); err != nil {
		e.t.Fatalf("waiting for %q in %s: %v; the page says: %s", want, sel, err, e.pageText())
	}
}

// waitTrue waits until the JavaScript expression expr is true in the page, and fails the test, saying what did not
// happen, when it is not within 30s.
func (e *env) waitTrue(what, expr string) {
	e.t.Helper()
	if _, err := chromedp.Run(e.tab, chromedp.Poll[bool](expr, chromedp.WithPollingTimeout(30*time.Second),
		chromedp.WithPollingInterval(100*time.Millisecond))); err != nil {
		e.t.Fatalf("waiting for %s: %v; the page says: %s", what, err, e.pageText())
	}
}

// pending returns how many of topic's messages wait to be published, read from the database.
func (e *env) pending(topic string) int64 {
	e.t.Helper()
	st, err := e.client.Stats(context.Background())
	if err != nil {
		e.t.Fatal(err)
	}
	for _, ts := range st.Topics {
		if ts.Topic == topic {
			return ts.Pending
		}
	}
	return 0
}

func (e *env) pageText() string {
	s, _ := chromedp.Run(e.tab, chromedp.Evaluate[string](`document.querySelector("main") ? document.querySelector("main").innerText : document.body.innerText`))
	return s
}

// login logs the browser in with the token.
func (e *env) login() {
	e.t.Helper()
	e.open("/login")
	e.do("log in", chromedp.SetValue(chromedp.CSS(`#login input[name=token]`), token))
	if _, err := chromedp.RunResponse(e.tab, chromedp.Click(chromedp.CSS(`#login button`))); err != nil {
		e.t.Fatal(err)
	}
	if e.readOnly {
		e.waitText("header .who", "read-only") // a read-only console names nobody: it offers no change
		return
	}
	e.waitText("header .who", "token")
}

// click clicks the element sel matches and waits for the page it loads.
func (e *env) click(sel string) {
	e.t.Helper()
	if _, err := chromedp.RunResponse(e.tab, chromedp.Click(chromedp.CSS(sel))); err != nil {
		e.t.Fatalf("click %s: %v; the page says: %s", sel, err, e.pageText())
	}
}

// press clicks the element sel matches from the page's own script, and waits for the page it loads: for the
// overview's live part, which the page replaces every sample interval, so that a node found first may be gone
// when a click reaches it. fill sets inputs first, by selector.
func (e *env) press(sel string, fill map[string]string) {
	e.t.Helper()
	var js strings.Builder
	js.WriteString("(() => {")
	for k, v := range fill {
		fmt.Fprintf(&js, "document.querySelector(%q).value = %q;", k, v)
	}
	fmt.Fprintf(&js, "document.querySelector(%q).click(); })()", sel)
	if _, err := chromedp.RunResponse(e.tab, chromedp.Evaluate[chromedp.Void](js.String())); err != nil {
		e.t.Fatalf("press %s: %v; the page says: %s", sel, err, e.pageText())
	}
}

// shot saves a screenshot of the page as name.png in the directory POSTBOX_CONSOLE_SCREENSHOTS names; it does
// nothing without it, so that test runs leave the tree as it was.
func (e *env) shot(name string) {
	e.t.Helper()
	dir := os.Getenv("POSTBOX_CONSOLE_SCREENSHOTS")
	if dir == "" {
		return
	}
	png, err := chromedp.Run(e.tab, chromedp.FullScreenshot(100))
	if err != nil {
		e.t.Fatalf("screenshot: %v", err)
	}
	if err := os.WriteFile(filepath.Join(dir, name+".png"), png, 0o644); err != nil {
		e.t.Fatal(err)
	}
}

type pgxTx = pgx.Tx

package cli

import (
	"bufio"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/postbox-go/postbox/broker/webhook"
	"github.com/postbox-go/postbox/internal/testenv/tcpproxy"
)

// TestCommands runs migrate, send, status, relay and dead against PostgreSQL, MariaDB and SQLite.
func TestCommands(t *testing.T) {
	for _, tg := range targets(t) {
		t.Run(tg.name, func(t *testing.T) { testCommands(t, tg) })
	}
}

func testCommands(t *testing.T, tg target) {
	ok := func(args ...string) result {
		t.Helper()
		return tg.ok(t, nil, args...)
	}

	// migrate sql needs no database: the URL only picks the dialect.
	sql := ok("migrate", "sql").stdout
	mustContain(t, "migrate sql", sql, "-- postbox migration 0001", "CREATE TABLE IF NOT EXISTS "+tg.quote+tg.table+tg.quote)
	if strings.Contains(sql, "migration 0003") {
		t.Errorf("migrate sql without --ordered lists the ordered index:\n%s", sql)
	}
	mustContain(t, "migrate sql --ordered", ok("migrate", "sql", "--ordered").stdout, "-- postbox migration 0003")
	if tg.name == "sqlite" {
		// The file does not exist before migrate up, and migrate status does not create it.
		r := run(t, nil, tg.args("migrate", "status")...)
		if r.code != ExitFailure || !strings.Contains(r.stderr, "does not exist") || !strings.Contains(r.stderr, "run `postbox migrate up") {
			t.Errorf("migrate status before up, on no file: exit %d, stderr %q", r.code, r.stderr)
		}
	} else {
		mustContain(t, "migrate status before up", ok("migrate", "status").stdout, "0001", " no", "to apply: run postbox migrate up")
	}
	mustContain(t, "migrate up", ok("migrate", "up").stdout, "applied migration 0001")
	mustContain(t, "migrate up again", ok("migrate", "up").stdout, "up to date")
	if st := ok("migrate", "status").stdout; strings.Contains(st, "to apply") {
		t.Errorf("migrate status after up:\n%s", st)
	}

	// send: inline data, @file, headers, JSON output; each prints the ID.
	uuid := regexp.MustCompile(`^[0-9a-f]{8}-[0-9a-f]{4}-7[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}\n$`)
	id1 := ok("send", "--topic", "orders", "--type", "order.created", "--key", "o-1", "--data", `{"id":"o-1"}`, "-H", "source=test").stdout
	if !uuid.MatchString(id1) {
		t.Fatalf("send printed %q; want a UUIDv7", id1)
	}
	file := writeFile(t, "order.json", `{"id":"o-2"}`)
	ok("send", "-t", "orders", "--type", "order.created", "-k", "o-2", "-d", "@"+file)
	var sent map[string]string
	if err := json.Unmarshal([]byte(ok("send", "-t", "payments", "--type", "payment.taken", "--data", "raw bytes", "--raw", "--json").stdout), &sent); err != nil || sent["id"] == "" {
		t.Fatalf("send --json: %v %v", sent, err)
	}
	if r := run(t, nil, tg.args("send", "-t", "orders", "--type", "x", "--data", "@/no/such/file")...); r.code != ExitUsage {
		t.Errorf("send with a missing @file: exit %d", r.code)
	}
	if r := run(t, nil, tg.args("send", "-t", "orders", "--type", "x", "-H", "ce-id=1")...); r.code != ExitUsage || !strings.Contains(r.stderr, "CloudEvents prefix") {
		t.Errorf("send with a reserved header: exit %d, %s", r.code, r.stderr)
	}

	// status: 3 pending on 2 topics.
	var st status
	if err := json.Unmarshal([]byte(ok("status", "--json").stdout), &st); err != nil {
		t.Fatal(err)
	}
	if st.Pending != 3 || st.Dead != 0 || len(st.Topics) != 2 || st.Topics[0].Topic != "orders" || st.Topics[0].Pending != 2 ||
		st.OldestPending == nil || st.OldestPendingAgeSeconds <= 0 {
		t.Fatalf("status --json = %+v", st)
	}
	mustContain(t, "status", ok("status").stdout, "pending: 3", "dead:    0", "TOPIC", "payments")

	// relay with a registry that knows order.created only: the payment is parked dead, the orders are printed to
	// stdout as CloudEvents JSON lines.
	config := writeFile(t, "postbox.yaml", `
events:
  - type: order.created
    topic: orders
    key_required: true
    schema:
      type: object
      required: [id]
      properties: {id: {type: string}}
`)
	stdout, _, stop := background(t, env("POSTBOX_CONFIG", config), tg.args("relay", "--broker", "stdout:", "--poll-interval", "20ms")...)
	eventually(t, "two orders published and the payment parked", func() bool {
		var s status
		r := run(t, nil, tg.args("status", "--json")...)
		return json.Unmarshal([]byte(r.stdout), &s) == nil && s.Pending == 0 && s.Dead == 1 &&
			strings.Count(stdout.String(), "\n") == 2
	})
	if r := stop(); r.code != 0 {
		t.Fatalf("relay exit %d after cancellation; stderr:\n%s", r.code, r.stderr)
	}
	var events []event
	sc := bufio.NewScanner(strings.NewReader(stdout.String()))
	for sc.Scan() {
		var e event
		if err := json.Unmarshal(sc.Bytes(), &e); err != nil {
			t.Fatalf("relay stdout line %q: %v", sc.Text(), err)
		}
		events = append(events, e)
	}
	// Two workers may publish the two orders in either order: find the first one by its ID.
	first := slices.IndexFunc(events, func(e event) bool { return e.ID+"\n" == id1 })
	if len(events) != 2 || first < 0 {
		t.Fatalf("published events %+v; want the two orders, one of them %s", events, strings.TrimSpace(id1))
	}
	if e := events[first]; e.Subject != "o-1" || e.Type != "order.created" || string(e.Data) != `{"id":"o-1"}` ||
		e.Headers["source"] != "test" || e.SpecVersion != "1.0" {
		t.Fatalf("published event %+v; want order o-1 as sent", e)
	}

	// dead list shows the payment with the registry's reason; retry makes it pending; purge deletes it.
	var dead []deadJSON
	if err := json.Unmarshal([]byte(ok("dead", "list", "--json").stdout), &dead); err != nil {
		t.Fatal(err)
	}
	if len(dead) != 1 || dead[0].ID != sent["id"] || !strings.Contains(dead[0].LastError, `"payment.taken" is not in the registry`) ||
		string(dead[0].PayloadBase64) != "raw bytes" {
		t.Fatalf("dead list = %+v", dead)
	}
	mustContain(t, "dead list", ok("dead", "list", "--topic", "payments").stdout, sent["id"], "payment.taken", "not in the registry")
	mustContain(t, "dead list of another topic", ok("dead", "list", "--topic", "orders").stdout, "no dead messages")
	if r := run(t, nil, tg.args("dead", "retry", "--id", "not-a-uuid")...); r.code != ExitUsage || !strings.Contains(r.stderr, "--id not-a-uuid") {
		t.Errorf("dead retry with a malformed ID: exit %d, %s", r.code, r.stderr)
	}
	mustContain(t, "dead retry", ok("dead", "retry", "--id", sent["id"]).stdout, "retried 1 dead message(s)")
	ok("status", "--json") // and it is pending again:
	if err := json.Unmarshal([]byte(ok("status", "--json").stdout), &st); err != nil || st.Pending != 1 || st.Dead != 0 {
		t.Fatalf("after retry: %+v %v", st, err)
	}
	// A relay without the registry publishes it.
	stdout, _, stop = background(t, nil, tg.args("relay", "--broker", "stdout:", "--poll-interval", "20ms")...)
	eventually(t, "the retried payment published", func() bool { return strings.Contains(stdout.String(), sent["id"]) })
	if r := stop(); r.code != 0 {
		t.Fatalf("relay exit %d", r.code)
	}
	mustContain(t, "dead purge with nothing dead", ok("dead", "purge", "--all", "--json").stdout, `{"purged":0}`)

	// purge: park three messages the registry does not know, then delete one by ID, one by topic, the rest.
	send := func(topic, typ string) string {
		t.Helper()
		var r map[string]string
		if err := json.Unmarshal([]byte(ok("send", "-t", topic, "--type", typ, "--data", "{}", "--json").stdout), &r); err != nil {
			t.Fatal(err)
		}
		return r["id"]
	}
	pay1, pay2, refund := send("payments", "payment.taken"), send("payments", "payment.taken"), send("refunds", "refund.made")
	deadIDs := func() []string {
		t.Helper()
		var dead []deadJSON
		if err := json.Unmarshal([]byte(ok("dead", "list", "--json").stdout), &dead); err != nil {
			t.Fatal(err)
		}
		var ids []string
		for _, d := range dead {
			ids = append(ids, d.ID)
		}
		slices.Sort(ids)
		return ids
	}
	deadCount := func() int64 {
		t.Helper()
		var s status
		if err := json.Unmarshal([]byte(ok("status", "--json").stdout), &s); err != nil {
			t.Fatal(err)
		}
		return s.Dead
	}
	_, _, stop = background(t, env("POSTBOX_CONFIG", config), tg.args("relay", "--broker", "stdout:", "--poll-interval", "20ms")...)
	eventually(t, "three messages parked", func() bool { return deadCount() == 3 })
	if r := stop(); r.code != 0 {
		t.Fatalf("relay exit %d", r.code)
	}
	mustContain(t, "dead count --type", ok("dead", "count", "--type", "payment.taken").stdout, "2 dead message(s)")
	mustContain(t, "dead count --error", ok("dead", "count", "--error", "not in the registry", "--json").stdout, `{"dead":3,"more":false}`)
	mustContain(t, "dead count --limit", ok("dead", "count", "--limit", "2").stdout, "more than 2 dead message(s)")
	var newest []deadJSON
	if err := json.Unmarshal([]byte(ok("dead", "list", "--newest", "--limit", "1", "--json").stdout), &newest); err != nil ||
		len(newest) != 1 || newest[0].ID != refund {
		t.Fatalf("dead list --newest --limit 1 = %+v, %v; want %s", newest, err, refund)
	}
	if err := json.Unmarshal([]byte(ok("dead", "list", "--newest", "--after", refund, "--type", "payment.taken", "--json").stdout), &newest); err != nil ||
		len(newest) != 2 || newest[0].ID != pay2 || newest[1].ID != pay1 {
		t.Fatalf("dead list --newest --after %s --type payment.taken = %+v, %v; want %s, %s", refund, newest, err, pay2, pay1)
	}
	for _, args := range [][]string{{"dead", "count", "--failed-from", "yesterday"}, {"dead", "purge", "--newest"}, {"dead", "list", "--after", "x"}} {
		if r := run(t, nil, tg.args(args...)...); r.code != ExitUsage {
			t.Errorf("%q: exit %d, want %d (usage)", args, r.code, ExitUsage)
		}
	}
	mustContain(t, "dead purge --id", ok("dead", "purge", "--id", pay1, "--json").stdout, `{"purged":1}`)
	if n, ids := deadCount(), deadIDs(); n != 2 || !slices.Equal(ids, slices.Sorted(slices.Values([]string{pay2, refund}))) {
		t.Fatalf("after purging %s: status dead %d, dead list %v", pay1, n, ids)
	}
	mustContain(t, "dead purge --topic", ok("dead", "purge", "--topic", "refunds", "--json").stdout, `{"purged":1}`)
	if n, ids := deadCount(), deadIDs(); n != 1 || !slices.Equal(ids, []string{pay2}) {
		t.Fatalf("after purging topic refunds: status dead %d, dead list %v; want only %s", n, ids, pay2)
	}
	mustContain(t, "dead purge --all", ok("dead", "purge", "--all", "--json").stdout, `{"purged":1}`)
	if n, ids := deadCount(), deadIDs(); n != 0 || len(ids) != 0 {
		t.Fatalf("after purging all: status dead %d, dead list %v", n, ids)
	}
}

// TestRelayHTTP checks /healthz, /readyz and /metrics, and routing of topics to brokers.
func TestRelayHTTP(t *testing.T) {
	tg := sqliteTarget(t)
	if r := run(t, nil, tg.args("migrate", "up")...); r.code != 0 {
		t.Fatal(r.stderr)
	}
	for _, topic := range []string{"orders.created", "orders.paid", "audit"} {
		if r := run(t, nil, tg.args("send", "-t", topic, "--type", "x", "--data", "{}")...); r.code != 0 {
			t.Fatal(r.stderr)
		}
	}
	// A delayed message stays pending while the relay runs: scheduled, it is not late and gives no age.
	if r := run(t, nil, tg.args("send", "-t", "orders.later", "--type", "x", "--data", "{}", "--delay", "1h")...); r.code != 0 {
		t.Fatal(r.stderr)
	}
	// Only orders.* has a route and there is no default broker: audit cannot be published, and with one attempt
	// allowed it is parked as dead.
	stdout, stderr, stop := background(t, nil, tg.args("relay", "--route", "orders.*=stdout:", "--http", "127.0.0.1:0",
		"--poll-interval", "20ms", "--max-attempts", "1")...)
	addr := regexp.MustCompile(`addr=(127\.0\.0\.1:\d+)`)
	eventually(t, "the HTTP listener", func() bool { return addr.MatchString(stderr.String()) })
	base := "http://" + addr.FindStringSubmatch(stderr.String())[1]
	get := func(path string) (int, string) {
		t.Helper()
		resp, err := http.Get(base + path)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	eventually(t, "two orders published", func() bool { return strings.Count(stdout.String(), "\n") == 2 })
	if code, body := get("/healthz"); code != 200 || body != "ok\n" {
		t.Errorf("/healthz = %d %q", code, body)
	}
	if code, body := get("/readyz"); code != 200 || !strings.Contains(body, `"ready":true`) {
		t.Errorf("/readyz = %d %s", code, body)
	}
	var metrics string
	eventually(t, "the dead audit message in /metrics", func() bool {
		_, metrics = get("/metrics")
		return strings.Contains(metrics, `postbox_dead_total{topic="audit"} 1`)
	})
	mustContain(t, "/metrics", metrics,
		"postbox_outbox_up 1", "# TYPE postbox_pending gauge", `postbox_pending{topic="audit"} 0`, `postbox_dead{topic="audit"} 1`,
		`postbox_pending{topic="orders.later"} 1`, `postbox_pending_scheduled{topic="orders.later"} 1`,
		`postbox_pending_ready{topic="orders.later"} 0`, "# TYPE postbox_oldest_pending_age_seconds gauge",
		`postbox_published_total{topic="orders.created"} 1`, `postbox_published_total{topic="orders.paid"} 1`,
		`postbox_publish_failures_total{topic="audit"} 1`, "# TYPE postbox_dead_total counter", "postbox_settle_errors_total 0",
		"# TYPE postbox_enqueue_to_publish_seconds histogram",
		`postbox_enqueue_to_publish_seconds_bucket{topic="orders.created",le="+Inf"} 1`,
		`postbox_enqueue_to_publish_seconds_count{topic="orders.paid"} 1`,
		"# TYPE postbox_batch_duration_seconds histogram", "postbox_batch_duration_seconds_count ",
		"# TYPE postbox_relay_unavailable_seconds_total counter", "postbox_relay_unavailable_seconds_total 0",
		"# TYPE go_goroutines gauge")
	ageLine := regexp.MustCompile(`(?m)^postbox_oldest_pending_age_seconds (\S+)$`).FindStringSubmatch(metrics)
	if ageLine == nil {
		t.Errorf("/metrics has no postbox_oldest_pending_age_seconds sample:\n%s", metrics)
	} else if age, err := strconv.ParseFloat(ageLine[1], 64); err != nil || age != 0 {
		t.Errorf("postbox_oldest_pending_age_seconds = %s while only the scheduled orders.later is pending; want 0", ageLine[1])
	}
	if strings.Contains(metrics, "otel_scope") || strings.Contains(metrics, "target_info") {
		t.Errorf("/metrics has OpenTelemetry's scope or target series:\n%s", metrics)
	}
	if strings.Contains(stdout.String(), `"topic":"audit"`) {
		t.Error("audit was published without a route")
	}
	if r := stop(); r.code != 0 {
		t.Fatalf("relay exit %d: %s", r.code, r.stderr)
	}
	mustContain(t, "relay log", stderr.String(), `no route matches topic \"audit\"`)
}

// TestReadyzReportsUnreachableDatabase: the relay keeps running when the database goes down, /readyz says so
// without the password, and the relay still stops cleanly.
func TestReadyzReportsUnreachableDatabase(t *testing.T) {
	const password = "R3adyzSecret"
	u, err := url.Parse(postgresURL(t))
	if err != nil {
		t.Fatal(err)
	}
	tg := target{name: "postgres", db: postgresURL(t), table: freshTable()}
	if r := run(t, nil, tg.args("migrate", "up")...); r.code != 0 {
		t.Fatal(r.stderr)
	}
	// The relay reaches the database through a proxy, cut once the relay has started.
	proxy := tcpproxy.Start(t, u.Host)
	u.Host, u.User = proxy.Addr(), url.UserPassword(u.User.Username(), password) // trust authentication ignores it
	q := u.Query()
	q.Set("connect_timeout", "1")
	u.RawQuery = q.Encode()
	tg.db = u.String()
	_, stderr, stop := background(t, nil, tg.args("relay", "--broker", "stdout:", "--http", "127.0.0.1:0", "--poll-interval", "50ms")...)
	addr := regexp.MustCompile(`addr=(127\.0\.0\.1:\d+)`)
	eventually(t, "the HTTP listener", func() bool { return addr.MatchString(stderr.String()) })
	proxy.Refuse(true)
	proxy.Cut()
	resp, err := http.Get("http://" + addr.FindStringSubmatch(stderr.String())[1] + "/readyz")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusServiceUnavailable || !strings.Contains(string(body), `"name":"database","ok":false`) ||
		strings.Contains(string(body), password) {
		t.Errorf("/readyz = %d %s", resp.StatusCode, body)
	}
	// /metrics still serves the relay's own series, says the outbox cannot be read, and reports no counts.
	resp, err = http.Get("http://" + addr.FindStringSubmatch(stderr.String())[1] + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	body, _ = io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 || !strings.Contains(string(body), "postbox_outbox_up 0") || strings.Contains(string(body), "postbox_pending") ||
		!strings.Contains(string(body), "postbox_settle_errors_total 0") || strings.Contains(string(body), password) {
		t.Errorf("/metrics = %d %s", resp.StatusCode, body)
	}
	r := stop()
	if r.code != 0 || strings.Contains(r.stderr, password) || !strings.Contains(r.stderr, "reading the outbox's counts for metrics") {
		t.Fatalf("relay exit %d; stderr:\n%s", r.code, r.stderr)
	}
}

// TestSendEnforcesRegistry: send refuses what the config file's registry refuses, with the reason, and writes
// nothing.
func TestSendEnforcesRegistry(t *testing.T) {
	tg := sqliteTarget(t)
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "order.json"), []byte(`{"type":"object","required":["id"],"additionalProperties":false,"properties":{"id":{"type":"string"}}}`), 0o600); err != nil {
		t.Fatal(err)
	}
	config := filepath.Join(dir, "postbox.yaml")
	if err := os.WriteFile(config, []byte("events:\n  - type: order.created\n    topic: orders\n    key_required: true\n    schema_file: order.json\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	environ := env("POSTBOX_CONFIG", config)
	if r := run(t, environ, tg.args("migrate", "up")...); r.code != 0 {
		t.Fatal(r.stderr)
	}
	for want, args := range map[string][]string{
		`payload is missing the required property "id"`:     {"-t", "orders", "--type", "order.created", "-k", "o", "--data", `{}`},
		`property "total", which the schema does not allow`: {"-t", "orders", "--type", "order.created", "-k", "o", "--data", `{"id":"o","total":1}`},
		`requires a key`:                         {"-t", "orders", "--type", "order.created", "--data", `{"id":"o"}`},
		`belongs on topic "orders"`:              {"-t", "sales", "--type", "order.created", "-k", "o", "--data", `{"id":"o"}`},
		`"order.shipped" is not in the registry`: {"-t", "orders", "--type", "order.shipped", "--data", `{}`},
	} {
		r := run(t, environ, tg.args(append([]string{"send"}, args...)...)...)
		if r.code != ExitUsage || !strings.Contains(r.stderr, want) {
			t.Errorf("send %v: exit %d, %s; want exit 2 and %q", args, r.code, r.stderr, want)
		}
	}
	if r := run(t, environ, tg.args("send", "-t", "orders", "--type", "order.created", "-k", "o", "--data", `{"id":"o"}`)...); r.code != 0 {
		t.Fatalf("valid send: %s", r.stderr)
	}
	if r := run(t, nil, tg.args("status", "--json")...); !strings.Contains(r.stdout, `"pending":1,`) {
		t.Fatalf("status after one valid send and five refused: %s", r.stdout)
	}
}

// TestRelayToWebhook: the relay POSTs each message to its topic's endpoint, signed with the webhook secret in
// the Standard Webhooks form (whsec_ and base64, decoded to the key) from the environment, the config file or
// the command line, which it never prints; on the command line it warns that ps shows the secret.
func TestRelayToWebhook(t *testing.T) {
	const secret = "whsec_U2gwdWxkTmV2ZXJQcmludC0wMTIzNDU2Nzg5YWJj" // base64 of Sh0uldNeverPrint-0123456789abc
	const cmdLineWarning = "--webhook-secret on the command line is visible"
	type hit struct{ path, id string }
	hits := make(chan hit, 10)
	verifier := &webhook.Verifier{Secrets: []string{secret}}
	srv := httptest.NewServer(verifier.Middleware(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hits <- hit{r.URL.Path, r.Header.Get("ce-id")}
	})))
	defer srv.Close()
	file := filepath.Join(t.TempDir(), "postbox.yaml")
	if err := os.WriteFile(file, []byte("webhook-secret: "+secret+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}

	for _, tc := range []struct {
		from    string
		environ func(string) string
		args    []string
	}{
		{"POSTBOX_WEBHOOK_SECRET", env("POSTBOX_WEBHOOK_SECRET", secret), nil},
		{"the config file", nil, []string{"--config", file}},
		{"--webhook-secret", nil, []string{"--webhook-secret", secret}},
	} {
		t.Run(tc.from, func(t *testing.T) {
			tg := sqliteTarget(t)
			if r := run(t, nil, tg.args("migrate", "up")...); r.code != 0 {
				t.Fatal(r.stderr)
			}
			id := strings.TrimSpace(run(t, nil, tg.args("send", "-t", "orders", "--type", "order.created", "--data", "{}")...).stdout)
			_, _, stop := background(t, tc.environ, tg.args(append([]string{"relay", "--poll-interval", "20ms",
				"--broker", srv.URL + "/hooks/{topic}", "--log-level", "debug"}, tc.args...)...)...)
			select {
			case h := <-hits:
				if h.path != "/hooks/orders" || h.id != id {
					t.Errorf("webhook got %+v; want /hooks/orders with ce-id %s", h, id)
				}
			case <-time.After(30 * time.Second):
				t.Fatal("no signed request reached the webhook")
			}
			r := stop()
			if r.code != 0 || strings.Contains(r.stdout+r.stderr, strings.TrimPrefix(secret, "whsec_")) {
				t.Fatalf("relay exit %d; output:\n%s%s", r.code, r.stdout, r.stderr)
			}
			if warned := strings.Contains(r.stderr, cmdLineWarning); warned != (tc.from == "--webhook-secret") {
				t.Fatalf("secret from %s: warning about ps shown: %v; stderr:\n%s", tc.from, warned, r.stderr)
			}
		})
	}
}

// TestTopics pauses a topic, checks that the relay holds its messages back and publishes the others, then resumes
// it, on PostgreSQL, MariaDB and SQLite.
func TestTopics(t *testing.T) {
	for _, tg := range targets(t) {
		t.Run(tg.name, func(t *testing.T) {
			ok := func(args ...string) result {
				t.Helper()
				return tg.ok(t, nil, args...)
			}
			ok("migrate", "up")
			mustContain(t, "topics list before a pause", ok("topics", "list").stdout, "no paused topics")
			mustContain(t, "topics pause", ok("topics", "pause", "orders", "--actor", "alice").stdout, "paused orders")
			mustContain(t, "topics pause again", ok("topics", "pause", "orders").stdout, "orders was already paused")
			var paused []pausedJSON
			if err := json.Unmarshal([]byte(ok("topics", "list", "--json").stdout), &paused); err != nil || len(paused) != 1 ||
				paused[0].Topic != "orders" || paused[0].PausedBy != "alice" || paused[0].PausedAt.IsZero() {
				t.Fatalf("topics list --json = %+v, %v; want orders paused by alice", paused, err)
			}
			for _, args := range [][]string{{"topics"}, {"topics", "pause"}, {"topics", "stop", "orders"}, {"topics", "list", "orders"},
				{"topics", "pause", "orders", "--actor", "eve\x1b[2J"}} {
				if r := run(t, nil, tg.args(args...)...); r.code != ExitUsage {
					t.Errorf("%q: exit %d, want %d (usage)", args, r.code, ExitUsage)
				}
			}
			order := strings.TrimSpace(ok("send", "-t", "orders", "--type", "order.created", "--data", "{}").stdout)
			payment := strings.TrimSpace(ok("send", "-t", "payments", "--type", "payment.taken", "--data", "{}").stdout)
			stdout, _, stop := background(t, nil, tg.args("relay", "--broker", "stdout:", "--poll-interval", "20ms", "--paused-refresh", "20ms")...)
			eventually(t, "the payment published", func() bool { return strings.Contains(stdout.String(), payment) })
			mustContain(t, "topics resume", ok("topics", "resume", "orders", "--actor", "alice").stdout, "resumed orders")
			eventually(t, "the order published once its topic is resumed", func() bool { return strings.Contains(stdout.String(), order) })
			if r := stop(); r.code != 0 {
				t.Fatalf("relay exit %d", r.code)
			}
			if strings.Index(stdout.String(), order) < strings.Index(stdout.String(), payment) {
				t.Fatalf("the order of the paused topic was published before the payment:\n%s", stdout.String())
			}
			mustContain(t, "topics resume again", ok("topics", "resume", "orders", "--json").stdout, `"changed":false`)
		})
	}
}

package cli

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// deadAndPending fills tg with two pending messages (delayed an hour) and two dead ones (no route matches their
// topic and one attempt is allowed), and returns a function counting them.
func deadAndPending(t *testing.T, tg target) func() (pending, dead int64) {
	t.Helper()
	ok := func(args ...string) {
		t.Helper()
		tg.ok(t, nil, args...)
	}
	ok("migrate", "up")
	for range 2 {
		ok("send", "-t", "orders", "--type", "order.created", "--data", "{}", "--delay", "1h")
		ok("send", "-t", "payments", "--type", "payment.taken", "--data", "{}")
	}
	counts := func() (int64, int64) {
		t.Helper()
		var s status
		r := run(t, nil, tg.args("status", "--json")...)
		if err := json.Unmarshal([]byte(r.stdout), &s); err != nil {
			t.Fatalf("status --json: %v\n%s", err, r.stderr)
		}
		return s.Pending, s.Dead
	}
	_, _, stop := background(t, nil, tg.args("relay", "--route", "nothing=stdout:", "--max-attempts", "1", "--poll-interval", "20ms")...)
	eventually(t, "two messages parked as dead", func() bool { _, d := counts(); return d == 2 })
	if r := stop(); r.code != 0 {
		t.Fatalf("relay exit %d: %s", r.code, r.stderr)
	}
	return counts
}

// TestMySQLMultibyteCharsetInjection: with a charset in which a backslash can end a multibyte character, the
// driver's client-side escaping of a dead-letter filter can be undone, and "dead purge --topic" deleted pending
// messages. Such a charset is refused with interpolated parameters, and the filter itself must be printable UTF-8.
func TestMySQLMultibyteCharsetInjection(t *testing.T) {
	tg := target{name: "mysql", db: mysqlURL(t), table: freshTable(), quote: "`"}
	counts := deadAndPending(t, tg)
	gbk := tg
	gbk.db += "?charset=gbk"
	// The report's bytes, and valid UTF-8 that does the same: 中 is E4 B8 AD, and in gbk AD swallows the
	// backslash escaping the quote.
	for _, injection := range []string{"nomatch\xbf\x27 OR 1=1 -- ", "nomatch中' OR 1=1 -- "} {
		r := run(t, nil, gbk.args("dead", "purge", "--topic", injection)...)
		if p, d := counts(); p != 2 || d != 2 {
			t.Fatalf("dead purge --topic %q with ?charset=gbk: exit %d, %s%s; now %d pending and %d dead, want 2 and 2",
				injection, r.code, r.stdout, r.stderr, p, d)
		}
		if r.code != ExitUsage {
			t.Errorf("dead purge --topic %q with ?charset=gbk: exit %d, %s; want a usage error", injection, r.code, r.stderr)
		}
	}
	if r := run(t, nil, gbk.args("status")...); r.code != ExitUsage || !strings.Contains(r.stderr, "charset=gbk") {
		t.Errorf("status with ?charset=gbk: exit %d, %s; want a usage error naming the charset", r.code, r.stderr)
	}
	// The report's bytes on a safe charset are refused as a filter, naming the flag.
	r := run(t, nil, tg.args("dead", "purge", "--topic", "nomatch\xbf\x27 OR 1=1 -- ")...)
	if p, d := counts(); p != 2 || d != 2 || r.code != ExitUsage || !strings.Contains(r.stderr, "--topic") {
		t.Errorf("dead purge --topic with invalid UTF-8: exit %d, %s; %d pending and %d dead", r.code, r.stderr, p, d)
	}
	// A safe charset, or gbk without interpolation, still works.
	for _, q := range []string{"?charset=utf8mb4", "?charset=gbk&interpolateParams=false"} {
		if r := run(t, nil, "status", "--db", tg.db+q, "--table", tg.table); r.code != 0 {
			t.Errorf("status with %s: exit %d, %s", q, r.code, r.stderr)
		}
	}
}

// TestDeadListEscapesTerminalControls: a webhook receiver's answer lands in last_error; dead list prints it with
// its escape sequences made visible instead of sending them to the terminal, in the table and in JSON.
func TestDeadListEscapesTerminalControls(t *testing.T) {
	const secret = "whsec-TerminalTestSecretOf32Bytes!"
	const hostile = "\x1b]0;owned\x07\x1b[2J\u009b31m\u202egnp.exe"
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(http.StatusBadRequest)
		io.WriteString(w, hostile)
	}))
	defer srv.Close()
	tg := sqliteTarget(t)
	if r := run(t, nil, tg.args("migrate", "up")...); r.code != 0 {
		t.Fatal(r.stderr)
	}
	if r := run(t, nil, tg.args("send", "-t", "orders", "--type", "order.created", "--data", "{}")...); r.code != 0 {
		t.Fatal(r.stderr)
	}
	_, _, stop := background(t, env("POSTBOX_WEBHOOK_SECRET", secret), tg.args("relay", "--poll-interval", "20ms",
		"--broker", srv.URL+"/hooks", "--max-attempts", "1")...)
	eventually(t, "the message parked as dead", func() bool {
		return strings.Contains(run(t, nil, tg.args("dead", "list")...).stdout, "owned")
	})
	stop()
	for _, args := range [][]string{{"dead", "list"}, {"dead", "list", "--json"}} {
		out := run(t, nil, tg.args(args...)...).stdout
		if i := strings.IndexFunc(out, func(r rune) bool { return r != '\n' && unsafeRune(r) }); i >= 0 {
			t.Errorf("%v printed a raw control character at byte %d:\n%q", args, i, out)
		}
		if !strings.Contains(out, "owned") || !strings.Contains(out, "gnp.exe") {
			t.Errorf("%v hides the error text itself:\n%q", args, out)
		}
	}
}

func TestPrintable(t *testing.T) {
	for in, want := range map[string]string{
		"orders.created":         "orders.created",
		"עברית and ünïcode":      "עברית and ünïcode",
		"\x1b[2Jx\x07":           `\x1b[2Jx\x07`,
		"a\u009bb\u202ec\u2066d": `a\u009bb\u202ec\u2066d`,
		"bad\xbf\x27":            `bad\xbf'`,
		"\x7f":                   `\x7f`,
	} {
		if got := printable(in); got != want {
			t.Errorf("printable(%q) = %q; want %q", in, got, want)
		}
	}
	var b strings.Builder
	if err := writeJSON(&b, map[string]string{"t": "a\u009bb\u202ec\x1b"}); err != nil {
		t.Fatal(err)
	}
	var back map[string]string
	if got := b.String(); got != `{"t":"a\u009bb\u202ec\u001b"}`+"\n" || json.Unmarshal([]byte(got), &back) != nil || back["t"] != "a\u009bb\u202ec\x1b" {
		t.Errorf("writeJSON = %q; want the controls as \\u escapes, reading back the same", got)
	}
	var logged strings.Builder
	log, err := newLogger(&logged, &commonOptions{logLevel: "info", logFormat: "json"})
	if err != nil {
		t.Fatal(err)
	}
	log.Warn("publish failed", "err", "webhook answered \u009b2J\u202eexe")
	if strings.ContainsFunc(logged.String(), func(r rune) bool { return r != '\n' && unsafeRune(r) }) {
		t.Errorf("the JSON log has a raw control character: %q", logged.String())
	}
}

// TestMySQLUnsafeCharsetsRefused: every way a URL can choose the connection's character set is checked while the
// driver interpolates parameters.
func TestMySQLUnsafeCharsetsRefused(t *testing.T) {
	for _, q := range []string{"charset=gbk", "charset=utf8mb4,big5", "charset=SJIS", "charset=cp932", "charset=gb18030",
		"collation=gbk_chinese_ci", "character_set_client=gbk", "character_set_connection=%27big5%27", "collation_connection=sjis_japanese_ci"} {
		_, err := mysqlConfig("mysql://app@db/shop?" + q)
		if err == nil || !isUsage(err) || !strings.Contains(err.Error(), "interpolateParams=false") {
			t.Errorf("?%s: %v; want a usage error with the way out", q, err)
		}
	}
	for _, q := range []string{"charset=utf8mb4", "charset=utf8mb4,utf8", "charset=latin1", "collation=utf8mb4_unicode_ci",
		"collation=binary", "character_set_client=utf8mb4", "charset=gbk&interpolateParams=false"} {
		if _, err := mysqlConfig("mysql://app@db/shop?" + q); err != nil {
			t.Errorf("?%s: %v", q, err)
		}
	}
}

// pingCounter is a database whose Ping only counts.
type pingCounter struct {
	database
	pings atomic.Int64
}

func (p *pingCounter) Ping(context.Context) error { p.pings.Add(1); return nil }

// TestReadyzCachesItsChecks: however many requests /readyz gets, the database and each broker are pinged once per
// period, and the answer names brokers without their users or hosts, and without error texts that would.
func TestReadyzCachesItsChecks(t *testing.T) {
	db := &pingCounter{}
	var brokerPings atomic.Int64
	broker := &brokerConn{name: "nats://relayuser:xxxxx@nats.internal.example:4222", ping: func(context.Context) error {
		brokerPings.Add(1)
		return errors.New("dial tcp nats.internal.example:4222: user relayuser refused")
	}}
	var log strings.Builder
	ready := newReadiness(db, &router{fallback: broker}, slog.New(slog.NewTextHandler(&log, nil)))
	now := time.Unix(1_700_000_000, 0)
	ready.now = func() time.Time { return now }
	srv := httptest.NewServer(relayHandler(ready, &relayMetrics{handler: http.NotFoundHandler()}))
	defer srv.Close()
	get := func() (int, string) {
		t.Helper()
		resp, err := http.Get(srv.URL + "/readyz")
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	for range 20 {
		code, body := get()
		if code != http.StatusServiceUnavailable || !strings.Contains(body, `"name":"broker 1 (nats)","ok":false`) {
			t.Fatalf("/readyz = %d %s", code, body)
		}
		for _, leak := range []string{"relayuser", "nats.internal.example", "4222"} {
			if strings.Contains(body, leak) {
				t.Fatalf("/readyz shows %q: %s", leak, body)
			}
		}
	}
	if db.pings.Load() != 1 || brokerPings.Load() != 1 {
		t.Fatalf("20 requests within the period pinged the database %d times and the broker %d times; want once each",
			db.pings.Load(), brokerPings.Load())
	}
	if !strings.Contains(log.String(), "nats.internal.example:4222: user relayuser refused") {
		t.Errorf("the log lacks the broker's error:\n%s", log.String())
	}
	now = now.Add(readyzTTL)
	get()
	if db.pings.Load() != 2 || brokerPings.Load() != 2 {
		t.Fatalf("after the period: %d database and %d broker pings; want 2 each", db.pings.Load(), brokerPings.Load())
	}
}

// TestHTTPServerTimeouts: the relay's HTTP server cuts off slow and idle clients.
func TestHTTPServerTimeouts(t *testing.T) {
	srv := newHTTPServer(http.NotFoundHandler())
	if srv.ReadHeaderTimeout <= 0 || srv.ReadTimeout <= 0 || srv.WriteTimeout <= 0 || srv.IdleTimeout <= 0 {
		t.Fatalf("server timeouts: read header %v, read %v, write %v, idle %v; want all set",
			srv.ReadHeaderTimeout, srv.ReadTimeout, srv.WriteTimeout, srv.IdleTimeout)
	}
	r := run(t, nil, "relay", "--help")
	if strings.Contains(r.stdout+r.stderr, "--http :") || !strings.Contains(r.stdout+r.stderr, "--http 127.0.0.1:9090") {
		t.Errorf("relay --help binds every interface in its examples:\n%s", r.stdout+r.stderr)
	}
}

// TestPlaintextWarning: the relay warns when its database may be reached in plain text on another host, and is
// quiet when TLS is required or the host is this machine.
func TestPlaintextWarning(t *testing.T) {
	for raw, want := range map[string]string{
		"postgres://app@db.internal:5432/shop":                "db.internal",
		"postgres://app@db.internal:5432/shop?sslmode=prefer": "db.internal",
		"postgres://app@10.0.0.7/shop?sslmode=disable":        "10.0.0.7",
		"postgres://app@db.internal/shop?sslmode=require":     "",
		"postgres://app@db.internal/shop?sslmode=verify-full": "",
		"postgres://app@127.0.0.1/shop?sslmode=disable":       "",
		"postgres://app@localhost/shop":                       "",
		"postgres://app@[::1]/shop?sslmode=disable":           "",
		"mysql://app@db.internal:3306/shop":                   "db.internal",
		"mysql://app@db.internal:3306/shop?tls=preferred":     "db.internal",
		"mysql://app@db.internal:3306/shop?tls=true":          "",
		"mysql://app@127.0.0.1:3306/shop":                     "",
		"mysql://app@/shop?socket=/run/mysqld/mysqld.sock":    "",
		"sqlite:/var/lib/app.db":                              "",
		"nats://nats.internal:4222":                           "nats.internal",
		"nats://127.0.0.1:4222,nats-2.internal:4222":          "nats-2.internal",
		"nats://nats.internal:4222?tls=true":                  "",
		"tls://nats.internal:4222":                            "",
		"nats://localhost:4222":                               "",
		"amqp://guest:guest@rabbit.internal:5672/":            "rabbit.internal",
		"amqps://guest:guest@rabbit.internal/":                "",
		"redis://:pw@cache.internal:6379/0":                   "cache.internal",
		"kafka://k1.internal:9092,k2:9092":                    "k1.internal",
		"kafka://k1.internal:9092?tls=true":                   "",
		"http://hooks.internal/in":                            "hooks.internal",
		"https://hooks.internal/in":                           "",
		"stdout:":                                             "",
	} {
		check := plaintextBroker
		if s := dbScheme(raw); s == "postgres" || s == "mysql" || s == "sqlite" {
			check = plaintextDB
		}
		if got, _ := check(raw); got != want {
			t.Errorf("plaintext host of %s = %q; want %q", raw, got, want)
		}
	}
	// The warning comes before the relay connects: this one cannot, and waits for its database after the warning.
	_, stderr, stop := background(t, nil, "relay", "--db", "postgres://postbox:pw-Secret@192.0.2.1:5432/app?connect_timeout=1",
		"--broker", "stdout:", "--poll-interval", "50ms")
	eventually(t, "the relay waiting for its database", func() bool {
		return strings.Contains(stderr.String(), "database unreachable at start")
	})
	r := stop()
	if warn, waits := strings.Index(r.stderr, "the database connection may be plain text to a remote host"),
		strings.Index(r.stderr, "database unreachable at start"); warn < 0 || waits < warn ||
		!strings.Contains(r.stderr, "host=192.0.2.1") || strings.Contains(r.stderr, "pw-Secret") {
		t.Errorf("relay log:\n%s", r.stderr)
	}
}

// TestMySQLSessionParameterInjection (issue 29, M1): go-sql-driver sends a parameter it does not know as
// "SET name=value", unescaped, so a value holding ",character_set_client=gbk" chose gbk behind the charset
// guard's back, and the report's purge then deleted pending rows. Such values are refused, naming the parameter.
func TestMySQLSessionParameterInjection(t *testing.T) {
	tg := target{name: "mysql", db: mysqlURL(t), table: freshTable(), quote: "`"}
	counts := deadAndPending(t, tg)
	for _, q := range []string{"?autocommit=1%2Ccharacter_set_client%3Dgbk",
		"?autocommit=1%2Ccharacter_set_client%3Dgbk%2Ccharacter_set_connection%3Dgbk"} {
		bad := tg
		bad.db += q
		r := run(t, nil, bad.args("dead", "purge", "--topic", "nomatch中' OR 1=1 -- ")...)
		if p, d := counts(); p != 2 || d != 2 {
			t.Fatalf("dead purge with %s: exit %d, %s%s; now %d pending and %d dead, want 2 and 2", q, r.code, r.stdout, r.stderr, p, d)
		}
		if r.code != ExitUsage || !strings.Contains(r.stderr, "autocommit") {
			t.Errorf("dead purge with %s: exit %d, %s; want a usage error naming autocommit", q, r.code, r.stderr)
		}
	}
}

// Session variables in the URL take one plain value, or one quoted string with no quote or backslash inside;
// anything that could end the value and start another assignment is refused, naming the parameter.
func TestMySQLSessionValuesRefused(t *testing.T) {
	for _, q := range []string{"autocommit=1%2Ccharacter_set_client%3Dgbk", "wait_timeout=28800%3Bx", "sql_mode=%27ANSI%27%2C%27x%27",
		"sql_mode=ANSI%27", "sql_mode=%22ANSI%22", "time_zone=%27%2B00:00%27%2Ccharacter_set_client%3D%27gbk%27", "x=a%3Db",
		"sql_mode=%27a%5C%27", "sql_mode=ANSI%2F%2A", "x%3D1%2Ccharacter_set_client%3Dgbk%2Cautocommit=1"} {
		_, err := mysqlConfig("mysql://app@db/shop?" + q)
		name, _, _ := strings.Cut(q, "=") // as written: the driver keeps names escaped
		if err == nil || !isUsage(err) || !strings.Contains(err.Error(), name) {
			t.Errorf("?%s: %v; want a usage error naming %s", q, err, name)
		}
	}
	for _, q := range []string{"autocommit=1", "time_zone=%27%2B00:00%27", "sql_mode=%27ANSI_QUOTES,STRICT_ALL_TABLES%27", "wait_timeout=28800",
		"charset=utf8mb4,utf8", "tls=skip-verify&timeout=5s"} {
		if _, err := mysqlConfig("mysql://app@db/shop?" + q); err != nil {
			t.Errorf("?%s: %v", q, err)
		}
	}
}

// TestMySQLConnectionCharsetChecked (issue 29, M1): the URL is not the only thing that sets a connection's
// character set (a server's init_connect can pick gbk too), so every new connection is read back, and one whose
// character_set_client or character_set_connection is unsafe for interpolated parameters is refused.
func TestMySQLConnectionCharsetChecked(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for _, variable := range []string{"character_set_client", "character_set_connection"} {
		cfg, err := mysqlConfig(mysqlURL(t))
		if err != nil {
			t.Fatal(err)
		}
		cfg.Params = map[string]string{variable: "gbk"} // past the URL's checks, as init_connect would set it
		db, err := mysqlOpen(cfg)
		if err != nil {
			t.Fatal(err)
		}
		err = db.PingContext(ctx)
		db.Close()
		if err == nil || !strings.Contains(err.Error(), variable) || !strings.Contains(err.Error(), "interpolateParams=false") {
			t.Errorf("a connection with %s = gbk: %v; want it refused, naming %s and the way out", variable, err, variable)
		}
	}
	cfg, err := mysqlConfig(mysqlURL(t))
	if err != nil {
		t.Fatal(err)
	}
	db, err := mysqlOpen(cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if err := db.PingContext(ctx); err != nil {
		t.Errorf("a connection in utf8mb4: %v", err)
	}
}

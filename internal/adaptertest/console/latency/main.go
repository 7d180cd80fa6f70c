// Command latency measures how fast the console's pages answer on a large outbox: it seeds PostgreSQL with
// pending and dead messages (INSERT … SELECT over generate_series), serves the console over it with its sampler
// running, requests every page in turn, and prints each page's p50, p95 and slowest time, with the machine's
// load average. See docs/CONSOLE.md.
//
//	go run ./internal/adaptertest/console/latency                       # 1,000,000 pending, 100,000 dead, 100,000 published
//	go run ./internal/adaptertest/console/latency -pending 10000 -dead 1000 -published 1000 -requests 20
package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/cookiejar"
	"net/http/httptest"
	"net/url"
	"os"
	"regexp"
	"slices"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/postbox-go/postbox"
	"github.com/postbox-go/postbox/console"
	"github.com/postbox-go/postbox/driver/pgxv5"
	"github.com/postbox-go/postbox/internal/testenv"
)

const (
	table    = "console_latency_outbox"
	inbox    = "console_latency_inbox"
	database = "postbox_console_latency"
	dbName   = "main"
	token    = "latency-console-token"
)

func main() {
	pending := flag.Int("pending", 1_000_000, "pending messages to seed")
	dead := flag.Int("dead", 100_000, "dead messages to seed")
	published := flag.Int("published", 100_000, "kept published messages to seed, the newest published just now")
	requests := flag.Int("requests", 50, "requests per page, after 3 warm-up requests")
	reseed := flag.Bool("reseed", false, "seed again even when the table already holds the asked-for volume")
	flag.Parse()
	if err := run(*pending, *dead, *published, *requests, *reseed); err != nil {
		fmt.Fprintln(os.Stderr, "latency:", err)
		os.Exit(1)
	}
}

func run(pending, dead, published, requests int, reseed bool) error {
	ctx := context.Background()
	dbURL, err := ensureDatabase(ctx)
	if err != nil {
		return err
	}
	pool, err := pgxpool.New(ctx, dbURL)
	if err != nil {
		return err
	}
	defer pool.Close()
	client, err := postbox.NewClient(pgxv5.New(pool), &postbox.Config{Table: table, InboxTable: inbox})
	if err != nil {
		return err
	}
	if _, err := client.Migrate(ctx); err != nil {
		return err
	}
	if err := seed(ctx, pool, pending, dead, published, reseed); err != nil {
		return err
	}

	con, err := console.New(&console.Config{Databases: []console.Database{{Name: dbName, Source: console.FromClient(client)}},
		Token: token, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		return err
	}
	runCtx, stop := context.WithCancel(ctx)
	defer stop()
	sampled := make(chan struct{})
	go func() { defer close(sampled); _ = con.Run(runCtx) }()
	defer func() { stop(); <-sampled }()
	srv := httptest.NewServer(con)
	defer srv.Close()

	c, csrf, err := login(srv.URL)
	if err != nil {
		return err
	}
	var id, key string
	if err := pool.QueryRow(ctx, "SELECT id::text, key FROM "+table+" WHERE status = 'dead' ORDER BY id LIMIT 1 OFFSET 500").Scan(&id, &key); err != nil {
		return fmt.Errorf("pick a dead message: %w", err)
	}
	var cursor string
	if err := pool.QueryRow(ctx, "SELECT id::text FROM "+table+" WHERE status = 'dead' ORDER BY id LIMIT 1 OFFSET 49").Scan(&cursor); err != nil {
		return err
	}
	db := url.PathEscape(dbName)
	type page struct {
		name string
		do   func() (*http.Response, error)
	}
	get := func(path string) func() (*http.Response, error) {
		return func() (*http.Response, error) { return c.Get(srv.URL + path) }
	}
	post := func(path string, form url.Values) func() (*http.Response, error) {
		return func() (*http.Response, error) {
			form.Set("csrf", csrf)
			return c.PostForm(srv.URL+path, form)
		}
	}
	pages := []page{
		{"overview", get("/")},
		{"overview live part", get("/live")},
		{"overview JSON", get("/api/overview")},
		{"dead letters", get("/dead")},
		{"dead letters, page 2", get("/dead?cursor=" + cursor)},
		{"dead letters by topic", get("/dead?topic=topic-3")},
		{"dead letters by type", get("/dead?type=type-7")},
		{"dead letters by key", get("/dead?key=" + url.QueryEscape(key))},
		{"dead letters by error text", get("/dead?error=" + url.QueryEscape("connection refused"))},
		{"dead letters by error text matching none", get("/dead?error=" + url.QueryEscape("timed out"))},
		{"dead letters by time range", get("/dead?from=2020-01-01T00:00&to=2100-01-01T00:00")},
		{"dead letter", get("/dead/" + db + "/" + id)},
		{"purge confirmation (count)", post("/dead/"+db+"/act", url.Values{"do": {"purge:filter"}, "topic": {"topic-3"}})},
		{"purge confirmation, every dead", post("/dead/"+db+"/act", url.Values{"do": {"purge:filter"}})},
		{"find by ID", get("/find?q=" + id)},
		{"find by key", get("/find?q=" + url.QueryEscape(key))},
		{"replay count", get("/replay?topic=topic-3")},
		{"inbox", get("/inbox")},
		{"schema", get("/schema")},
	}
	var sample []time.Duration
	for range requests {
		t0 := time.Now()
		if _, err := client.Overview(ctx, console.DefaultCountLimit); err != nil {
			return err
		}
		sample = append(sample, time.Since(t0))
	}

	fmt.Printf("console page latency: %d pending, %d dead, %d published messages in PostgreSQL; %d requests per page\n",
		pending, dead, published, requests)
	fmt.Printf("load average before: %s\n", loadavg())
	fmt.Printf("%-42s %9s %9s %9s\n", "page", "p50", "p95", "max")
	for _, p := range pages {
		var ds []time.Duration
		for i := range requests + 3 {
			t0 := time.Now()
			resp, err := p.do()
			if err != nil {
				return fmt.Errorf("%s: %w", p.name, err)
			}
			body, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			d := time.Since(t0)
			if resp.StatusCode != http.StatusOK {
				return fmt.Errorf("%s: %s: %s", p.name, resp.Status, firstLine(string(body)))
			}
			if i >= 3 {
				ds = append(ds, d)
			}
		}
		printRow(p.name, ds)
	}
	printRow("(sampler: Client.Overview)", sample)
	fmt.Printf("load average after: %s\n", loadavg())
	return nil
}

func printRow(name string, ds []time.Duration) {
	slices.Sort(ds)
	q := func(p float64) time.Duration { return ds[min(len(ds)-1, int(p*float64(len(ds))))] }
	ms := func(d time.Duration) string { return fmt.Sprintf("%.1fms", float64(d.Microseconds())/1000) }
	fmt.Printf("%-42s %9s %9s %9s\n", name, ms(q(0.50)), ms(q(0.95)), ms(ds[len(ds)-1]))
}

// ensureDatabase creates the measurement's database when missing (never dropping it, so that a second run
// reuses the seeded rows) and returns its URL.
func ensureDatabase(ctx context.Context) (string, error) {
	admin := testenv.PostgresAdminURL()
	conn, err := pgx.Connect(ctx, admin)
	if err != nil {
		return "", fmt.Errorf("PostgreSQL is not reachable at %s (set POSTBOX_TEST_POSTGRES): %w", admin, err)
	}
	defer conn.Close(ctx)
	var exists bool
	if err := conn.QueryRow(ctx, "SELECT EXISTS (SELECT 1 FROM pg_database WHERE datname = $1)", database).Scan(&exists); err != nil {
		return "", err
	}
	if !exists {
		if _, err := conn.Exec(ctx, "CREATE DATABASE "+database); err != nil {
			return "", err
		}
	}
	u, err := url.Parse(admin)
	if err != nil {
		return "", err
	}
	u.Path = "/" + database
	return u.String(), nil
}

// seed fills the outbox with pending, dead and kept published messages over ten topics, in three INSERT … SELECT
// statements, with UUIDv7 IDs made in SQL from each row's creation time, then analyses the table as autovacuum
// would. Pending and dead messages were created from two hours ago, one every 5ms, and are kept for the next run
// when their numbers match; published ones are made afresh on each run, one every 5ms up to now, each published
// 40ms after its creation, so that the overview's recent figures read a full window.
func seed(ctx context.Context, pool *pgxpool.Pool, pending, dead, published int, reseed bool) error {
	var havePending, haveDead int
	err := pool.QueryRow(ctx, "SELECT count(*) FILTER (WHERE status = 'pending'), count(*) FILTER (WHERE status = 'dead') FROM "+table).
		Scan(&havePending, &haveDead)
	if err != nil {
		return err
	}
	t0 := time.Now()
	fresh := reseed || havePending != pending || haveDead != dead
	if fresh {
		_, err = pool.Exec(ctx, "TRUNCATE "+table)
	} else {
		_, err = pool.Exec(ctx, "DELETE FROM "+table+" WHERE status = 'published'")
	}
	if err != nil {
		return err
	}
	const insert = `INSERT INTO ` + table + ` (id, topic, key, type, payload, headers, status, attempts, last_error, available_at, created_at, published_at)
SELECT encode(set_bit(set_bit(overlay(uuid_send(gen_random_uuid()) PLACING substring(int8send((extract(epoch FROM t) * 1000)::bigint) FROM 3) FROM 1 FOR 6), 52, 1), 53, 1), 'hex')::uuid,
       'topic-' || (i % 10), 'customer-' || (i % 50000), 'type-' || (i % 20),
       convert_to('{"order":' || i || ',"total":' || (i % 997) || '.50,"currency":"EUR","lines":[{"sku":"A-' || (i % 313) || '","qty":2}]}', 'UTF8'),
       '{"traceparent":"00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"}'::jsonb,
       $1, $2, $3, t, t, CASE WHEN $1 = 'published' THEN t + interval '40 milliseconds' END
FROM generate_series(1, $4::int) AS i, LATERAL (SELECT now() - make_interval(secs => $5) + i * interval '5 milliseconds' AS t) AS ts`
	const twoHours = 2 * 60 * 60.0
	if fresh {
		if _, err := pool.Exec(ctx, insert, "pending", 0, "", pending, twoHours); err != nil {
			return fmt.Errorf("seed pending: %w", err)
		}
		if _, err := pool.Exec(ctx, insert, "dead", 20, "publish: dial tcp 10.0.0.7:4222: connect: connection refused", dead, twoHours); err != nil {
			return fmt.Errorf("seed dead: %w", err)
		}
	} else {
		fmt.Printf("seeded already: %d pending, %d dead\n", pending, dead)
	}
	if _, err := pool.Exec(ctx, insert, "published", 1, "", published, float64(published)*0.005); err != nil {
		return fmt.Errorf("seed published: %w", err)
	}
	if _, err := pool.Exec(ctx, "ANALYZE "+table); err != nil {
		return err
	}
	if fresh {
		fmt.Printf("seeded %d pending, %d dead and %d published messages in %s\n", pending, dead, published, time.Since(t0).Round(time.Millisecond))
	} else {
		fmt.Printf("seeded %d published messages afresh in %s\n", published, time.Since(t0).Round(time.Millisecond))
	}
	return nil
}

// login logs a client in and returns it with the CSRF token its forms carry.
func login(base string) (*http.Client, string, error) {
	jar, _ := cookiejar.New(nil)
	c := &http.Client{Jar: jar, Timeout: 30 * time.Second}
	resp, err := c.Get(base + "/login")
	if err != nil {
		return nil, "", err
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	m := regexp.MustCompile(`name="csrf" value="([^"]+)"`).FindSubmatch(body)
	if m == nil {
		return nil, "", fmt.Errorf("no CSRF token on the login page")
	}
	csrf := string(m[1])
	resp, err = c.PostForm(base+"/login", url.Values{"csrf": {csrf}, "token": {token}, "next": {"/"}})
	if err != nil {
		return nil, "", err
	}
	body, _ = io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, "", fmt.Errorf("login: %s", resp.Status)
	}
	// The forms' token is bound to the session: take the one of the page the login led to.
	if m = regexp.MustCompile(`name="csrf" value="([^"]+)"`).FindSubmatch(body); m == nil {
		return nil, "", fmt.Errorf("no CSRF token on the page after the login")
	}
	return c, string(m[1]), nil
}

func loadavg() string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return "unknown"
	}
	return strings.Join(strings.Fields(string(b))[:3], " ")
}

func firstLine(s string) string {
	s, _, _ = strings.Cut(strings.TrimSpace(s), "\n")
	return s
}

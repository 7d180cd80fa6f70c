// Package polyglot_test runs the producers of other languages under examples/ (Python, Node, psql) against the
// real PostgreSQL and MariaDB, with a real relay publishing to NATS JetStream, and checks that each example's
// event arrives exactly as the same event enqueued from Go does: same CloudEvents and user headers but the ID and
// time, same payload bytes.
//
// Their tools come from the package registries the project uses: scripts/polyglot.sh installs Debian's python3,
// python3-psycopg2, nodejs and npm when they are missing, and these tests install the Node examples' packages
// from examples/node/package-lock.json (npm ci) into examples/node/node_modules. A missing tool fails the tests
// under CI=true and skips them otherwise.
package polyglot_test

import (
	"bytes"
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-sql-driver/mysql"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/postbox-go/postbox"
	"github.com/postbox-go/postbox/broker/natsbroker"
	"github.com/postbox-go/postbox/driver/databasesql"
	"github.com/postbox-go/postbox/driver/pgxv5"
	"github.com/postbox-go/postbox/internal/testenv"
)

// examples is the repository's examples directory, from this package's.
var examples, _ = filepath.Abs("../../../examples")

// producer is one example program: how to run it for an order.
type producer struct {
	name string
	run  func(ctx context.Context, t *testing.T, orderID string) *exec.Cmd
}

func TestPostgresProducers(t *testing.T) {
	dbURL, err := testenv.FreshPostgres("postbox_polyglot")
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	pool, err := pgxpool.New(ctx, dbURL)
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Close()
	c, err := postbox.NewClient(pgxv5.New(pool), &postbox.Config{SQLAPI: true})
	if err != nil {
		t.Fatal(err)
	}
	python := pythonWith(t, "psycopg2")
	node := nodeModules(t)
	env := []string{"DATABASE_URL=" + dbURL}
	check(t, c, env, []producer{
		{"python", func(ctx context.Context, t *testing.T, id string) *exec.Cmd {
			return exec.CommandContext(ctx, python, filepath.Join(examples, "python", "enqueue.py"), id)
		}},
		{"node-pg", func(ctx context.Context, t *testing.T, id string) *exec.Cmd {
			return exec.CommandContext(ctx, node, filepath.Join(examples, "node", "enqueue_pg.js"), id)
		}},
		{"psql", func(ctx context.Context, t *testing.T, id string) *exec.Cmd {
			psql := tool(t, "psql", "postgresql-client")
			return exec.CommandContext(ctx, psql, "-X", "-q", "-t", "-A", dbURL, "-v", "order_id="+id,
				"-v", "topic="+topicFor(t), "-f", filepath.Join(examples, "psql", "enqueue.sql"))
		}},
	}, func(ctx context.Context, orderID string) (int, error) {
		var n int
		err := pool.QueryRow(ctx, "SELECT count(*) FROM orders WHERE id = $1", orderID).Scan(&n)
		return n, err
	})
}

func TestMySQLProducers(t *testing.T) {
	dsn, err := testenv.FreshMySQL("postbox_polyglot")
	if err != nil {
		t.Fatal(err)
	}
	db, err := sql.Open("mysql", dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	c, err := postbox.NewClient(databasesql.New(db, databasesql.MySQL), &postbox.Config{SQLAPI: true})
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := mysql.ParseDSN(dsn)
	if err != nil {
		t.Fatal(err)
	}
	u := fmt.Sprintf("mysql://%s:%s@%s/%s", cfg.User, cfg.Passwd, cfg.Addr, cfg.DBName)
	node := nodeModules(t)
	check(t, c, []string{"MYSQL_URL=" + u}, []producer{
		{"node-mysql2", func(ctx context.Context, t *testing.T, id string) *exec.Cmd {
			return exec.CommandContext(ctx, node, filepath.Join(examples, "node", "enqueue_mysql.js"), id)
		}},
	}, func(ctx context.Context, orderID string) (int, error) {
		var n int
		err := db.QueryRowContext(ctx, "SELECT count(*) FROM orders WHERE id = ?", orderID).Scan(&n)
		return n, err
	})
}

// check migrates c, runs a relay from c to a JetStream stream of the test's own, runs each producer for an order
// of its own and enqueues the same event from Go, then compares what NATS received for each pair.
func check[TTx any](t *testing.T, c *postbox.Client[TTx], env []string, producers []producer, orders func(context.Context, string) (int, error)) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	if _, err := c.Migrate(ctx); err != nil {
		t.Fatal(err)
	}
	topic := topicFor(t)
	js, stream := natsStream(ctx, t, topic)
	pub, err := natsbroker.NewPublisher(js, nil)
	if err != nil {
		t.Fatal(err)
	}
	relay, err := postbox.NewRelay(c, pub, &postbox.RelayConfig{PollInterval: 20 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	relayCtx, stopRelay := context.WithCancel(ctx)
	var wg sync.WaitGroup
	var relayErr error
	wg.Go(func() { relayErr = relay.Run(relayCtx) })
	defer func() {
		stopRelay()
		wg.Wait()
		if relayErr != nil {
			t.Errorf("relay: %v", relayErr)
		}
	}()

	for _, p := range producers {
		orderID := fmt.Sprintf("order-%s-%d", p.name, time.Now().UnixNano())
		cmd := p.run(ctx, t, orderID)
		cmd.Env = append(append(os.Environ(), env...), "POSTBOX_TOPIC="+topic)
		var stderr bytes.Buffer
		cmd.Stderr = &stderr
		out, err := cmd.Output()
		if err != nil {
			t.Fatalf("%s example for %s: %v\n%s", p.name, orderID, err, stderr.String())
		}
		if id := strings.TrimSpace(string(out)); len(id) != 36 {
			t.Fatalf("%s example printed %q; want the event's ID", p.name, out)
		}
		if n, err := orders(ctx, orderID); err != nil || n != 1 {
			t.Fatalf("%s example: %d orders rows for %s (%v); want the business row committed with its event", p.name, n, orderID, err)
		}
		payload, _ := json.Marshal(struct {
			OrderID string `json:"order_id"`
			Cents   int    `json:"cents"`
		}{orderID, 1250})
		err = c.InTx(ctx, func(ctx context.Context, tx TTx) error {
			_, err := c.Enqueue(ctx, tx, postbox.Message{Topic: topic, Key: orderID, Type: "order.created",
				Payload: payload, Headers: map[string]string{"tenant": "acme"}})
			return err
		})
		if err != nil {
			t.Fatal(err)
		}
	}

	want := 2 * len(producers)
	got := map[string][]jetstream.RawStreamMsg{} // by key: the example's message, then Go's
	testenv.Eventually(t, fmt.Sprintf("%d messages on NATS subject %s", want, topic), func() bool {
		info, err := stream.Info(ctx)
		return err == nil && info.State.Msgs >= uint64(want)
	})
	for seq := uint64(1); seq <= uint64(want); seq++ {
		m, err := stream.GetMsg(ctx, seq)
		if err != nil {
			t.Fatalf("read message %d of the stream: %v", seq, err)
		}
		key := m.Header.Get("ce-partitionkey")
		got[key] = append(got[key], *m)
	}
	for key, pair := range got {
		if len(pair) != 2 {
			t.Fatalf("key %s: %d messages on NATS; want the example's and Go's", key, len(pair))
		}
		ex, gm := pair[0], pair[1]
		if !bytes.Equal(ex.Data, gm.Data) {
			t.Errorf("key %s: the example's payload is %q; Go's is %q", key, ex.Data, gm.Data)
		}
		exH, goH := comparable(ex.Header), comparable(gm.Header)
		if !maps.Equal(exH, goH) {
			t.Errorf("key %s: the example's message carries headers %v; Go's %v", key, exH, goH)
		}
		if id := ex.Header.Get("ce-id"); len(id) != 36 || id[14] != '7' {
			t.Errorf("key %s: the example's message has ce-id %q; want the UUIDv7 the SQL API made", key, id)
		}
	}
	if len(got) != len(producers) {
		t.Fatalf("messages for %d keys on NATS; want one pair for each of the %d examples", len(got), len(producers))
	}
}

// comparable returns the headers two producers' messages must share: all but the per-message ID and time, and
// those the stream adds (sequence, time stamp).
func comparable(h nats.Header) map[string]string {
	out := map[string]string{}
	for k, v := range h {
		if k == "ce-id" || k == "ce-time" || strings.HasPrefix(k, "Nats-") {
			continue
		}
		out[k] = strings.Join(v, ",")
	}
	return out
}

// topicFor is the test's NATS subject and Postbox topic, so that no other test's stream captures it.
func topicFor(t *testing.T) string {
	return strings.ToLower(testenv.Unique("polyglot_" + strings.ReplaceAll(t.Name(), "/", "_")))
}

// natsStream connects to the local NATS and makes a fresh stream capturing topic.
func natsStream(ctx context.Context, t *testing.T, topic string) (jetstream.JetStream, jetstream.Stream) {
	natsURL := nats.DefaultURL
	if u := os.Getenv("POSTBOX_TEST_NATS"); u != "" {
		natsURL = u
	}
	nc, err := nats.Connect(natsURL)
	if err != nil {
		t.Fatalf("NATS is not reachable at %s (start nats-server -js, or set POSTBOX_TEST_NATS): %v", natsURL, err)
	}
	t.Cleanup(nc.Close)
	js, err := jetstream.New(nc, jetstream.WithPublishAsyncTimeout(10*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	name := strings.ToUpper(topic)
	if err := js.DeleteStream(ctx, name); err != nil && err != jetstream.ErrStreamNotFound {
		t.Fatal(err)
	}
	stream, err := js.CreateStream(ctx, jetstream.StreamConfig{Name: name, Subjects: []string{topic}, AllowDirect: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = js.DeleteStream(context.Background(), name) })
	return js, stream
}

// missing fails the test under CI=true, where every tool must be there, and skips it otherwise.
func missing(t *testing.T, format string, args ...any) {
	t.Helper()
	if os.Getenv("CI") == "true" {
		t.Fatalf(format, args...)
	}
	t.Skipf(format, args...)
}

// tool returns the path of name, or fails or skips the test saying which Debian package has it.
func tool(t *testing.T, name, pkg string) string {
	t.Helper()
	p, err := exec.LookPath(name)
	if err != nil {
		missing(t, "%s is missing: run scripts/polyglot.sh (or apt-get install %s)", name, pkg)
	}
	return p
}

// pythonWith returns a Python 3 that imports module: python3 on PATH, or Debian's /usr/bin/python3, which is
// where python3-psycopg2 installs it.
func pythonWith(t *testing.T, module string) string {
	t.Helper()
	candidates := []string{"/usr/bin/python3"}
	if p, err := exec.LookPath("python3"); err == nil {
		candidates = append([]string{p}, candidates...)
	}
	for _, p := range candidates {
		if exec.Command(p, "-c", "import "+module).Run() == nil {
			return p
		}
	}
	missing(t, "no python3 imports %s: run scripts/polyglot.sh (or apt-get install python3-%s)", module, module)
	return ""
}

var npmOnce sync.Once
var npmErr error

// nodeModules returns node, after installing the Node examples' packages from their lock file when they are not
// installed yet, with npm's cache in the user's cache directory.
func nodeModules(t *testing.T) string {
	t.Helper()
	node := tool(t, "node", "nodejs")
	npm := tool(t, "npm", "npm")
	dir := filepath.Join(examples, "node")
	npmOnce.Do(func() {
		if _, err := os.Stat(filepath.Join(dir, "node_modules", ".package-lock.json")); err == nil {
			return
		}
		cache, err := os.UserCacheDir()
		if err != nil {
			npmErr = err
			return
		}
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
		defer cancel()
		cmd := exec.CommandContext(ctx, npm, "ci", "--no-audit", "--no-fund", "--cache", filepath.Join(cache, "postbox-npm"))
		cmd.Dir = dir
		if out, err := cmd.CombinedOutput(); err != nil {
			npmErr = fmt.Errorf("npm ci in %s: %v\n%s", dir, err, out)
		}
	})
	if npmErr != nil {
		t.Fatal(npmErr)
	}
	return node
}

package drivertest

import (
	"context"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"maps"
	"strings"
	"testing"
	"time"

	"github.com/postbox-go/postbox"
	"github.com/postbox-go/postbox/broker"
	"github.com/postbox-go/postbox/driver"
	"github.com/postbox-go/postbox/postboxtest"
)

// testSQLAPI writes messages only through the SQL that docs/SCHEMA.md documents (the SQL API's routines on
// PostgreSQL and MySQL, the plain INSERT on SQLite) and checks that the relay publishes them exactly as it
// publishes the same messages enqueued from Go: same CloudEvents headers but the ID and time, same user headers,
// same key, same payload bytes. It runs on every table set layout the database has.
func testSQLAPI[TTx any](t *testing.T, newDriver NewDriver[TTx], opts Options[TTx]) {
	drv := newDriver(t)
	caps := drv.Capabilities()
	layouts := []struct {
		name string
		set  func(*postbox.Config)
	}{
		{"Plain", func(*postbox.Config) {}},
		{"Ordered", func(c *postbox.Config) { c.Ordered = true }},
	}
	if caps.Partitions {
		layouts = append(layouts, struct {
			name string
			set  func(*postbox.Config)
		}{"Partitioned", func(c *postbox.Config) { c.Partitioned = true }})
	}
	for _, l := range layouts {
		t.Run(l.name, func(t *testing.T) {
			cfg := Tables(nil)
			cfg.SQLAPI = caps.Dialect != "sqlite"
			l.set(cfg)
			testSQLAPISameAsGo(t, drv, opts, Client(t, drv, cfg))
		})
	}
	if caps.Dialect == "sqlite" {
		return
	}
	t.Run("BadInputLeavesTransactionUsable", func(t *testing.T) { testSQLAPIBadInput(t, drv, opts) })
	if caps.Dialect == "postgres" {
		t.Run("Batch", func(t *testing.T) { testSQLAPIBatch(t, drv, opts) })
	}
	if _, listens := drv.(driver.Listener); listens {
		t.Run("WakesIdleRelay", func(t *testing.T) {
			// The relay polls once an hour and looks again an hour after activity, so only the SQL API's
			// notification can make it claim within the test's time.
			cfg := Tables(nil)
			cfg.SQLAPI = true
			c := Client(t, drv, cfg)
			rec := &postboxtest.Recorder{}
			r := relay(t, elsewhere(t, drv, c), rec, &postbox.RelayConfig{PollInterval: time.Hour, RecheckDelay: time.Hour})
			stop := run(t, r)
			waitListening(t, r)
			err := c.InTx(context.Background(), func(ctx context.Context, tx TTx) error {
				return opts.Exec(ctx, tx, sqlEnqueue(caps.Dialect, cfg.Table, sqlAPIMessages()[0]))
			})
			if err != nil {
				t.Fatal(err)
			}
			if !rec.WaitDistinct(context.Background(), 1, 30*time.Second) {
				t.Fatalf("the message enqueued through the SQL API was not published within 30s: the relay was not woken (stats %+v)", r.Stats())
			}
			stop()
			if st := r.Stats(); st.Wakeups < 1 {
				t.Fatalf("relay stats %+v; want the SQL API's wake-up", st)
			}
		})
	}
	t.Run("AvailableAtDelays", func(t *testing.T) {
		// available_at an hour ahead: the relay leaves the message alone, and Stats counts it as scheduled.
		cfg := Tables(nil)
		cfg.SQLAPI = true
		c := Client(t, drv, cfg)
		q := fmt.Sprintf(`SELECT %s(topic => 'orders', type => 'order.created', payload => 'later', available_at => now() + interval '1 hour')`,
			pgIdent(cfg.Table+"_enqueue"))
		if caps.Dialect == "mysql" {
			q = fmt.Sprintf("CALL `%s_enqueue`('orders', 'order.created', 'later', NULL, NULL, NOW(6) + INTERVAL 1 HOUR, @postbox_id)", cfg.Table)
		}
		err := c.InTx(context.Background(), func(ctx context.Context, tx TTx) error { return opts.Exec(ctx, tx, q) })
		if err != nil {
			t.Fatal(err)
		}
		rec := &postboxtest.Recorder{}
		if n := drain(t, relay(t, c, rec, nil)); n != 0 {
			t.Fatalf("the relay published %d messages enqueued through the SQL API for an hour from now", n)
		}
		if st := stats(t, c); st.Scheduled != 1 || st.Pending != 1 {
			t.Fatalf("stats %+v; want the delayed message pending and scheduled", st)
		}
	})
	t.Run("NotListedUnlessAsked", func(t *testing.T) {
		for _, m := range Client(t, drv, nil).Migrations() {
			if strings.Contains(m.Name, "sql_api") {
				t.Fatalf("migration %d (%s) listed for a table set without Config.SQLAPI", m.Version, m.Name)
			}
		}
	})
}

// sqlAPIMessages are the messages both producers write: one with a key, headers and a JSON payload in a script
// beyond ASCII, one with neither and a binary payload.
func sqlAPIMessages() []postbox.Message {
	return []postbox.Message{
		{Topic: "orders", Key: "order-7", Type: "order.created", Payload: []byte(`{"id":7,"note":"café ☕"}`),
			Headers: map[string]string{"tenant": "acme", "traceparent": "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"}},
		{Topic: "audit", Type: "audit.blob", Payload: []byte{0, 1, 2, 0xff, '\'', '\\'}},
	}
}

func testSQLAPISameAsGo[TTx any](t *testing.T, drv driver.Driver[TTx], opts Options[TTx], c *postbox.Client[TTx]) {
	ctx := context.Background()
	dialect := drv.Capabilities().Dialect
	msgs := sqlAPIMessages()
	enqueue(t, c, msgs...)
	err := c.InTx(ctx, func(ctx context.Context, tx TTx) error {
		for _, m := range msgs {
			if err := opts.Exec(ctx, tx, sqlEnqueue(dialect, c.Config().Table, m)); err != nil {
				return fmt.Errorf("documented SQL for %s: %w", m.Topic, err)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	rec := &postboxtest.Recorder{}
	if n := drain(t, relay(t, c, rec, nil)); n != 2*len(msgs) {
		t.Fatalf("the relay published %d messages; want %d from Go and %d from SQL", n, len(msgs), len(msgs))
	}
	byTopic := map[string][]postbox.Record{}
	for _, r := range rec.Records() {
		byTopic[r.Topic] = append(byTopic[r.Topic], r)
	}
	ce := broker.CloudEvents{Prefix: broker.PrefixHTTP}
	for _, m := range msgs {
		got := byTopic[m.Topic]
		if len(got) != 2 {
			t.Fatalf("topic %s: %d messages published; want one from Go and one from SQL", m.Topic, len(got))
		}
		goRec, sqlRec := got[0], got[1] // enqueued first, so the smaller ID, claimed first
		if !isUUIDv7(sqlRec.ID) {
			t.Errorf("topic %s: the SQL-enqueued ID %q is not a UUIDv7 in canonical form", m.Topic, sqlRec.ID)
		}
		if sqlRec.ID <= goRec.ID {
			t.Errorf("topic %s: the SQL-enqueued ID %s does not sort after the Go one enqueued before it, %s", m.Topic, sqlRec.ID, goRec.ID)
		}
		goH, goBody, err := ce.Encode(goRec)
		if err != nil {
			t.Fatal(err)
		}
		sqlH, sqlBody, err := ce.Encode(sqlRec)
		if err != nil {
			t.Fatalf("topic %s: the SQL-enqueued message cannot be published as CloudEvents: %v", m.Topic, err)
		}
		for _, h := range []map[string]string{goH, sqlH} {
			delete(h, "ce-id")
			delete(h, "ce-time")
		}
		if !maps.Equal(goH, sqlH) || string(goBody) != string(sqlBody) {
			t.Errorf("topic %s: published from SQL with headers %v and body %x; from Go with %v and %x", m.Topic, sqlH, sqlBody, goH, goBody)
		}
		if sqlRec.Key != m.Key || sqlRec.Type != m.Type || !maps.Equal(sqlRec.Headers, goRec.Headers) {
			t.Errorf("topic %s: the SQL-enqueued record reads back as key %q type %q headers %v; want %q %q %v",
				m.Topic, sqlRec.Key, sqlRec.Type, sqlRec.Headers, m.Key, m.Type, goRec.Headers)
		}
		if sqlRec.CreatedAt.IsZero() || sqlRec.AvailableAt.Before(sqlRec.CreatedAt) {
			t.Errorf("topic %s: the SQL-enqueued record was created at %v, available at %v", m.Topic, sqlRec.CreatedAt, sqlRec.AvailableAt)
		}
	}
}

// testSQLAPIBadInput: each bad argument raises an error naming it, before anything is written; the caller rolls
// back to a savepoint and commits the rest of its transaction.
func testSQLAPIBadInput[TTx any](t *testing.T, drv driver.Driver[TTx], opts Options[TTx]) {
	ctx := context.Background()
	dialect := drv.Capabilities().Dialect
	cfg := Tables(nil)
	cfg.SQLAPI = true
	c := Client(t, drv, cfg)
	ok := postbox.Message{Topic: "orders", Type: "order.created", Payload: []byte(`{"ok":true}`)}
	bad := []struct {
		name string
		msg  postbox.Message
		want string
	}{
		{"empty topic", postbox.Message{Type: "x"}, "argument topic is empty"},
		{"empty type", postbox.Message{Topic: "orders"}, "argument type is empty"},
		{"long key", postbox.Message{Topic: "orders", Type: "x", Key: strings.Repeat("k", postbox.MaxKeyLen+1)}, "argument key is 1025 bytes"},
		{"control character in topic", postbox.Message{Topic: "or\tders", Type: "x"}, "argument topic"},
		{"oversize payload", postbox.Message{Topic: "orders", Type: "x", Payload: make([]byte, postbox.DefaultMaxPayloadBytes+1)}, "argument payload is 1048577 bytes"},
		{"bad header name", postbox.Message{Topic: "orders", Type: "x", Headers: map[string]string{"bad name": "v"}}, "argument headers: header name"},
		{"reserved header", postbox.Message{Topic: "orders", Type: "x", Headers: map[string]string{"ce-id": "v"}}, "CloudEvents prefix"},
		{"control character in header", postbox.Message{Topic: "orders", Type: "x", Headers: map[string]string{"h": "a\r\nb"}}, "control character"},
	}
	err := c.InTx(ctx, func(ctx context.Context, tx TTx) error {
		for _, b := range bad {
			if err := opts.Exec(ctx, tx, "SAVEPOINT bad"); err != nil {
				return err
			}
			err := opts.Exec(ctx, tx, sqlEnqueue(dialect, cfg.Table, b.msg))
			if err == nil || !strings.Contains(err.Error(), b.want) {
				return fmt.Errorf("%s through the SQL API: %v; want an error saying %q", b.name, err, b.want)
			}
			if err := opts.Exec(ctx, tx, "ROLLBACK TO SAVEPOINT bad"); err != nil {
				return fmt.Errorf("rollback to the savepoint after %s: %w", b.name, err)
			}
		}
		return opts.Exec(ctx, tx, sqlEnqueue(dialect, cfg.Table, ok))
	})
	if err != nil {
		t.Fatal(err)
	}
	rec := &postboxtest.Recorder{}
	if n := drain(t, relay(t, c, rec, nil)); n != 1 || rec.Records()[0].Type != ok.Type {
		t.Fatalf("after refused calls caught in savepoints, the transaction committed %d messages (%v); want the good one alone", n, rec.Records())
	}
}

// testSQLAPIBatch enqueues with the array form and checks the IDs come back in the arrays' order, increasing,
// and the relay publishes every message with its own key and headers.
func testSQLAPIBatch[TTx any](t *testing.T, drv driver.Driver[TTx], opts Options[TTx]) {
	ctx := context.Background()
	cfg := Tables(nil)
	cfg.SQLAPI = true
	cfg.Ordered = true
	c := Client(t, drv, cfg)
	const n = 50
	q := fmt.Sprintf("SELECT count(*) FROM (SELECT id, lag(id) OVER (ORDER BY i) AS prev FROM %s("+
		"array_fill('orders'::text, ARRAY[%d]), array_fill('order.created'::text, ARRAY[%d]),"+
		" ARRAY(SELECT convert_to('{\"n\":' || g || '}', 'UTF8') FROM generate_series(1, %d) g),"+
		" ARRAY(SELECT 'k' || g %% 3 FROM generate_series(1, %d) g),"+
		" ARRAY(SELECT jsonb_build_object('n', g::text) FROM generate_series(1, %d) g))"+
		" WITH ORDINALITY AS b(id, i)) s WHERE prev IS NULL OR id > prev",
		pgIdent(cfg.Table+"_enqueue_batch"), n, n, n, n, n)
	var increasing int64
	err := c.InTx(ctx, func(ctx context.Context, tx TTx) error {
		var err error
		increasing, err = opts.QueryInt(ctx, tx, q)
		return err
	})
	if err != nil || increasing != n {
		t.Fatalf("batch of %d through the SQL API: %d IDs in increasing array order (%v); want all", n, increasing, err)
	}
	rec := &postboxtest.Recorder{}
	r := relay(t, c, rec, nil)
	drain(t, r)
	got := rec.Records()
	if len(got) != n {
		t.Fatalf("the relay published %d of the batch's %d messages", len(got), n)
	}
	for _, m := range got {
		var body struct{ N int }
		if err := json.Unmarshal(m.Payload, &body); err != nil || m.Headers["n"] != fmt.Sprint(body.N) ||
			m.Key != fmt.Sprintf("k%d", body.N%3) {
			t.Fatalf("batch message published as key %q headers %v payload %s; want key, header and payload of one element", m.Key, m.Headers, m.Payload)
		}
	}
}

// sqlEnqueue is the documented SQL that enqueues m on the table set whose outbox is table, as a statement with
// literals only (docs/SCHEMA.md).
func sqlEnqueue(dialect, table string, m postbox.Message) string {
	headers := "NULL"
	if len(m.Headers) > 0 {
		b, err := json.Marshal(m.Headers)
		if err != nil {
			panic(err)
		}
		headers = string(b)
	}
	payload := hex.EncodeToString(m.Payload)
	switch dialect {
	case "postgres":
		if headers != "NULL" {
			headers = pgString(headers)
		}
		return fmt.Sprintf(`SELECT %s(%s, %s, '\x%s'::bytea, %s, %s)`, pgIdent(table+"_enqueue"),
			pgString(m.Topic), pgString(m.Type), payload, pgString(m.Key), headers)
	case "mysql":
		if headers != "NULL" {
			headers = mysqlString(headers)
		}
		return fmt.Sprintf("CALL `%s_enqueue`(%s, %s, X'%s', %s, %s, NULL, @postbox_id)", table,
			mysqlString(m.Topic), mysqlString(m.Type), payload, mysqlString(m.Key), headers)
	default: // sqlite: the plain INSERT; the producer makes the ID and the times (Unix microseconds)
		if headers != "NULL" {
			headers = pgString(headers)
		}
		now := time.Now().UnixMicro()
		return fmt.Sprintf(`INSERT INTO %s (id, topic, key, type, payload, headers, available_at, created_at)`+
			` VALUES ('%s', %s, %s, %s, X'%s', %s, %d, %d)`, pgIdent(table), postbox.NewID(), pgString(m.Topic),
			pgString(m.Key), pgString(m.Type), payload, headers, now, now)
	}
}

// pgString is s as a standard SQL string literal (PostgreSQL, SQLite).
func pgString(s string) string { return "'" + strings.ReplaceAll(s, "'", "''") + "'" }

// mysqlString is s as a MySQL string literal, where a backslash escapes.
func mysqlString(s string) string {
	return "'" + strings.NewReplacer(`\`, `\\`, "'", "''").Replace(s) + "'"
}

// pgIdent is s as a quoted identifier (PostgreSQL, SQLite).
func pgIdent(s string) string { return `"` + strings.ReplaceAll(s, `"`, `""`) + `"` }

// isUUIDv7 reports whether s is a UUIDv7 of the RFC 9562 variant in lower-case canonical form.
func isUUIDv7(s string) bool {
	if len(s) != 36 || s[14] != '7' || !strings.ContainsRune("89ab", rune(s[19])) {
		return false
	}
	for i, c := range s {
		if i == 8 || i == 13 || i == 18 || i == 23 {
			if c != '-' {
				return false
			}
		} else if !strings.ContainsRune("0123456789abcdef", c) {
			return false
		}
	}
	return true
}

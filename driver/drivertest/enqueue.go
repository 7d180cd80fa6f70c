package drivertest

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"maps"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/postbox-go/postbox"
	"github.com/postbox-go/postbox/driver"
	"github.com/postbox-go/postbox/postboxtest"
)

func testMigrate[TTx any](t *testing.T, newDriver NewDriver[TTx]) {
	ctx := context.Background()
	drv := newDriver(t)

	t.Run("Idempotent", func(t *testing.T) {
		c, err := postbox.NewClient(drv, Tables(nil))
		if err != nil {
			t.Fatal(err)
		}
		status, err := c.MigrationStatus(ctx)
		if err != nil {
			t.Fatalf("MigrationStatus before Migrate: %v", err)
		}
		for _, m := range status {
			if m.Applied {
				t.Fatalf("migration %d reported applied before Migrate", m.Version)
			}
		}
		first, err := c.Migrate(ctx)
		if err != nil {
			t.Fatalf("Migrate: %v", err)
		}
		if len(first) != len(c.Migrations()) {
			t.Fatalf("first Migrate applied %v, want all %d migrations", first, len(c.Migrations()))
		}
		again, err := c.Migrate(ctx)
		if err != nil || len(again) != 0 {
			t.Fatalf("second Migrate = %v, %v; want nothing applied and no error", again, err)
		}
		status, err = c.MigrationStatus(ctx)
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range status {
			if !m.Applied || m.AppliedAt.IsZero() {
				t.Fatalf("migration %d not reported applied after Migrate: %+v", m.Version, m)
			}
		}
	})

	t.Run("Concurrent", func(t *testing.T) {
		cfg := Tables(nil)
		var wg sync.WaitGroup
		applied := make([][]int, 8)
		errs := make([]error, 8)
		for i := range 8 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				c, err := postbox.NewClient(newDriver(t), cfg)
				if err == nil {
					applied[i], err = c.Migrate(ctx)
				}
				errs[i] = err
			}()
		}
		wg.Wait()
		total := 0
		for i, err := range errs {
			if err != nil {
				t.Fatalf("migrator %d: %v", i, err)
			}
			total += len(applied[i])
		}
		c := Client(t, drv, cfg)
		if total != len(c.Migrations()) {
			t.Fatalf("8 concurrent migrators applied %d migrations in all, want each of the %d once", total, len(c.Migrations()))
		}
		enqueue(t, c, messages(1, "orders")...)
	})

	t.Run("SQLForExternalTools", func(t *testing.T) {
		cfg := Tables(nil)
		c, err := postbox.NewClient(drv, cfg)
		if err != nil {
			t.Fatal(err)
		}
		ms := c.Migrations()
		if len(ms) == 0 {
			t.Fatal("no migrations")
		}
		quote := func(s string) string { return `"` + s + `"` }
		if drv.Capabilities().Dialect == "mysql" {
			quote = func(s string) string { return "`" + s + "`" } // MySQL quotes identifiers with backticks
		}
		prev := 0
		for i, m := range ms {
			// Versions increase but may skip: migrations of features developed side by side take their numbers early.
			// A table of the set may be named after the outbox, such as <outbox>_relays: the quoted name's start.
			open := quote("")[:1]
			names := strings.Contains(m.SQL, open+cfg.Table) || strings.Contains(m.SQL, open+cfg.InboxTable)
			if m.Version <= prev || m.Name == "" || !names {
				t.Fatalf("migration %d = version %d name %q; want a version above %d, a name, and SQL naming the quoted table %s or %s",
					i, m.Version, m.Name, prev, quote(cfg.Table), quote(cfg.InboxTable))
			}
			prev = m.Version
		}
	})
}

func testEnqueue[TTx any](t *testing.T, newDriver NewDriver[TTx]) {
	ctx := context.Background()
	drv := newDriver(t)

	t.Run("RollbackLeavesNothing", func(t *testing.T) {
		c := Client(t, drv, nil)
		tx, err := drv.Begin(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if err := c.EnqueueBatch(ctx, tx, messages(3, "orders")); err != nil {
			drv.Rollback(ctx, tx)
			t.Fatal(err)
		}
		if err := drv.Rollback(ctx, tx); err != nil {
			t.Fatalf("rollback after Enqueue: %v (Enqueue must not end the transaction)", err)
		}
		if s := stats(t, c); s.Pending != 0 {
			t.Fatalf("after rollback %d messages pending, want 0", s.Pending)
		}
		rec := &postboxtest.Recorder{}
		if n := drain(t, relay(t, c, rec, nil)); n != 0 {
			t.Fatalf("relay claimed %d rolled-back messages", n)
		}
	})

	t.Run("CommitLeavesExactlyTheMessages", func(t *testing.T) {
		c := Client(t, drv, nil)
		available := time.Now().Add(-time.Minute).UTC().Truncate(time.Microsecond)
		want := []postbox.Message{
			{Topic: "orders", Key: "order-1", Type: "order.created", Payload: []byte(`{"id":1}`),
				Headers: map[string]string{"traceparent": "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01", "x-tenant": "acme"}},
			{ID: "0190F6E4-3B7A-7C3D-8E4F-123456789ABC", Topic: "orders", Type: "order.paid", Payload: []byte{0, 1, 2, 255}},
			{Topic: "invoices", Type: "invoice.sent", AvailableAt: available},
		}
		tx, err := drv.Begin(ctx)
		if err != nil {
			t.Fatal(err)
		}
		defer drv.Rollback(ctx, tx)
		reported := map[string]string{} // type -> the ID Enqueue reported
		for _, m := range want {
			id, err := c.Enqueue(ctx, tx, m)
			if err != nil {
				t.Fatal(err)
			}
			reported[m.Type] = id
		}
		// A transaction still open means Enqueue did not commit: a relay sees nothing yet.
		rec := &postboxtest.Recorder{}
		r := relay(t, c, rec, nil)
		if n := drain(t, r); n != 0 {
			t.Fatalf("relay claimed %d messages of an uncommitted transaction", n)
		}
		if err := drv.Commit(ctx, tx); err != nil {
			t.Fatalf("commit after Enqueue: %v", err)
		}
		if n := drain(t, r); n != len(want) {
			t.Fatalf("relay claimed %d messages, want %d", n, len(want))
		}
		got := rec.Records()
		byType := map[string]postbox.Record{}
		for _, g := range got {
			byType[g.Type] = g
		}
		for _, w := range want {
			g, ok := byType[w.Type]
			if !ok {
				t.Fatalf("message %s not published; got %+v", w.Type, got)
			}
			if g.ID != reported[w.Type] {
				t.Errorf("%s: published with ID %q, but Enqueue reported %q", w.Type, g.ID, reported[w.Type])
			}
			if w.ID != "" && g.ID != strings.ToLower(w.ID) {
				t.Errorf("%s: ID %q, want the given ID in lower case %q", w.Type, g.ID, strings.ToLower(w.ID))
			}
			if len(g.ID) != 36 || (w.ID == "" && g.ID[14] != '7') {
				t.Errorf("%s: generated ID %q is not a UUIDv7", w.Type, g.ID)
			}
			if g.Topic != w.Topic || g.Key != w.Key || !bytes.Equal(g.Payload, w.Payload) || !maps.Equal(g.Headers, w.Headers) {
				t.Errorf("%s: published %+v, want fields of %+v", w.Type, g.Message, w)
			}
			if g.CreatedAt.IsZero() || g.Attempts != 0 || g.Status != postbox.StatusPending {
				t.Errorf("%s: record bookkeeping %+v", w.Type, g)
			}
			if !w.AvailableAt.IsZero() && !g.AvailableAt.Equal(w.AvailableAt) {
				t.Errorf("%s: AvailableAt %v, want %v", w.Type, g.AvailableAt, w.AvailableAt)
			}
		}
		if s := stats(t, c); s.Pending != 0 {
			t.Fatalf("%d pending after publishing everything", s.Pending)
		}
	})

	t.Run("BatchInOneStatement", func(t *testing.T) {
		c := Client(t, drv, nil)
		msgs := messages(1500, "orders")
		enqueue(t, c, msgs...)
		for i, m := range msgs {
			if m.ID == "" {
				t.Fatalf("EnqueueBatch did not write the generated ID back into message %d", i)
			}
		}
		rec := &postboxtest.Recorder{}
		if n := drain(t, relay(t, c, rec, nil)); n != len(msgs) {
			t.Fatalf("published %d, want %d", n, len(msgs))
		}
		counts := rec.Counts()
		for _, id := range ids(msgs) {
			if counts[id] != 1 {
				t.Fatalf("message %s published %d times", id, counts[id])
			}
		}
		// Oldest first: IDs are UUIDv7, so the publish order is the enqueue order for one producer.
		got := rec.Records()
		for i := range got {
			if got[i].ID != msgs[i].ID {
				t.Fatalf("publish order differs from enqueue order at %d", i)
			}
		}
	})

	t.Run("Delayed", func(t *testing.T) {
		clock := postboxtest.NewClock(time.Now())
		c := Client(t, drv, Tables(clock))
		enqueue(t, c, postbox.Message{Topic: "reminders", Type: "reminder.due", AvailableAt: clock.Now().Add(time.Hour)})
		rec := &postboxtest.Recorder{}
		r := relay(t, c, rec, nil)
		if n := drain(t, r); n != 0 {
			t.Fatalf("a message delayed by an hour was claimed at once")
		}
		clock.Advance(time.Hour)
		if n := drain(t, r); n != 1 {
			t.Fatalf("the delayed message was not claimed when due (claimed %d)", n)
		}
	})
}

// manyHeaders returns n valid headers.
func manyHeaders(n int) map[string]string {
	h := make(map[string]string, n)
	for i := range n {
		h[fmt.Sprintf("h%d", i)] = "v"
	}
	return h
}

// testInvalid: every message and configuration Enqueue and NewClient refuse, each with an error that says what is
// wrong; nothing is written and the caller's transaction stays usable.
func testInvalid[TTx any](t *testing.T, newDriver NewDriver[TTx]) {
	ctx := context.Background()
	drv := newDriver(t)
	c := Client(t, drv, nil)
	ok := postbox.Message{Topic: "orders", Type: "order.created"}
	cases := []struct {
		name string
		msg  postbox.Message
		want string
	}{
		{"empty topic", postbox.Message{Type: "x"}, "Topic is empty"},
		{"empty type", postbox.Message{Topic: "orders"}, "Type is empty"},
		{"long topic", postbox.Message{Topic: strings.Repeat("t", postbox.MaxTopicLen+1), Type: "x"}, "Topic is 256 bytes"},
		{"control char in type", postbox.Message{Topic: "orders", Type: "a\nb"}, "control character"},
		{"invalid UTF-8 key", postbox.Message{Topic: "orders", Type: "x", Key: "\xff"}, "not valid UTF-8"},
		{"bad ID", postbox.Message{ID: "order-1", Topic: "orders", Type: "x"}, "is not a UUID"},
		{"oversize payload", postbox.Message{Topic: "orders", Type: "x", Payload: make([]byte, postbox.DefaultMaxPayloadBytes+1)}, "limit is 1048576"},
		{"bad header name", postbox.Message{Topic: "orders", Type: "x", Headers: map[string]string{"bad name": "v"}}, `header name "bad name"`},
		{"reserved header", postbox.Message{Topic: "orders", Type: "x", Headers: map[string]string{"ce-id": "v"}}, "CloudEvents prefix"},
		{"newline in header", postbox.Message{Topic: "orders", Type: "x", Headers: map[string]string{"h": "a\r\nb"}}, "control character"},
		{"NUL in topic", postbox.Message{Topic: "or\x00ders", Type: "x"}, "control character"},
		{"long type", postbox.Message{Topic: "orders", Type: strings.Repeat("t", postbox.MaxTypeLen+1)}, "Type is 256 bytes"},
		{"long key", postbox.Message{Topic: "orders", Type: "x", Key: strings.Repeat("k", postbox.MaxKeyLen+1)}, "Key is 1025 bytes"},
		{"ID with braces", postbox.Message{ID: "{0190f6e4-3b7a-7c3d-8e4f-123456789abc}", Topic: "orders", Type: "x"}, "is not a UUID"},
		{"ID without dashes", postbox.Message{ID: "0190f6e43b7a7c3d8e4f123456789abc", Topic: "orders", Type: "x"}, "is not a UUID"},
		{"ID with spaces", postbox.Message{ID: " 0190f6e4-3b7a-7c3d-8e4f-123456789abc", Topic: "orders", Type: "x"}, "is not a UUID"},
		{"too many headers", postbox.Message{Topic: "orders", Type: "x", Headers: manyHeaders(postbox.MaxHeaders + 1)}, "65 headers; the limit is 64"},
		{"empty header name", postbox.Message{Topic: "orders", Type: "x", Headers: map[string]string{"": "v"}}, `header name ""`},
		{"long header name", postbox.Message{Topic: "orders", Type: "x", Headers: map[string]string{strings.Repeat("h", postbox.MaxHeaderNameLen+1): "v"}}, "is not allowed"},
		{"header name with a colon", postbox.Message{Topic: "orders", Type: "x", Headers: map[string]string{"x:y": "v"}}, `header name "x:y"`},
		{"Kafka CloudEvents header", postbox.Message{Topic: "orders", Type: "x", Headers: map[string]string{"CE_type": "v"}}, "CloudEvents prefix"},
		{"long header value", postbox.Message{Topic: "orders", Type: "x", Headers: map[string]string{"h": strings.Repeat("v", postbox.MaxHeaderLen+1)}}, "header h is 4097 bytes"},
		{"invalid UTF-8 header value", postbox.Message{Topic: "orders", Type: "x", Headers: map[string]string{"h": "\xc3\x28"}}, "not valid UTF-8"},
	}
	tx, err := drv.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer drv.Rollback(ctx, tx)
	for _, tc := range cases {
		id, err := c.Enqueue(ctx, tx, tc.msg)
		if id != "" {
			t.Errorf("%s: refused message reported ID %q", tc.name, id)
		}
		if !errors.Is(err, postbox.ErrInvalidMessage) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: Enqueue error %v; want ErrInvalidMessage saying %q", tc.name, err, tc.want)
		}
		if err := c.EnqueueBatch(ctx, tx, []postbox.Message{ok, tc.msg}); !errors.Is(err, postbox.ErrInvalidMessage) ||
			!strings.Contains(err.Error(), "message 1 of 2") {
			t.Errorf("%s: EnqueueBatch error %v; want ErrInvalidMessage naming message 1 of 2", tc.name, err)
		}
	}
	dup := postbox.NewID()
	if err := c.EnqueueBatch(ctx, tx, []postbox.Message{{ID: dup, Topic: "o", Type: "x"}, {ID: dup, Topic: "o", Type: "x"}}); !errors.Is(err, postbox.ErrInvalidMessage) {
		t.Errorf("a batch repeating an ID: %v, want ErrInvalidMessage", err)
	}
	// After every refusal the transaction still works (on PostgreSQL an error inside it would have aborted it).
	if _, err := c.Enqueue(ctx, tx, ok); err != nil {
		t.Fatalf("Enqueue after refused input: %v", err)
	}
	if err := drv.Commit(ctx, tx); err != nil {
		t.Fatalf("commit after refused input: %v", err)
	}
	if s := stats(t, c); s.Pending != 1 {
		t.Fatalf("%d pending, want only the one valid message", s.Pending)
	}

	t.Run("TableNames", func(t *testing.T) {
		for _, tc := range []struct {
			cfg  postbox.Config
			want string
		}{
			{postbox.Config{Table: "orders-outbox"}, "not a valid identifier"},
			{postbox.Config{Table: "1outbox"}, "not a valid identifier"},
			{postbox.Config{Table: `x"; DROP TABLE users; --`}, "not a valid identifier"},
			{postbox.Config{InboxTable: "inbox.v2"}, "not a valid identifier"},
			{postbox.Config{Table: strings.Repeat("a", 64)}, "use at most 63"},
			{postbox.Config{Table: "same", InboxTable: "same"}, "give them different names"},
			{postbox.Config{Schema: "bad schema"}, "not a valid identifier"},
			{postbox.Config{MaxPayloadBytes: -1}, "MaxPayloadBytes is -1"},
		} {
			_, err := postbox.NewClient(drv, &tc.cfg)
			if !errors.Is(err, postbox.ErrInvalidConfig) || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("NewClient(%+v) error %v; want ErrInvalidConfig saying %q", tc.cfg, err, tc.want)
			}
		}
		if _, err := postbox.NewClient[TTx](nil, nil); !errors.Is(err, postbox.ErrInvalidConfig) || !strings.Contains(err.Error(), "pgxv5.New") {
			t.Errorf("NewClient(nil driver) error %v; want ErrInvalidConfig saying how to make a driver", err)
		}
		if !drv.Capabilities().Schemas {
			if _, err := postbox.NewClient(drv, &postbox.Config{Schema: "app"}); !errors.Is(err, postbox.ErrInvalidConfig) {
				t.Errorf("Schema on a database without schemas: %v, want ErrInvalidConfig", err)
			}
		}
		if !drv.Capabilities().Partitions {
			if _, err := postbox.NewClient(drv, &postbox.Config{Partitioned: true}); !errors.Is(err, postbox.ErrInvalidConfig) {
				t.Errorf("Partitioned on a database without partitioning: %v, want ErrInvalidConfig", err)
			}
		}
	})

	if !drv.Capabilities().Schemas {
		return
	}
	t.Run("Schema", func(t *testing.T) {
		cfg := Tables(nil)
		// Unique like the table names: on MySQL a schema is a database, shared by every checkout using the server.
		cfg.Schema = "pbt_schema_" + strings.TrimPrefix(cfg.Table, "pbt_outbox_")
		if drv.Capabilities().Dialect == "mysql" {
			t.Cleanup(func() { dropDatabase(t, drv, cfg.Schema) })
		}
		sc := Client(t, drv, cfg)
		enqueue(t, sc, messages(2, "orders")...)
		if s := stats(t, sc); s.Pending != 2 {
			t.Fatalf("%d pending in schema %s, want 2", s.Pending, cfg.Schema)
		}
	})
}

// dropDatabase drops a MySQL database a test made as a schema.
func dropDatabase[TTx any](t *testing.T, drv driver.Driver[TTx], name string) {
	ctx := context.Background()
	d, sess := session(t, drv)
	defer sess.Close()
	if _, err := sess.Exec(ctx, "DROP DATABASE IF EXISTS "+d.QuoteIdent(name)); err != nil {
		t.Errorf("drop test database %s: %v", name, err)
	}
}

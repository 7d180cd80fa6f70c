package databasesql_test

import (
	"context"
	"database/sql"
	"strings"
	"testing"
	"time"

	"github.com/postbox-go/postbox"
	"github.com/postbox-go/postbox/driver"
	"github.com/postbox-go/postbox/driver/databasesql"
	"github.com/postbox-go/postbox/driver/drivertest"
	"github.com/postbox-go/postbox/postboxtest"
)

func newMySQL(t *testing.T) driver.Driver[*sql.Tx] {
	return databasesql.New(open(t, "mysql", myDSN), databasesql.MySQL)
}

func TestMySQLConformance(t *testing.T) {
	drivertest.Exercise(t, newMySQL, sqlHooks)
}

// The package docs recommend interpolateParams=true, which sends arguments inside the SQL text instead of binding
// them: binary IDs and LIMIT arguments must survive that too.
func TestMySQLConformanceInterpolated(t *testing.T) {
	drivertest.Exercise(t, func(t *testing.T) driver.Driver[*sql.Tx] {
		dsn := myDSN + "?interpolateParams=true"
		if strings.Contains(myDSN, "?") {
			dsn = myDSN + "&interpolateParams=true"
		}
		return databasesql.New(open(t, "mysql", dsn), databasesql.MySQL)
	}, sqlHooks)
}

func TestMySQLKilledRelay(t *testing.T) {
	drivertest.ExerciseKilledRelay(t, newMySQL(t), childDSNEnv+"=mysql "+myDSN)
}

func TestMySQLPartitions(t *testing.T) {
	drivertest.ExercisePartitions(t, newMySQL, sqlHooks)
}

func TestMySQLPartitionedKilledRelay(t *testing.T) {
	drivertest.ExerciseKilledRelay(t, drivertest.Partitioned(newMySQL)(t), childDSNEnv+"=mysql "+myDSN)
}

func TestPostgresPartitions(t *testing.T) {
	drivertest.ExercisePartitions(t, newPostgres, sqlHooks)
}

// TestMySQLClaimUsesIndex shows the claim reading pending rows in id order from the (status, id) index, with no
// filesort, on both layouts, when pending rows are few among many published ones (retention mode).
func TestMySQLClaimUsesIndex(t *testing.T) {
	ctx := context.Background()
	db := open(t, "mysql", myDSN)
	for _, partitioned := range []bool{false, true} {
		cfg := drivertest.Tables(nil)
		cfg.Partitioned = partitioned
		c := drivertest.Client(t, newMySQL(t), cfg)
		msgs := make([]postbox.Message, 3000)
		for i := range msgs {
			msgs[i] = postbox.Message{Topic: "orders", Type: "order.created", Payload: []byte(`{}`)}
		}
		if err := c.InTx(ctx, func(ctx context.Context, tx *sql.Tx) error { return c.EnqueueBatch(ctx, tx, msgs) }); err != nil {
			t.Fatal(err)
		}
		table := "`" + cfg.Table + "`"
		// The oldest rows published and kept, as in retention mode.
		if _, err := db.ExecContext(ctx, "UPDATE "+table+" SET status = 'published', published_at = 1 ORDER BY id LIMIT 2900"); err != nil {
			t.Fatal(err)
		}
		if _, err := db.ExecContext(ctx, "ANALYZE TABLE "+table); err != nil {
			t.Fatal(err)
		}
		names := driver.Names{Outbox: cfg.Table, Inbox: cfg.InboxTable, Partitioned: partitioned}
		for _, limit := range []int{10, 500} {
			plan := explain(t, db, "EXPLAIN "+databasesql.MySQL.ClaimSQL(names), time.Now().UnixMicro(), limit)
			if plan["key"] != "claim_idx" || strings.Contains(plan["Extra"], "filesort") {
				t.Errorf("partitioned=%v limit %d: claim plan %v; want key claim_idx and no filesort", partitioned, limit, plan)
			}
		}
	}
}

// explain runs an EXPLAIN of one table and returns its row by column name.
func explain(t *testing.T, db *sql.DB, q string, args ...any) map[string]string {
	t.Helper()
	rows, err := db.Query(q, args...)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	cols, err := rows.Columns()
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]string{}
	for rows.Next() {
		vals := make([]sql.NullString, len(cols))
		dest := make([]any, len(cols))
		for i := range vals {
			dest[i] = &vals[i]
		}
		if err := rows.Scan(dest...); err != nil {
			t.Fatal(err)
		}
		for i, c := range cols {
			out[c] = vals[i].String
		}
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

// TestMySQLStorage checks the column formats docs/MYSQL.md promises to operators who query the table: the ID as
// the UUID's 16 bytes, times as Unix microseconds.
func TestMySQLStorage(t *testing.T) {
	ctx := context.Background()
	at := time.Date(2030, 1, 2, 3, 4, 5, 678901000, time.UTC)
	cfg := drivertest.Tables(postboxtest.NewClock(at))
	c := drivertest.Client(t, newMySQL(t), cfg)
	id := postbox.NewID()
	err := c.InTx(ctx, func(ctx context.Context, tx *sql.Tx) error {
		_, err := c.Enqueue(ctx, tx, postbox.Message{ID: id, Topic: "orders", Type: "order.created", Payload: []byte{0, 255}})
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	db := open(t, "mysql", myDSN)
	var hexID string
	var created, available int64
	var payload []byte
	if err := db.QueryRowContext(ctx, "SELECT HEX(id), created_at, available_at, payload FROM `"+cfg.Table+"`").
		Scan(&hexID, &created, &available, &payload); err != nil {
		t.Fatal(err)
	}
	if want := strings.ToUpper(strings.ReplaceAll(id, "-", "")); hexID != want {
		t.Errorf("stored id %s, want the UUID's bytes %s", hexID, want)
	}
	if created != at.UnixMicro() || available != at.UnixMicro() {
		t.Errorf("stored created_at %d, available_at %d; want Unix microseconds %d", created, available, at.UnixMicro())
	}
	if string(payload) != "\x00\xff" {
		t.Errorf("stored payload %x, want 00ff", payload)
	}
	types := map[string]string{}
	rows, err := db.QueryContext(ctx, "SELECT COLUMN_NAME, COLUMN_TYPE FROM information_schema.COLUMNS WHERE TABLE_SCHEMA = DATABASE() AND TABLE_NAME = ?", cfg.Table)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	for rows.Next() {
		var name, typ string
		if err := rows.Scan(&name, &typ); err != nil {
			t.Fatal(err)
		}
		types[name] = typ
	}
	if types["id"] != "binary(16)" || types["payload"] != "longblob" || !strings.HasPrefix(types["created_at"], "bigint") {
		t.Errorf("column types %v; want id binary(16), payload longblob, created_at bigint", types)
	}
}

package databasesql_test

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/postbox-go/postbox/driver"
	"github.com/postbox-go/postbox/driver/databasesql"
	"github.com/postbox-go/postbox/driver/drivertest"
)

// The ordered claim's cost must not depend on the planner's statistics (DESIGN.md, "No cost by luck"; issue 30):
// on a table never analysed, PostgreSQL's plan once checked each record against every earlier pending record, and
// a claim took seconds where it took milliseconds after ANALYZE. These tests claim from 100,000 pending records
// over 1,000 keys, before and after ANALYZE, and compare what each claim costs the database, counted rather
// than timed: buffers on PostgreSQL, handler reads on MariaDB, the plan on SQLite.

const (
	costRecords = 100_000
	costKeys    = 1_000
	costBatch   = 100
	// costRun is how many consecutive records share a key: a batch of heads then lies among ten times as many
	// records held behind them, which the claim must walk past, as after a burst per aggregate.
	costRun = 10
	// costFactor is how far apart the two claims may be: the same plan costs the same, and the earlier claims
	// cost 3 times (PostgreSQL) and 100 times (PostgreSQL, DeadHoldsKey) more never analysed than after.
	costFactor = 2
)

// orderedCostNames are fresh ordered tables, migrated, for one dialect.
func orderedCostNames(t *testing.T, drv driver.Driver[*sql.Tx]) driver.Names {
	cfg := drivertest.Tables(nil)
	cfg.Ordered = true
	drivertest.Client(t, drv, cfg)
	return driver.Names{Outbox: cfg.Table, Inbox: cfg.InboxTable, Ordered: true}
}

// costKey is the SQL of record g's key (g from 1): runs of costRun records per key, the keys taking turns.
func costKey(concat func(a, b string) string, div string) string {
	return concat("'k'", fmt.Sprintf("(((g - 1) %s %d) %% %d)", div, costRun, costKeys))
}

func TestOrderedClaimCostWithoutStatisticsPostgres(t *testing.T) {
	ctx := context.Background()
	db := open(t, "pgx", pgURL)
	n := orderedCostNames(t, newPostgres(t))
	table := driver.QuoteIdent(n.Outbox)
	insert := "INSERT INTO " + table + " (id, topic, key, type, payload, available_at, created_at)" +
		" SELECT lpad(to_hex(g), 32, '0')::uuid, 'orders', " + costKey(func(a, b string) string { return a + " || " + b }, "/") +
		", 'order.paid', '\\x7b7d', now() - interval '1 minute', now() FROM generate_series(1, $1) AS g"
	if _, err := db.ExecContext(ctx, insert, costRecords); err != nil {
		t.Fatal(err)
	}
	var reltuples float64
	if err := db.QueryRowContext(ctx, "SELECT reltuples FROM pg_class WHERE oid = to_regclass($1)", table).Scan(&reltuples); err != nil {
		t.Fatal(err)
	}
	if reltuples >= 0 {
		t.Fatalf("%s has statistics (reltuples %v) before ANALYZE; the test needs a table never analysed (autovacuum off)", n.Outbox, reltuples)
	}
	// buffers is what one claim costs: the shared buffers its plan hit or read, planning aside.
	buffers := func(deadHoldsKey bool) int {
		q := "EXPLAIN (ANALYZE, BUFFERS, FORMAT JSON) " + databasesql.Postgres.OrderedClaimSQL(n, deadHoldsKey)
		var out []byte
		inRollback(t, db, func(tx *sql.Tx) error {
			return tx.QueryRowContext(ctx, q, time.Now(), costBatch).Scan(&out)
		})
		var plans []struct {
			Plan struct {
				Rows int `json:"Actual Rows"`
				Hit  int `json:"Shared Hit Blocks"`
				Read int `json:"Shared Read Blocks"`
			}
		}
		if err := json.Unmarshal(out, &plans); err != nil || len(plans) != 1 {
			t.Fatalf("EXPLAIN output %s: %v", out, err)
		}
		if p := plans[0].Plan; p.Rows != costBatch {
			t.Fatalf("the claim took %d records; want a full batch of %d heads", p.Rows, costBatch)
		}
		return plans[0].Plan.Hit + plans[0].Plan.Read
	}
	compareCosts(t, "shared buffers", buffers, func() error {
		_, err := db.ExecContext(ctx, "ANALYZE "+table)
		return err
	})
}

func TestOrderedClaimCostWithoutStatisticsMySQL(t *testing.T) {
	ctx := context.Background()
	db := open(t, "mysql", myDSN)
	n := orderedCostNames(t, newMySQL(t))
	table := "`" + n.Outbox + "`"
	// InnoDB recomputes a table's statistics in the background once a tenth of it changed. Stopping that keeps
	// the statistics of the empty table, as they stand between a burst and the recomputation, for the test.
	if _, err := db.ExecContext(ctx, "ALTER TABLE "+table+" STATS_AUTO_RECALC = 0"); err != nil {
		t.Fatal(err)
	}
	// Five cross-joined digits number the records: MySQL 8 and MariaDB cap recursive CTEs at 1,000 rows.
	digit := "(SELECT 0 AS d UNION ALL SELECT 1 UNION ALL SELECT 2 UNION ALL SELECT 3 UNION ALL SELECT 4" +
		" UNION ALL SELECT 5 UNION ALL SELECT 6 UNION ALL SELECT 7 UNION ALL SELECT 8 UNION ALL SELECT 9)"
	insert := "INSERT INTO " + table + " (id, topic, `key`, type, payload, available_at, created_at)" +
		" SELECT UNHEX(LPAD(HEX(g), 32, '0')), 'orders', " + costKey(func(a, b string) string { return "CONCAT(" + a + ", " + b + ")" }, "DIV") +
		", 'order.paid', '{}', 0, 0 FROM (SELECT 1 + a.d + 10 * b.d + 100 * c.d + 1000 * e.d + 10000 * f.d AS g" +
		" FROM " + digit + " AS a, " + digit + " AS b, " + digit + " AS c, " + digit + " AS e, " + digit + " AS f) AS s"
	if _, err := db.ExecContext(ctx, insert); err != nil {
		t.Fatal(err)
	}
	conn, err := db.Conn(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	// reads is what one claim costs: the rows its session's handlers read, by key and in index order.
	reads := func(deadHoldsKey bool) int {
		q := databasesql.MySQL.OrderedClaimSQL(n, deadHoldsKey)
		before := handlerReads(t, conn)
		tx, err := conn.BeginTx(ctx, nil)
		if err != nil {
			t.Fatal(err)
		}
		defer tx.Rollback()
		claimed := countRows(t, tx, q, time.Now().UnixMicro(), costBatch)
		if err := tx.Rollback(); err != nil {
			t.Fatal(err)
		}
		if claimed != costBatch {
			t.Fatalf("the claim took %d records; want a full batch of %d heads", claimed, costBatch)
		}
		return handlerReads(t, conn) - before
	}
	compareCosts(t, "handler reads", reads, func() error {
		_, err := db.ExecContext(ctx, "ANALYZE TABLE "+table)
		return err
	})
}

func TestOrderedClaimCostWithoutStatisticsSQLite(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "postbox.db")
	db := open(t, "sqlite", sqliteDSN(path))
	n := orderedCostNames(t, databasesql.New(db, databasesql.SQLite))
	insert := "WITH RECURSIVE s(g) AS (SELECT 1 UNION ALL SELECT g + 1 FROM s WHERE g < ?)" +
		" INSERT INTO " + driver.QuoteIdent(n.Outbox) + " (id, topic, key, type, payload, available_at, created_at)" +
		" SELECT printf('00000000-0000-7000-8000-%012d', g), 'orders', " + costKey(func(a, b string) string { return a + " || " + b }, "/") +
		", 'order.paid', x'7b7d', 0, 0 FROM s"
	if _, err := db.ExecContext(ctx, insert, costRecords); err != nil {
		t.Fatal(err)
	}
	// SQLite's modernc build offers no count of the VM steps a statement took, so the claim's cost is its plan:
	// the same plan before and after ANALYZE, reading the key index for each record's check.
	keyIndex := driver.Derived(n.Outbox, "_key_idx")
	args := []any{time.Now().UnixMicro(), costBatch}
	plan := func(deadHoldsKey bool) []string {
		q := databasesql.SQLite.OrderedClaimSQL(n, deadHoldsKey)
		if claimed := countRows(t, db, q, args...); claimed != costBatch {
			t.Fatalf("the claim took %d records; want a full batch of %d heads", claimed, costBatch)
		}
		p := queryPlan(t, db, q, args...)
		if !slices.ContainsFunc(p, func(step string) bool {
			return strings.Contains(step, "USING INDEX "+keyIndex+" (key=? AND id<?)")
		}) {
			t.Fatalf("DeadHoldsKey %v: plan %q; want each record's check to search %s by key and id", deadHoldsKey, p, keyIndex)
		}
		return p
	}
	before := map[bool][]string{false: plan(false), true: plan(true)}
	if _, err := db.ExecContext(ctx, "ANALYZE"); err != nil {
		t.Fatal(err)
	}
	for _, deadHoldsKey := range []bool{false, true} {
		if after := plan(deadHoldsKey); !slices.Equal(before[deadHoldsKey], after) {
			t.Errorf("DeadHoldsKey %v: plan before ANALYZE %q, after %q; want the same plan whatever the statistics",
				deadHoldsKey, before[deadHoldsKey], after)
		}
	}
}

// compareCosts measures the claim with cost, with and without DeadHoldsKey, on the never-analysed table and
// again after analyse, and fails when the two differ by more than costFactor.
func compareCosts(t *testing.T, unit string, cost func(deadHoldsKey bool) int, analyse func() error) {
	t.Helper()
	before := map[bool]int{false: cost(false), true: cost(true)}
	if err := analyse(); err != nil {
		t.Fatal(err)
	}
	for _, deadHoldsKey := range []bool{false, true} {
		b, a := before[deadHoldsKey], cost(deadHoldsKey)
		t.Logf("DeadHoldsKey %v: %d %s never analysed, %d after ANALYZE", deadHoldsKey, b, unit, a)
		if b > costFactor*a || a > costFactor*b {
			t.Errorf("DeadHoldsKey %v: a claim of %d heads from %d records cost %d %s on the never-analysed table and %d after ANALYZE; want them within %d× of each other",
				deadHoldsKey, costBatch, costRecords, b, unit, a, costFactor)
		}
	}
}

// handlerReads sums the session's Handler_read_* counters: the rows its statements read.
func handlerReads(t *testing.T, conn *sql.Conn) int {
	t.Helper()
	rows, err := conn.QueryContext(context.Background(), "SHOW SESSION STATUS LIKE 'Handler_read%'")
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	sum := 0
	for rows.Next() {
		var name string
		var v int
		if err := rows.Scan(&name, &v); err != nil {
			t.Fatal(err)
		}
		sum += v
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return sum
}

type querier interface {
	QueryContext(ctx context.Context, query string, args ...any) (*sql.Rows, error)
}

// countRows runs q and counts the rows it returns.
func countRows(t *testing.T, db querier, q string, args ...any) int {
	t.Helper()
	rows, err := db.QueryContext(context.Background(), q, args...)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	n := 0
	for rows.Next() {
		n++
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return n
}

// queryPlan is SQLite's EXPLAIN QUERY PLAN of q: one line per step.
func queryPlan(t *testing.T, db *sql.DB, q string, args ...any) []string {
	t.Helper()
	rows, err := db.QueryContext(context.Background(), "EXPLAIN QUERY PLAN "+q, args...)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var plan []string
	for rows.Next() {
		var id, parent, unused int
		var detail string
		if err := rows.Scan(&id, &parent, &unused, &detail); err != nil {
			t.Fatal(err)
		}
		plan = append(plan, detail)
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return plan
}

// inRollback runs fn in a transaction and rolls it back, so that a claim's locks end with it.
func inRollback(t *testing.T, db *sql.DB, fn func(tx *sql.Tx) error) {
	t.Helper()
	tx, err := db.Begin()
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback()
	if err := fn(tx); err != nil {
		t.Fatal(err)
	}
}

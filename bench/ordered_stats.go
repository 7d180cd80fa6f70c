package bench

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/postbox-go/postbox/driver"
	"github.com/postbox-go/postbox/driver/databasesql"
)

// orderedStatsRun is how many consecutive records of the ordered-stats backlog share a key, as after a burst per
// aggregate: a batch of heads lies among ten times as many records held behind them.
const orderedStatsRun = 10

// orderedStatsClaims is how many claims each figure of the ordered-stats scenario is the median of.
const orderedStatsClaims = 7

// benchOrderedStats times the ordered claim, one batch of heads from Options.Events pending records over
// Options.Keys keys, on a table the database has never analysed and again after ANALYZE (DESIGN.md, "No cost by
// luck"; issue 30). events_per_s is the never-analysed claim's rate (records per second of claiming) and
// baseline_per_s the analysed one's, so the ratio is 1 when the statistics change nothing and falls below 1 by
// as much as they slow the claim down. The unordered claim is timed the same way, for comparison. Each claim
// runs on its own and ends with its statement, so every one meets the same backlog.
func benchOrderedStats[TTx any](ctx context.Context, t *target[TTx], o Options) (Result, error) {
	const table = "bench_ordered_stats"
	c, err := t.open(ctx, 2)
	if err != nil {
		return Result{}, err
	}
	defer c.close()
	cfg := o.clientConfig()
	cfg.Ordered = true
	if _, err := newOutbox(ctx, t, c, table, cfg); err != nil {
		return Result{}, err
	}
	defer dropOutbox(context.WithoutCancel(ctx), t, c, table)
	if t.dialect == "mysql" {
		// InnoDB recomputes a table's statistics in the background once a tenth of it changed; stopping that
		// keeps the empty table's, as they stand between a burst and the recomputation.
		if _, err := c.exec(ctx, "ALTER TABLE "+table+" STATS_AUTO_RECALC = 0"); err != nil {
			return Result{}, err
		}
	}
	o.Logger.Info("loading backlog", "events", o.Events, "keys", o.Keys, "run", orderedStatsRun)
	if _, err := c.exec(ctx, keyRunsInsert(t.dialect, table, o.Events, o.Keys)); err != nil {
		return Result{}, fmt.Errorf("load the backlog: %w", err)
	}
	if t.dialect == "sqlite" {
		// The backlog went into the write-ahead log; reading it from there made the first phase slower whatever
		// the statistics, so both phases read it from the database file.
		if _, err := c.exec(ctx, "PRAGMA wal_checkpoint(TRUNCATE)"); err != nil {
			return Result{}, err
		}
	}
	dialect := map[string]databasesql.Dialect{"postgres": databasesql.Postgres, "mysql": databasesql.MySQL, "sqlite": databasesql.SQLite}[t.dialect]
	names := driver.Names{Outbox: table, Inbox: table + "_inbox", Ordered: true}
	claims := map[string]string{"ordered": dialect.OrderedClaimSQL(names, false), "unordered": dialect.ClaimSQL(names)}
	// A full batch: one record of each key at most for the ordered claim.
	batch := map[string]int{"ordered": min(o.BatchSize, o.Events, o.Keys), "unordered": min(o.BatchSize, o.Events)}
	// claim returns the median time of one claim by q, checking that it took a full batch.
	claim := func(name string) (time.Duration, error) {
		var times []time.Duration
		for range orderedStatsClaims {
			start := time.Now()
			n, err := c.readRecords(ctx, claims[name], t.now(), o.BatchSize)
			if err != nil {
				return 0, fmt.Errorf("%s claim: %w", name, err)
			}
			times = append(times, time.Since(start))
			if want := batch[name]; n != want {
				return 0, fmt.Errorf("the %s claim took %d records; want a full batch of %d", name, n, want)
			}
		}
		slices.Sort(times)
		return times[len(times)/2], nil
	}
	figures := map[string]time.Duration{}
	for _, analysed := range []bool{false, true} {
		phase := "unanalysed"
		if analysed {
			phase = "analysed"
			analyse := map[string]string{"postgres": "ANALYZE ", "mysql": "ANALYZE TABLE ", "sqlite": "ANALYZE "}[t.dialect] + table
			if _, err := c.exec(ctx, analyse); err != nil {
				return Result{}, err
			}
		}
		for _, name := range []string{"ordered", "unordered"} {
			d, err := claim(name)
			if err != nil {
				return Result{}, err
			}
			figures[name+"_"+phase] = d
			o.Logger.Info("claim timed", "claim", name, "statistics", phase, "median_ms", ms(d))
		}
	}
	n := int64(batch["ordered"])
	res := newResult(rate(n, figures["ordered_unanalysed"]), rate(n, figures["ordered_analysed"]))
	for k, d := range figures {
		res.Extra[k+"_ms"] = ms(d)
	}
	res.Extra["keys"] = float64(o.Keys)
	res.Extra["records"] = float64(o.Events)
	res.Extra["batch"] = float64(n)
	return res, nil
}

// keyRunsInsert is one statement writing n pending records into table, record g (from 1) with the key
// k((g-1)/orderedStatsRun mod keys) and IDs in g's order, so that the backlog costs no round trip per record.
func keyRunsInsert(dialect, table string, n, keys int) string {
	key := fmt.Sprintf("(((g - 1) / %d) %% %d)", orderedStatsRun, keys)
	switch dialect {
	case "postgres":
		return "INSERT INTO " + table + " (id, topic, key, type, payload, available_at, created_at)" +
			" SELECT lpad(to_hex(g), 32, '0')::uuid, 'orders', 'k' || " + key + ", 'order.paid', '\\x7b7d'," +
			fmt.Sprintf(" now() - interval '1 minute', now() FROM generate_series(1, %d) AS g", n)
	case "mysql":
		// Cross-joined digits number the records: MySQL 8 and MariaDB cap recursive CTEs at 1,000 rows.
		digit := "(SELECT 0 AS d UNION ALL SELECT 1 UNION ALL SELECT 2 UNION ALL SELECT 3 UNION ALL SELECT 4" +
			" UNION ALL SELECT 5 UNION ALL SELECT 6 UNION ALL SELECT 7 UNION ALL SELECT 8 UNION ALL SELECT 9)"
		g, from := "1", ""
		for i, p := 0, 1; p < n; i, p = i+1, p*10 {
			g += fmt.Sprintf(" + %d * d%d.d", p, i)
			if from != "" {
				from += ", "
			}
			from += fmt.Sprintf("%s AS d%d", digit, i)
		}
		return "INSERT INTO " + table + " (id, topic, `key`, type, payload, available_at, created_at)" +
			" SELECT UNHEX(LPAD(HEX(g), 32, '0')), 'orders', CONCAT('k', " + strings.Replace(key, " / ", " DIV ", 1) + ")," +
			" 'order.paid', '{}', 0, 0 FROM (SELECT " + g + " AS g FROM " + from + ") AS s" + fmt.Sprintf(" WHERE g <= %d", n)
	}
	return fmt.Sprintf("WITH RECURSIVE s(g) AS (SELECT 1 UNION ALL SELECT g + 1 FROM s WHERE g < %d)", n) +
		" INSERT INTO " + table + " (id, topic, key, type, payload, available_at, created_at)" +
		" SELECT printf('00000000-0000-7000-8000-%012d', g), 'orders', 'k' || " + key + ", 'order.paid', x'7b7d', 0, 0 FROM s"
}

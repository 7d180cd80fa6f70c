package bench

import (
	"net/url"
	"path/filepath"
	"testing"

	"github.com/go-sql-driver/mysql"

	"github.com/postbox-go/postbox/internal/testenv"
)

// TestOrderedStats runs the ordered-stats scenario on each database and checks that it reports both claims'
// times before and after ANALYZE; the figures of a backlog this small mean nothing.
func TestOrderedStats(t *testing.T) {
	dsn, err := testenv.FreshMySQL("postbox_test_bench")
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := mysql.ParseDSN(dsn)
	if err != nil {
		t.Fatal(err)
	}
	my := url.URL{Scheme: "mysql", User: url.User(cfg.User), Host: cfg.Addr, Path: "/" + cfg.DBName}
	if cfg.Passwd != "" {
		my.User = url.UserPassword(cfg.User, cfg.Passwd)
	}
	for _, o := range []Options{small(DBPgxV5, pgURL), small(DBMySQL, my.String()),
		small(DBSQLite, filepath.Join(t.TempDir(), "bench.db"))} {
		t.Run(o.DB, func(t *testing.T) {
			got := run(t, o, "ordered-stats")["ordered-stats"]
			positive(t, got, "events_per_s", "baseline_per_s", "ratio", "ordered_unanalysed_ms", "ordered_analysed_ms",
				"unordered_unanalysed_ms", "unordered_analysed_ms")
			if want := min(o.BatchSize, o.Keys); got["records"] != float64(o.Events) || got["batch"] != float64(want) {
				t.Errorf("ordered-stats: %v; want records %d and a batch of %d heads", got, o.Events, want)
			}
		})
	}
}

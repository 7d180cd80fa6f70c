package bench

import (
	"context"
	"fmt"
	"net/url"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/postbox-go/postbox/internal/testenv"
)

// TestMultiReportsFigures runs the multi scenario on three databases for a moment: the figures mean nothing, the
// test checks that each is reported and that every event was published.
func TestMultiReportsFigures(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	prefix := testenv.Unique("pbt_multi") + "_"
	const sources = 3
	t.Cleanup(func() {
		u, err := url.Parse(pgURL)
		if err != nil {
			return
		}
		u.Path = "/postgres"
		admin, err := pgx.Connect(context.Background(), u.String())
		if err != nil {
			return
		}
		defer admin.Close(context.Background())
		for i := range sources {
			_, _ = admin.Exec(context.Background(), "DROP DATABASE IF EXISTS "+pgx.Identifier{fmt.Sprintf("%s%03d", prefix, i)}.Sanitize()+" WITH (FORCE)")
		}
	})
	res, err := RunMulti(ctx, MultiOptions{URL: pgURL, Prefix: prefix, Sources: sources, Rate: 20, Duration: time.Second,
		IdleWindow: 500 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	if res.Scenario != "multi" || res.Latency == nil || res.Latency.P99 <= 0 || res.EventsPerS <= 0 {
		t.Fatalf("result: %+v", res)
	}
	for _, k := range []string{"idle_statements_per_s_per_source_listen", "idle_statements_per_s_per_source_poll", "rss_mib_idle",
		"rss_mib_under_load", "loadavg_1m_end", "sources_listening"} {
		if _, ok := res.Extra[k]; !ok {
			t.Errorf("no %s in %v", k, res.Extra)
		}
	}
	if got := res.Extra["sources_listening"]; got != sources {
		t.Errorf("%v sources listening, want %d", got, sources)
	}
	t.Logf("%+v %+v", *res.Latency, res.Extra)
}

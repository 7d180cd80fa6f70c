package deploytest

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"regexp"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/prometheus/prometheus/promql/parser"

	"github.com/postbox-go/postbox/internal/testenv"
)

const dashboardFile = "deploy/grafana/postbox.json"

// Every metric the dashboard and the alert rules query must be one a running relay serves on /metrics, read from
// a real scrape: a renamed or removed metric fails here, naming the panel or alert that uses it.
func TestDashboardAndRulesUseExportedMetrics(t *testing.T) {
	exported := scrapeRelay(t)
	for _, u := range usedMetrics(t) {
		if exported[u.name] || u.name == "up" || strings.HasPrefix(u.name, "scrape_") {
			continue // up and scrape_* are the series Prometheus adds to every scrape
		}
		t.Errorf("%s: %s uses %s, which the relay does not export", u.file, u.where, u.name)
	}
	if t.Failed() {
		t.Logf("the relay exports: %s", strings.Join(sortedKeys(exported), " "))
	}
}

// use is one metric name a query uses, and where.
type use struct {
	file, where, name string
}

// usedMetrics parses every query of the dashboard (panel targets and template variables) and every rule
// expression, and returns the metric names they select.
func usedMetrics(t *testing.T) []use {
	t.Helper()
	var uses []use
	add := func(file, where, query string) {
		names, err := metricNames(query)
		if err != nil {
			t.Errorf("%s: %s: %v", file, where, err)
		}
		for _, n := range names {
			uses = append(uses, use{file, where, n})
		}
	}
	for _, g := range readRules(t).Groups {
		for _, r := range g.Rules {
			add(rulesFile, "alert "+r.Alert+r.Record, r.Expr)
		}
	}

	b, err := os.ReadFile(root + "/" + dashboardFile)
	if err != nil {
		t.Fatal(err)
	}
	var dash struct {
		Panels []struct {
			Title   string `json:"title"`
			Targets []struct {
				Expr string `json:"expr"`
			} `json:"targets"`
		} `json:"panels"`
		Templating struct {
			List []struct {
				Name  string          `json:"name"`
				Type  string          `json:"type"`
				Query json.RawMessage `json:"query"`
			} `json:"list"`
		} `json:"templating"`
	}
	if err := json.Unmarshal(b, &dash); err != nil {
		t.Fatalf("%s: %v", dashboardFile, err)
	}
	for _, p := range dash.Panels {
		for _, tg := range p.Targets {
			add(dashboardFile, fmt.Sprintf("panel %q", p.Title), tg.Expr)
		}
	}
	for _, v := range dash.Templating.List {
		if v.Type != "query" {
			continue
		}
		var q struct {
			Query string `json:"query"`
		}
		if err := json.Unmarshal(v.Query, &q); err != nil {
			t.Errorf("%s: variable %s: query: %v", dashboardFile, v.Name, err)
			continue
		}
		add(dashboardFile, "variable $"+v.Name, q.Query)
	}
	if len(uses) == 0 {
		t.Fatal("the dashboard and the rules use no metric: the files were not read")
	}
	return uses
}

var (
	grafanaInterval = regexp.MustCompile(`\$\{?__(rate_interval|interval|range)\}?`)
	grafanaVariable = regexp.MustCompile(`\$\{?\w+(:\w+)?\}?`)
	labelValues     = regexp.MustCompile(`^\s*label_values\((.*),\s*\w+\s*\)\s*$`)
)

// metricNames returns the metric names a PromQL expression, or a Grafana query, selects. Grafana's variables
// are replaced by values PromQL accepts, and label_values(QUERY, LABEL) is read as QUERY.
func metricNames(query string) ([]string, error) {
	if m := labelValues.FindStringSubmatch(query); m != nil {
		query = m[1]
	}
	query = grafanaInterval.ReplaceAllString(query, "5m")
	query = grafanaVariable.ReplaceAllString(query, "x")
	expr, err := parser.NewParser(parser.Options{}).ParseExpr(query)
	if err != nil {
		return nil, fmt.Errorf("%q: %w", query, err)
	}
	var names []string
	parser.Inspect(expr, func(n parser.Node, _ []parser.Node) error {
		vs, ok := n.(*parser.VectorSelector)
		if !ok {
			return nil
		}
		name := vs.Name
		for _, m := range vs.LabelMatchers {
			if m.Name == "__name__" {
				name = m.Value
			}
		}
		if name != "" && !slices.Contains(names, name) {
			names = append(names, name)
		}
		return nil
	})
	return names, nil
}

// scrapeRelay runs the relay on a fresh PostgreSQL database, publishing to a webhook, until it has published a
// message, parked one as dead and left one pending, so that every series it has appears; it returns the names of
// the samples /metrics serves.
func scrapeRelay(t *testing.T) map[string]bool {
	t.Helper()
	db, err := testenv.FreshPostgres("postbox_test_deploy")
	if err != nil {
		t.Fatal(err)
	}
	run(t, binary, "migrate", "up", "--db", db)

	// The webhook acknowledges topic ok and refuses topic bad for good (a permanent failure: dead at once).
	hook := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		if strings.HasSuffix(r.URL.Path, "/bad") {
			w.WriteHeader(http.StatusUnprocessableEntity)
			return
		}
		w.WriteHeader(http.StatusNoContent)
	}))
	defer hook.Close()
	run(t, binary, "send", "--db", db, "--topic", "ok", "--type", "deploy.ok", "--data", "{}")
	run(t, binary, "send", "--db", db, "--topic", "bad", "--type", "deploy.bad", "--data", "{}")
	run(t, binary, "send", "--db", db, "--topic", "later", "--type", "deploy.later", "--data", "{}", "--delay", "24h")

	// A free port for --http: the relay's log is read only once it has stopped.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	var logs bytes.Buffer
	relay := exec.Command(binary, "relay", "--db", db, "--broker", hook.URL+"/{topic}", "--http", addr, "--poll-interval", "50ms")
	// A secret of the whsec_ form, 32 bytes, from the environment as the relay's documentation advises.
	relay.Env = append(os.Environ(), "POSTBOX_WEBHOOK_SECRET=whsec_ZGVwbG95dGVzdC1kZXBsb3l0ZXN0LWRlcGxveXRlc3Q=")
	relay.Stderr = &logs
	if err := relay.Start(); err != nil {
		t.Fatal(err)
	}
	var once sync.Once
	stop := func() {
		once.Do(func() {
			_ = relay.Process.Signal(syscall.SIGTERM)
			_ = relay.Wait()
		})
	}
	defer stop()

	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	var body []byte
	for {
		body, err = get(ctx, "http://"+addr+"/metrics")
		if err == nil && bytes.Contains(body, []byte(`postbox_published_total{topic="ok"}`)) &&
			bytes.Contains(body, []byte(`postbox_dead_total{topic="bad"}`)) {
			break
		}
		select {
		case <-ctx.Done():
			stop()
			t.Fatalf("the relay had not published topic ok and parked topic bad within a minute; /metrics:\n%s\nlog:\n%s", body, logs.String())
		case <-time.After(50 * time.Millisecond):
		}
	}
	stop()

	names := map[string]bool{}
	sc := bufio.NewScanner(bytes.NewReader(body))
	for sc.Scan() {
		line := sc.Text()
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		if i := strings.IndexAny(line, "{ "); i > 0 {
			names[line[:i]] = true
		}
	}
	return names
}

func get(ctx context.Context, url string) ([]byte, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return nil, err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	return io.ReadAll(resp.Body)
}

func sortedKeys(m map[string]bool) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}

func TestMetricNamesReadsGrafanaQueries(t *testing.T) {
	for query, want := range map[string][]string{
		`sum by (topic) (rate(postbox_published_total{job="$job", topic=~"$topic"}[$__rate_interval]))`:      {"postbox_published_total"},
		`label_values(postbox_outbox_up{job="$job"}, source)`:                                                {"postbox_outbox_up"},
		`absent(up{job="postbox"} == 1) or {__name__="postbox_dead"}`:                                        {"up", "postbox_dead"},
		`histogram_quantile(0.99, sum by (le) (rate(postbox_batch_duration_seconds_bucket[${__interval}])))`: {"postbox_batch_duration_seconds_bucket"},
	} {
		got, err := metricNames(query)
		if err != nil || !slices.Equal(got, want) {
			t.Errorf("metricNames(%s) = %q, %v; want %q", query, got, err, want)
		}
	}
}

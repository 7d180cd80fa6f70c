package console_test

import (
	"context"
	"encoding/json"
	"net/http"
	"net/url"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/postbox-go/postbox"
	"github.com/postbox-go/postbox/console"
)

// TestDeadListShowsTheCause: the list shows the cause of an error, not which message went where, with the full
// text on hover and on the message page.
func TestDeadListShowsTheCause(t *testing.T) {
	srv, client := handlerEnv(t, console.Config{Token: strongToken})
	ids := deadWith(t, client, func(r postbox.Record) string {
		return "webhook: post message " + r.ID + " to https://hooks.example/orders: 500 Internal Server Error: database is down"
	}, msgs(1, "orders", "order.created")...)
	s := newSession(t, srv.URL+"/ops/postbox")
	s.login(strongToken)
	_, page := s.get("/dead")
	cell := regexp.MustCompile(`<td class="err" title="([^"]*)">([^<]*)</td>`).FindStringSubmatch(page)
	if cell == nil || cell[2] != "500 Internal Server Error: database is down" || !strings.Contains(cell[1], "post message "+ids[0]) {
		t.Errorf("the list's error cell %q, want the cause shown and the whole error on hover", cell)
	}
	if _, page := s.get("/dead/main/" + ids[0]); !strings.Contains(page, `id="cause">500 Internal Server Error: database is down<`) ||
		!strings.Contains(page, "post message "+ids[0]) {
		t.Errorf("the message page lacks the cause or the full error")
	}
}

// TestEditedCopyChecked: an edited JSON payload that does not parse is refused with where it stops parsing, and
// what was typed stays in the form; a good one is sent and the new message's ID links to it.
func TestEditedCopyChecked(t *testing.T) {
	srv, client := handlerEnv(t, console.Config{Token: strongToken})
	ids := deadWith(t, client, func(postbox.Record) string { return "refused" }, msgs(1, "orders", "order.created")...)
	s := newSession(t, srv.URL+"/ops/postbox")
	s.login(strongToken)
	s.get("/dead/main/" + ids[0])
	send := func(payload string) (*http.Response, string) {
		return s.send("POST", "/dead/main/"+ids[0]+"/send", strings.NewReader(url.Values{"csrf": {s.csrf}, "encoding": {"json"},
			"topic": {"orders"}, "type": {"order.created"}, "payload": {payload}}.Encode()),
			http.Header{"Content-Type": {"application/x-www-form-urlencoded"}})
	}
	resp, page := send("{\n  \"order\": 1000,\n  \"total\": 20.50,,\n}")
	if resp.StatusCode != http.StatusBadRequest || !strings.Contains(page, "not valid JSON: line 3, column") ||
		!strings.Contains(page, "invalid character &#39;,&#39;") || !strings.Contains(page, "20.50,,") {
		t.Errorf("invalid JSON: %s, want 400 with where it stops parsing and the typed text:\n%s", resp.Status, page)
	}
	if n, _ := client.Stats(context.Background()); n.Pending != 0 {
		t.Errorf("an invalid payload was enqueued: %d pending", n.Pending)
	}
	if resp, _ := send(`{"order": 1000}`); resp.StatusCode != http.StatusSeeOther {
		t.Fatalf("valid JSON: %s", resp.Status)
	}
	_, page = s.get("/dead/main/" + ids[0])
	m := regexp.MustCompile(`<a href="/ops/postbox/message/main/([0-9a-f-]{36})" class="mono" id="flash-link">([0-9a-f-]{36})</a>`).FindStringSubmatch(page)
	if m == nil || m[1] != m[2] {
		t.Fatalf("the flash does not link the new message:\n%s", page)
	}
	if resp, page := s.get("/message/main/" + m[1]); resp.StatusCode != http.StatusOK || !strings.Contains(page, `&#34;order&#34;: 1000`) {
		t.Errorf("the new message's page: %s", resp.Status)
	}
}

// TestPauseUnknownTopicAsks: pausing a topic no message uses asks first; a topic with messages pauses at once.
func TestPauseUnknownTopicAsks(t *testing.T) {
	srv, client := handlerEnv(t, console.Config{Token: strongToken})
	enqueueScheduled(t, client, 1, 0)
	s := newSession(t, srv.URL+"/ops/postbox")
	s.login(strongToken)
	s.get("/")
	pause := func(form url.Values) (*http.Response, string) {
		form.Set("csrf", s.csrf)
		return s.send("POST", "/topics/main/pause", strings.NewReader(form.Encode()), http.Header{"Content-Type": {"application/x-www-form-urlencoded"}})
	}
	if resp, page := pause(url.Values{"topic": {"ordres"}}); resp.StatusCode != http.StatusOK || !strings.Contains(page, `id="pause-unknown"`) {
		t.Errorf("pausing a mistyped topic: %s, want a question first", resp.Status)
	}
	if paused, _ := client.PausedTopics(context.Background()); len(paused) != 0 {
		t.Fatalf("paused %v before the confirmation", paused)
	}
	if resp, _ := pause(url.Values{"topic": {"ordres"}, "confirm": {"1"}}); resp.StatusCode != http.StatusSeeOther {
		t.Errorf("pausing it after the confirmation: %s", resp.Status)
	}
	if resp, _ := pause(url.Values{"topic": {"orders"}}); resp.StatusCode != http.StatusSeeOther {
		t.Errorf("pausing a topic with messages: %s, want it paused at once", resp.Status)
	}
	if paused, _ := client.PausedTopics(context.Background()); len(paused) != 2 {
		t.Errorf("paused %v, want ordres and orders", paused)
	}
}

// TestOverviewLongestWait: the overview's longest wait is that of the oldest ready message of a topic that is not
// paused, named with its topic; the JSON gives the same per topic.
func TestOverviewLongestWait(t *testing.T) {
	srv, client := handlerEnv(t, console.Config{})
	enqueueScheduled(t, client, 2, 0) // orders
	if _, err := client.PauseTopic(context.Background(), "orders", "test"); err != nil {
		t.Fatal(err)
	}
	err := client.InTx(context.Background(), func(ctx context.Context, tx pgxTx) error {
		return client.EnqueueBatch(ctx, tx, msgs(1, "invoices", "invoice.issued"))
	})
	if err != nil {
		t.Fatal(err)
	}
	resp, err := http.Get(srv.URL + "/ops/postbox/api/overview")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var out struct {
		Databases []struct {
			Answered         bool
			LongestWaitTopic string   `json:"longest_wait_topic"`
			LongestWait      *float64 `json:"longest_wait_seconds"`
			Topics           []struct {
				Topic   string
				Paused  bool
				Waiting *float64 `json:"waiting_seconds"`
			}
		}
	}
	if err := json.NewDecoder(resp.Body).Decode(&out); err != nil {
		t.Fatal(err)
	}
	db := out.Databases[0]
	if !db.Answered || db.LongestWaitTopic != "invoices" || db.LongestWait == nil {
		t.Errorf("longest wait %v on %q, answered %v; want invoices (orders is paused, though its messages waited longer)",
			db.LongestWait, db.LongestWaitTopic, db.Answered)
	}
	for _, tp := range db.Topics {
		if tp.Waiting == nil {
			t.Errorf("topic %s has no waiting_seconds", tp.Topic)
		}
	}
}

// TestPageBasics: each page has a title of its own, a skip link and a favicon, and time filters take the 24-hour
// UTC form the pages show, saying so in words when they cannot read one.
func TestPageBasics(t *testing.T) {
	srv, client := handlerEnv(t, console.Config{Token: strongToken})
	ids := deadWith(t, client, func(postbox.Record) string { return "refused" }, msgs(1, "orders", "order.created")...)
	s := newSession(t, srv.URL+"/ops/postbox")
	s.login(strongToken)
	titles := map[string]bool{}
	for path, want := range map[string]string{"/": "Overview", "/dead?topic=orders": "Dead letters · main · orders",
		"/dead/main/" + ids[0]: "Dead message " + ids[0], "/find?q=customer-1": "Find customer-1", "/replay": "Replay · main",
		"/inbox": "Inbox · main", "/schema": "Schema"} {
		_, page := s.get(path)
		m := regexp.MustCompile(`<title>([^<]*) · Postbox console</title>`).FindStringSubmatch(page)
		if m == nil || m[1] != want || titles[m[1]] {
			t.Errorf("%s: title %q, want %q, its own", path, m, want)
		}
		if m != nil {
			titles[m[1]] = true
		}
		if !strings.Contains(page, `<a class="skip" href="#main">`) || !strings.Contains(page, `<main id="main"`) ||
			!strings.Contains(page, `rel="icon" href="/ops/postbox/assets/favicon.svg"`) {
			t.Errorf("%s lacks the skip link or the favicon", path)
		}
	}
	if resp, _ := s.get("/assets/favicon.svg"); resp.StatusCode != http.StatusOK {
		t.Errorf("the favicon: %s", resp.Status)
	}
	later := time.Now().UTC().Add(time.Hour).Format("2006-01-02 15:04")
	if resp, page := s.get("/dead?to=" + url.QueryEscape(later)); resp.StatusCode != http.StatusOK || !strings.Contains(page, ids[0]) {
		t.Errorf("a 24-hour UTC time %q: %s", later, resp.Status)
	}
	resp, page := s.get("/dead?from=" + url.QueryEscape("12/2/2026 2:05 PM"))
	if resp.StatusCode != http.StatusBadRequest || !strings.Contains(page, "YYYY-MM-DD HH:MM") || strings.Contains(page, "2006-01-02") {
		t.Errorf("a 12-hour time: %s, want 400 saying the form in words, not Go's reference date:\n%s", resp.Status, page)
	}
}

package console_test

import (
	"context"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"testing"

	"github.com/chromedp/chromedp"

	"github.com/postbox-go/postbox"
	"github.com/postbox-go/postbox/internal/testenv"
)

// TestOverviewShowsBacklog: messages enqueued while the overview is open appear on it without a reload.
func TestOverviewShowsBacklog(t *testing.T) {
	e := newEnv(t, envOptions{})
	orders, invoices := e.topic("orders"), e.topic("invoices")
	e.login()
	e.open("/")
	e.waitText("section.db h2", "orders-db")
	e.enqueue(msgs(1200, orders, "order.created")...)
	e.enqueue(msgs(340, invoices, "invoice.issued")...)
	e.waitText(`section.db [data-stat=pending]`, "1\u202f540")
	e.waitText(`section.db [data-stat=ready]`, "1\u202f540")
	e.waitText(`section.db [data-stat=scheduled]`, "0")
	e.waitText(fmt.Sprintf(`tr[data-topic=%q] [data-stat=pending]`, orders), "1\u202f200")
	e.enqueue(msgs(300, orders, "order.created")...)
	e.waitText(`section.db [data-stat=pending]`, "1\u202f840")
	e.waitText("section.db", "pending")
	// The chart's pending line follows the samples: none, 1540 and 1840 messages are at least two heights.
	e.waitTrue("the chart's pending line through samples of different backlogs", `(() => {
		const line = document.querySelector('section.db svg.chart[aria-label="messages waiting"] polyline.s-ready');
		if (!line) return false;
		const ys = line.getAttribute("points").trim().split(/\s+/).map(p => p.split(",")[1]);
		return ys.length >= 3 && new Set(ys).size >= 2;
	})()`)
	e.shot("overview")
}

// TestDeadLetterRetry: filter the dead letters, open one, retry it; it leaves the list and reaches the broker.
func TestDeadLetterRetry(t *testing.T) {
	e := newEnv(t, envOptions{})
	payments, other := e.topic("payments"), e.topic("shipping")
	e.relay()
	e.enqueue(msgs(4, payments, "payment.captured")...)
	e.enqueue(msgs(2, other, "shipment.sent")...)
	recs := e.dead(payments, 4)
	e.dead(other, 2)

	e.login()
	e.open("/dead?topic=" + payments + "&key=customer-1")
	rows := eval[[]string](e, `[...document.querySelectorAll("table.dead tbody tr[data-id]")].map(r => r.dataset.id)`)
	var want []string
	for _, r := range recs {
		if r.Key == "customer-1" {
			want = append(want, r.ID)
		}
	}
	slices.Sort(rows)
	slices.Sort(want)
	if !slices.Equal(rows, want) {
		t.Fatalf("the filter topic=%s key=customer-1 lists %v, want %v", payments, rows, want)
	}
	e.shot("dead-letters")
	id := rows[0]

	e.click(fmt.Sprintf(`tr[data-id=%q] td a`, id))
	e.waitText("h1", id)
	e.waitText("#last-error", "no response")
	e.waitText("#payload", `"currency": "EUR"`)
	e.shot("dead-letter")

	// The broker takes the topic from now on; the retried message reaches it.
	s := e.stream(payments)
	e.click("#retry-one")
	e.waitText(".flash", "Retried 1 dead message(s)")
	if ids := eval[[]string](e, `[...document.querySelectorAll("table.dead tbody tr[data-id]")].map(r => r.dataset.id)`); slices.Contains(ids, id) {
		t.Errorf("the retried message %s is still listed: %v", id, ids)
	}
	testenv.Eventually(t, "the retried message in the stream", func() bool { return slices.Contains(e.streamIDs(s), id) })
	if got := e.log.String(); !strings.Contains(got, "who=token") || !strings.Contains(got, "dead retry") {
		t.Errorf("the retry was not logged with who made it:\n%s", got)
	}
}

// TestPurgeByFilter: purging what a filter matches shows the count first, and purges only after the
// confirmation, only what matches.
func TestPurgeByFilter(t *testing.T) {
	e := newEnv(t, envOptions{})
	payments, other := e.topic("payments"), e.topic("shipping")
	e.relay()
	e.enqueue(msgs(5, payments, "payment.captured")...)
	e.enqueue(msgs(3, other, "shipment.sent")...)
	recs := e.dead(payments, 5)
	e.dead(other, 3)

	e.login()
	e.open("/dead?order=newest&topic=" + payments)
	if first := eval[string](e, `document.querySelector("table.dead tbody tr[data-id]").dataset.id`); first != recs[len(recs)-1].ID {
		t.Errorf("newest first lists %s first, want %s", first, recs[len(recs)-1].ID)
	}
	e.open("/dead?topic=" + payments)
	e.click("#purge-filter")
	e.waitText("#confirm-count", "This will purge 5 dead message(s)")
	e.shot("purge-confirm")
	if n := len(e.dead(payments, 5)); n != 5 {
		t.Fatalf("the confirmation page purged already: %d left", n)
	}
	e.click("#confirm")
	e.waitText(".flash", "Purged 5 dead message(s)")
	e.dead(payments, 0)
	e.dead(other, 3)
}

// TestPauseTopic: a paused topic's messages wait while another topic's are published, and resuming, with the
// relay running, publishes them. The relay reports to the console, which lists it with its latency.
func TestPauseTopic(t *testing.T) {
	e := newEnv(t, envOptions{})
	held, flowing := e.topic("held"), e.topic("flowing")
	heldStream, flowingStream := e.stream(held), e.stream(flowing)
	e.login()
	e.open("/")
	e.press(`section.db form.toolbar button`, map[string]string{`section.db form.toolbar input[name=topic]`: held})
	// No message uses the topic yet: the console asks first, since a mistyped name would pause nothing meant.
	e.waitText("#pause-unknown", "No pending or dead message of topic "+held)
	e.click("#confirm-pause")
	e.waitText(".flash", "Paused topic "+held)
	// The relay starts after the pause, so that its first claim reads it: a running relay reads it within
	// PausedRefresh, a time and no event the test could wait for. The resume below is read by a running relay.
	e.relay()

	// One transaction, the held messages first: a relay that did not skip the paused topic would claim them with
	// the flowing ones or before them.
	ids := e.enqueue(append(msgs(3, held, "stock.reserved"), msgs(3, flowing, "stock.released")...)...)
	heldIDs, flowingIDs := ids[:3], ids[3:]
	testenv.Eventually(t, "the flowing topic published and settled", func() bool {
		return len(e.streamIDs(flowingStream)) == len(flowingIDs) && e.pending(flowing) == 0
	})
	if got := e.streamIDs(heldStream); len(got) != 0 {
		t.Fatalf("the paused topic published %v", got)
	}
	if n := e.pending(held); n != int64(len(heldIDs)) {
		t.Fatalf("%d of the paused topic's %d messages pending, want all", n, len(heldIDs))
	}
	e.open("/")
	// The relay reports to the console: it is seen, and the latency of the flowing topic's messages shows.
	e.waitText(`[data-relay]`, "relay-1")
	e.waitText(`section.db [data-stat=latency]`, "ms")
	e.waitText(fmt.Sprintf(`tr[data-topic=%q]`, held), "paused")
	e.waitText(fmt.Sprintf(`tr[data-topic=%q] [data-stat=pending]`, held), "3")
	e.shot("overview-paused")

	e.press(fmt.Sprintf(`button[data-pause=%q]`, held), nil)
	e.waitText(".flash", "Resumed topic "+held)
	testenv.Eventually(t, "the resumed topic published", func() bool { return len(e.streamIDs(heldStream)) == len(heldIDs) })
}

// TestChangeRefused: a change is refused without a login, and without the form's CSRF token when logged in.
func TestChangeRefused(t *testing.T) {
	e := newEnv(t, envOptions{})
	payments := e.topic("payments")
	e.relay()
	e.enqueue(msgs(2, payments, "payment.captured")...)
	recs := e.dead(payments, 2)

	// Not logged in: the page offers no change, and a forged form is refused.
	e.open("/dead?topic=" + payments)
	if n := eval[int](e, `document.querySelectorAll("#purge-filter, #retry-selected").length`); n != 0 {
		t.Errorf("the dead-letter page offers changes before login")
	}
	forge := func(csrf bool) {
		field := ""
		if csrf {
			field = `f.append(Object.assign(document.createElement("input"), {name: "csrf", value: document.querySelector("input[name=csrf]").value}));`
		}
		_, err := chromedp.RunResponse(e.tab, chromedp.Evaluate[chromedp.Void](fmt.Sprintf(`(() => {
			const f = document.createElement("form"); f.method = "post"; f.action = "/dead/orders-db/act";
			for (const [k, v] of [["do", "purge:filter"], ["topic", %q], ["confirm", "2"]]) {
				f.append(Object.assign(document.createElement("input"), {name: k, value: v}));
			}
			%s
			document.body.append(f); f.submit(); })()`, payments, field)))
		if err != nil {
			t.Fatalf("forge a purge: %v", err)
		}
	}
	forge(true)
	e.waitText("#error-message", "Log in to make changes")
	e.dead(payments, 2)

	// Logged in, without the token.
	e.login()
	e.open("/dead?topic=" + payments)
	forge(false)
	e.waitText("#error-message", "security token is missing")
	e.shot("refused")
	e.dead(payments, 2)

	// A request from outside the browser, without its session, is refused.
	req, _ := http.NewRequest(http.MethodPost, e.srv.URL+"/dead/orders-db/act", strings.NewReader("do=purge:ids&id="+recs[0].ID))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusUnauthorized {
		t.Errorf("a POST without a session got %d, want 401", resp.StatusCode)
	}
	e.dead(payments, 2)
	if !strings.Contains(e.log.String(), "refused") {
		t.Errorf("the refusals were not logged:\n%s", e.log.String())
	}
}

// TestScriptInPayloadIsText: a payload holding a script renders as text, in JSON and in plain text alike.
func TestScriptInPayloadIsText(t *testing.T) {
	e := newEnv(t, envOptions{})
	evil := e.topic("evil")
	e.relay()
	js := `<script>window.pwned = true</script><img src=x onerror="window.pwned = true">`
	e.enqueue(
		postbox.Message{Topic: evil, Type: "evil.json", Key: `<b>key</b>`, Payload: fmt.Appendf(nil, `{"comment":%q}`, js),
			Headers: map[string]string{"x-note": js}},
		postbox.Message{Topic: evil, Type: "evil.text", Payload: []byte(js)},
	)
	recs := e.dead(evil, 2)
	e.login()
	for _, r := range recs {
		e.open("/dead/orders-db/" + r.ID)
		e.waitText("#payload", "<script>window.pwned = true</script>")
		if pwned := eval[bool](e, `window.pwned === true || document.querySelectorAll("main script, main img").length > 0`); pwned {
			t.Fatalf("the payload of %s (%s) ran or became markup", r.ID, r.Type)
		}
		if r.Type == "evil.json" {
			e.waitText("main", "<b>key</b>")
			e.shot("dead-letter-script")
		}
	}
	e.open("/dead?topic=" + evil)
	if pwned := eval[bool](e, `window.pwned === true || document.querySelectorAll("main b, main script").length > 0`); pwned {
		t.Fatal("the dead-letter list turned a key into markup")
	}
}

// TestSendEditedCopy: a dead letter's payload, edited, goes out as a new message naming the original, and the
// original stays dead.
func TestSendEditedCopy(t *testing.T) {
	e := newEnv(t, envOptions{})
	payments := e.topic("payments")
	e.relay()
	e.enqueue(msgs(1, payments, "payment.captured")...)
	orig := e.dead(payments, 1)[0]
	s := e.stream(payments)

	e.login()
	e.open("/dead/orders-db/" + orig.ID)
	e.do("edit the payload",
		chromedp.Click(chromedp.CSS(`#edit summary`)),
		chromedp.SetValue(chromedp.CSS(`#edit textarea[name=payload]`), `{"order":1000,"total":20.50,"currency":"USD"}`))
	e.click(`#send-copy`)
	e.waitText(".flash", "as new message")
	var copyID string
	testenv.Eventually(t, "the edited copy in the stream", func() bool {
		ids := e.streamIDs(s)
		if len(ids) == 1 {
			copyID = ids[0]
		}
		return len(ids) == 1
	})
	m, err := s.GetLastMsgForSubject(context.Background(), payments)
	if err != nil {
		t.Fatal(err)
	}
	if copyID == orig.ID || !strings.Contains(string(m.Data), `"USD"`) || m.Header.Get("postbox-replay-of") != orig.ID {
		t.Errorf("the copy %s: data %s, postbox-replay-of %q; want a new ID, USD, and %s", copyID, m.Data, m.Header.Get("postbox-replay-of"), orig.ID)
	}
	e.dead(payments, 1)
	if !strings.Contains(e.log.String(), "sent edited copy") {
		t.Errorf("the send was not logged:\n%s", e.log.String())
	}
}

package console_test

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/postbox-go/postbox"
)

// TestPurgeSelectedConfirms: purging the selected dead letters first shows how many it takes, and purges only
// after the confirmation.
func TestPurgeSelectedConfirms(t *testing.T) {
	e := newEnv(t, envOptions{})
	payments := e.topic("payments")
	e.relay()
	e.enqueue(msgs(4, payments, "payment.captured")...)
	recs := e.dead(payments, 4)

	e.login()
	e.open("/dead?topic=" + payments)
	e.do("select two", chromedp.Click(chromedp.CSS(fmt.Sprintf(`input[name=id][value=%q]`, recs[0].ID))),
		chromedp.Click(chromedp.CSS(fmt.Sprintf(`input[name=id][value=%q]`, recs[1].ID))))
	e.click("#purge-selected")
	e.waitText("#confirm-count", "This will purge 2 selected dead message(s)")
	e.shot("purge-selected-confirm")
	if n := len(e.dead(payments, 4)); n != 4 {
		t.Fatalf("the confirmation page purged already: %d left", n)
	}
	e.click("#confirm")
	e.waitText(".flash", "Purged 2 dead message(s)")
	left := e.dead(payments, 2)
	for _, r := range left {
		if r.ID == recs[0].ID || r.ID == recs[1].ID {
			t.Errorf("the purged message %s is still dead", r.ID)
		}
	}
}

// TestDatabaseDownIsUnknown: a database that does not answer shows its figures as unknown, never as zero or as
// "no messages", beside one that answers.
func TestDatabaseDownIsUnknown(t *testing.T) {
	e := newEnv(t, envOptions{downDB: true})
	e.enqueue(msgs(3, e.topic("orders"), "order.created")...)
	e.login()
	e.open("/")
	e.waitText(`section.db[data-db="orders-db"] [data-stat=pending]`, "3")
	e.waitText(`section.db[data-db="down-db"] .error`, "did not answer")
	down := eval[string](e, `document.querySelector('section.db[data-db="down-db"]').innerText`)
	for _, want := range []string{"unknown", "connect"} {
		if !strings.Contains(down, want) {
			t.Errorf("the down database's section lacks %q:\n%s", want, down)
		}
	}
	if strings.Contains(down, "No pending or dead messages") || eval[bool](e, `[...document.querySelectorAll('section.db[data-db="down-db"] [data-stat]')].some(el => /^\s*0\s*$/.test(el.textContent))`) {
		t.Errorf("the down database shows zero figures:\n%s", down)
	}
	if eval[string](e, `document.querySelector('section.db[data-db="down-db"]').dataset.down`) != "true" {
		t.Error("the down database's section is not marked data-down")
	}
	e.shot("overview-database-down")
}

// TestNarrowScreen: at 390 px wide (a phone) no page is wider than the screen: the header wraps, tables and
// charts scroll inside their boxes.
func TestNarrowScreen(t *testing.T) {
	e := newEnv(t, envOptions{})
	payments := e.topic("payments")
	e.relay()
	e.enqueue(postbox.Message{Topic: payments, Type: "payment.captured", Key: strings.Repeat("customer-", 12),
		Payload: []byte(`{"comment":"` + strings.Repeat("a-long-unbroken-word-", 12) + `"}`)})
	recs := e.dead(payments, 1)
	e.login()
	e.do("narrow the viewport", chromedp.EmulateViewport(390, 844, chromedp.EmulateScale(3)))
	defer func() { _, _ = chromedp.Run(e.tab, chromedp.EmulateReset()) }()
	for _, path := range []string{"/", "/dead", "/dead/orders-db/" + recs[0].ID, "/find?q=" + recs[0].ID, "/replay", "/inbox", "/schema", "/login"} {
		e.open(path)
		// Let the overview's script run and its styles settle.
		if _, err := chromedp.Run(e.tab, chromedp.Poll[bool](`document.readyState === "complete"`)); err != nil {
			t.Fatal(err)
		}
		w := eval[int](e, `document.documentElement.scrollWidth`)
		if w > 390 {
			wide := eval[string](e, `[...document.querySelectorAll("body *")].filter(el => el.getBoundingClientRect().right > 391 && !el.closest("table.grid, .chartbox, header nav, pre")).slice(0, 5).map(el => el.tagName + "." + el.className).join(", ")`)
			t.Errorf("%s at 390px is %dpx wide; wider than the screen: %s", path, w, wide)
		}
		if eval[bool](e, `(() => { const h = document.querySelector("header.top"); const b = h.getBoundingClientRect(); return [...h.querySelectorAll(".brand, .who")].some(el => el.getBoundingClientRect().bottom > b.bottom + 1); })()`) {
			t.Errorf("%s at 390px: the header's content spills out of its bar", path)
		}
		if path == "/" {
			e.shot("overview-390")
		}
	}
}

// TestStalePage: when the console stops answering, the overview says so and dims itself, and its "sampled … ago"
// keeps counting instead of freezing.
func TestStalePage(t *testing.T) {
	e := newEnv(t, envOptions{})
	e.login()
	e.open("/")
	first := eval[string](e, `document.querySelector("[data-since]").dataset.since`)
	if eval[bool](e, `!document.getElementById("stale").hidden`) {
		t.Fatal("a live page says it stopped updating")
	}
	e.srv.Close()
	if _, err := chromedp.Run(e.tab, chromedp.Poll[bool](`document.querySelector("#live").dataset.stale === "true" && !document.getElementById("stale").hidden`,
		chromedp.WithPollingTimeout(30*time.Second))); err != nil {
		t.Fatalf("the page did not mark itself stale within 30s of the console stopping: %v", err)
	}
	// The sample the page shows gets older, and the page says so.
	expr := fmt.Sprintf(`(() => { const s = document.querySelector("[data-since]"); return s.dataset.since === %q && /^[0-9]+s$/.test(s.textContent) && parseInt(s.textContent, 10) >= 3; })()`, first)
	if _, err := chromedp.Run(e.tab, chromedp.Poll[bool](expr, chromedp.WithPollingTimeout(30*time.Second))); err != nil {
		t.Fatalf("\"sampled … ago\" did not keep counting: %v; it says %q", err, eval[string](e, `document.querySelector("[data-since]").textContent`))
	}
	if op := eval[string](e, `getComputedStyle(document.querySelector("#live")).opacity`); op == "1" {
		t.Errorf("the stale part is not dimmed (opacity %s)", op)
	}
	e.shot("overview-stale")
}

// contrastJS returns, for the page, every text whose colour has less than 4.5:1 contrast against the background
// it is drawn on (WCAG 2 AA for body text), as "text: ratio".
const contrastJS = `(() => {
  const rgb = s => { const m = s.match(/[\d.]+/g).map(Number); return {r: m[0], g: m[1], b: m[2], a: m.length > 3 ? m[3] : 1}; };
  const lum = c => [c.r, c.g, c.b].map(v => { v /= 255; return v <= 0.03928 ? v / 12.92 : Math.pow((v + 0.055) / 1.055, 2.4); })
    .reduce((s, v, i) => s + v * [0.2126, 0.7152, 0.0722][i], 0);
  const bg = el => { for (; el; el = el.parentElement) { const c = rgb(getComputedStyle(el).backgroundColor); if (c.a > 0.5) { return c; } } return {r: 255, g: 255, b: 255, a: 1}; };
  const out = [];
  const walker = document.createTreeWalker(document.querySelector("main"), NodeFilter.SHOW_TEXT);
  for (let n = walker.nextNode(); n; n = walker.nextNode()) {
    const el = n.parentElement;
    if (!n.textContent.trim() || el.closest("svg, [hidden]") || el.getClientRects().length === 0) { continue; }
    const st = getComputedStyle(el);
    if (st.visibility === "hidden" || parseFloat(st.opacity) < 1) { continue; }
    const f = rgb(st.color), b = bg(el);
    const [hi, lo] = [lum(f), lum(b)].sort((x, y) => y - x);
    const ratio = (hi + 0.05) / (lo + 0.05);
    if (ratio < 4.5) { out.push(n.textContent.trim().slice(0, 40) + ": " + ratio.toFixed(2)); }
  }
  return out;
})()`

// TestContrast: the text of the main pages, muted text and links included, meets WCAG AA contrast.
func TestContrast(t *testing.T) {
	e := newEnv(t, envOptions{})
	payments := e.topic("payments")
	e.relay()
	e.enqueue(msgs(2, payments, "payment.captured")...)
	recs := e.dead(payments, 2)
	e.login()
	for _, path := range []string{"/", "/dead", "/dead/orders-db/" + recs[0].ID, "/find?q=" + recs[0].ID, "/replay", "/inbox", "/schema"} {
		e.open(path)
		if low := eval[[]string](e, contrastJS); len(low) > 0 {
			t.Errorf("%s: text under 4.5:1 contrast: %v", path, low)
		}
	}
}

package console_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/chromedp/chromedp"
	"github.com/jackc/pgx/v5"

	"github.com/postbox-go/postbox"
	"github.com/postbox-go/postbox/internal/testenv"
)

// TestFindAndReplay: a message is found by ID and by key whatever its state, and kept published messages of a
// topic are replayed after their count is shown.
func TestFindAndReplay(t *testing.T) {
	e := newEnv(t, envOptions{})
	orders, failing := e.topic("orders"), e.topic("failing")
	e.stream(orders)
	e.relay()
	ids := e.enqueue(msgs(6, orders, "order.created")...)
	e.enqueue(msgs(2, failing, "order.failed")...)
	e.dead(failing, 2)
	testenv.Eventually(t, "the orders published", func() bool {
		r, err := e.client.FindMessage(context.Background(), ids[5])
		return err == nil && r.Status == postbox.StatusPublished
	})

	e.login()
	e.open("/find")
	e.do("find by ID", chromedp.SetValue(chromedp.CSS(`#find input[name=q]`), ids[0]))
	e.click(`#find button`)
	e.waitText("main table", ids[0])
	e.waitText("main table", "published")
	e.click(fmt.Sprintf(`main table a[href$=%q]`, ids[0]))
	e.waitText(".crumbs", "published")
	e.waitText("#payload", `"order": 1000`)
	if n := eval[int](e, `document.querySelectorAll("#retry-one, #edit").length`); n != 0 {
		t.Errorf("a published message offers dead-letter actions")
	}

	e.open("/find?q=customer-1")
	e.waitText("main table", "dead")
	e.waitText("main table", "published")
	if n := eval[int](e, `document.querySelectorAll("main table tbody tr").length`); n != 3 {
		t.Errorf("key customer-1 finds %d messages, want 3 (2 published, 1 dead)", n)
	}
	e.shot("find")

	e.open("/replay?topic=" + orders)
	e.waitText("#replay-count", "6 kept published message(s)")
	e.shot("replay")
	e.click("#replay-go")
	e.waitText(".flash", "Replaying 6 message(s)")
	if !strings.Contains(e.log.String(), "console: replay") {
		t.Errorf("the replay was not logged:\n%s", e.log.String())
	}
}

// TestInbox: a consumer's inbox shows processed and failing counts and the given-up messages, and a given-up
// message can be retried at its next delivery.
func TestInbox(t *testing.T) {
	e := newEnv(t, envOptions{})
	ctx := context.Background()
	c, err := postbox.NewConsumer(e.client, "billing", &postbox.ConsumerConfig{MaxFailures: 2})
	if err != nil {
		t.Fatal(err)
	}
	ok := func(context.Context, pgx.Tx, postbox.Message) ([]postbox.Message, error) { return nil, nil }
	bad := func(context.Context, pgx.Tx, postbox.Message) ([]postbox.Message, error) {
		return nil, errors.New(`card declined: <b>insufficient funds</b>`)
	}
	var givenUp string
	for i := range 12 {
		m := postbox.Message{ID: postbox.NewID(), Topic: e.topic("payments"), Type: "payment.requested",
			Payload: fmt.Appendf(nil, `{"n":%d}`, i)}
		switch {
		case i < 9:
			if _, err := c.Process(ctx, m, ok); err != nil {
				t.Fatal(err)
			}
		case i < 11: // failing once: waits for its redelivery
			_, _ = c.Process(ctx, m, bad)
		default: // failing twice: given up
			_, _ = c.Process(ctx, m, bad)
			if res, err := c.Process(ctx, m, bad); err != nil || res.Outcome != postbox.Failed {
				t.Fatalf("the second failure: %v %v", res.Outcome, err)
			}
			givenUp = m.ID
		}
	}
	e.login()
	e.open("/inbox")
	e.waitText("main", "Processed, last hour")
	e.waitText(".cards", "9")
	e.waitText("main", givenUp)
	e.waitText("main", "<b>insufficient funds</b>")
	e.shot("inbox")
	e.click(`form[action$="/retry"] button`)
	e.waitText(".flash", "will run the handler for "+givenUp)
}

// TestSchema: the schema page lists every migration as applied.
func TestSchema(t *testing.T) {
	e := newEnv(t, envOptions{readOnly: true})
	e.login()
	e.open("/schema")
	e.waitText("main table", "applied")
	if n := eval[int](e, `document.querySelectorAll("main .status.dead").length`); n != 0 {
		t.Errorf("%d migrations shown as not applied", n)
	}
	e.waitText("header .who", "read-only")
	e.shot("schema")
}

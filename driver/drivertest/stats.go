package drivertest

import (
	"errors"
	"testing"
	"time"

	"github.com/postbox-go/postbox"
	"github.com/postbox-go/postbox/postboxtest"
)

// testStats checks that Stats splits pending into ready and scheduled, and that the oldest-pending figure, which
// operators alert on as lag, counts only ready messages, from the moment they became due.
func testStats[TTx any](t *testing.T, newDriver NewDriver[TTx]) {
	drv := newDriver(t)
	start := time.Now().UTC().Truncate(time.Second)
	clock := postboxtest.NewClock(start)
	c := Client(t, drv, Tables(clock))

	enqueue(t, c, postbox.Message{Topic: "orders", Type: "order.created", Key: "o-1"})
	clock.Advance(time.Minute)
	enqueue(t, c,
		postbox.Message{Topic: "orders", Type: "order.remind", Key: "o-1", AvailableAt: start.Add(time.Hour)},
		postbox.Message{Topic: "reminders", Type: "reminder.due", AvailableAt: start.Add(2 * time.Hour)})

	s := stats(t, c)
	if s.Pending != 3 || s.Ready != 1 || s.Scheduled != 2 || !s.OldestPending.Equal(start) {
		t.Fatalf("stats %+v; want 3 pending: 1 ready, 2 scheduled, the oldest pending the ready one", s)
	}
	if r := byTopicOf(s)["reminders"]; r.Pending != 1 || r.Scheduled != 1 || r.Ready != 0 || !r.OldestPending.IsZero() {
		t.Fatalf("reminders %+v; want one scheduled message and no oldest pending: a scheduled message is not late", r)
	}

	// Past its time, a scheduled message is ready, and waiting since it became due, not since it was enqueued.
	clock.Advance(time.Hour + 30*time.Minute - time.Minute) // start + 90m: the orders reminder is due
	s = stats(t, c)
	if o := byTopicOf(s)["orders"]; o.Ready != 2 || o.Scheduled != 0 || !o.OldestPending.Equal(start) {
		t.Fatalf("orders %+v; want 2 ready, the oldest the first one enqueued", o)
	}
	if r := byTopicOf(s)["reminders"]; r.Scheduled != 1 || !r.OldestPending.IsZero() {
		t.Fatalf("reminders %+v; still scheduled", r)
	}
	clock.Advance(time.Hour) // start + 150m: the reminder has been due for 30 minutes
	if r := byTopicOf(stats(t, c))["reminders"]; r.Ready != 1 || r.Scheduled != 0 || !r.OldestPending.Equal(start.Add(2*time.Hour)) {
		t.Fatalf("reminders %+v; want ready, pending since its AvailableAt", r)
	}

	// A message whose publish failed waits for its retry: it is ready (late), not scheduled, and it has waited
	// since it was enqueued.
	rec := &postboxtest.Recorder{Fail: func(postbox.Record) error { return errors.New("broker down") }}
	drain(t, relay(t, c, rec, &postbox.RelayConfig{BackoffBase: time.Hour, BackoffMax: time.Hour}))
	s = stats(t, c)
	if s.Pending != 3 || s.Ready != 3 || s.Scheduled != 0 || !s.OldestPending.Equal(start) {
		t.Fatalf("stats after failed publishes %+v; want 3 ready, the oldest pending since the first enqueue", s)
	}
}

func byTopicOf(s postbox.Stats) map[string]postbox.TopicStats {
	m := map[string]postbox.TopicStats{}
	for _, ts := range s.Topics {
		m[ts.Topic] = ts
	}
	return m
}

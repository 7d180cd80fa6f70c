package brokertest

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/postbox-go/postbox"
	"github.com/postbox-go/postbox/broker"
	"github.com/postbox-go/postbox/driver/drivertest"
)

// ExerciseEndToEnd runs the whole path against a real database and the broker under test: messages are enqueued
// in database transactions (some of which roll back), a relay publishes them through the broker, and two
// competing subscribers process them with broker.Consume into a table of effects, acking only after the
// transaction commits. Duplicates are injected on both sides: the relay publishes every batch twice (a relay
// that died between the broker's ack and its settle), and some messages are nacked after their transaction
// committed (a lost ack). Those go out once, so any later delivery of one is the broker delivering it again (for
// webhooks, the relay retrying the publish the receiver failed). Every committed message must have its effect
// exactly once, no rolled-back message any effect, and every message whose ack was lost must be delivered again
// and skipped by the inbox.
//
// client must be migrated; db runs the statements the test needs in client's transactions.
func ExerciseEndToEnd[TTx any](t *testing.T, client *postbox.Client[TTx], db drivertest.Options[TTx], newPubSub Constructor) {
	const committed, perTx = 200, 10
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	topic := Topic()
	effects := "e2e_effects_" + topic
	if err := client.InTx(ctx, func(ctx context.Context, tx TTx) error {
		return db.Exec(ctx, tx, "CREATE TABLE "+effects+" (message_id VARCHAR(64) NOT NULL)")
	}); err != nil {
		t.Fatalf("create effects table: %v", err)
	}

	pub, sub1 := newPubSub(t, topic)
	_, sub2 := newPubSub(t, topic)

	// Produce: committed transactions, and one that rolls back after enqueueing.
	want := map[string]bool{}
	for i := 0; i < committed; i += perTx {
		msgs := Records(topic, perTx, 7)
		batch := make([]postbox.Message, len(msgs))
		for j, r := range msgs {
			batch[j] = r.Message
			batch[j].ID = ""
		}
		if err := client.InTx(ctx, func(ctx context.Context, tx TTx) error { return client.EnqueueBatch(ctx, tx, batch) }); err != nil {
			t.Fatalf("enqueue: %v", err)
		}
		for _, m := range batch {
			want[m.ID] = true
		}
	}
	rolledBack := []postbox.Message{{Topic: topic, Type: "test.rolled_back", Payload: []byte("{}")}}
	errRollback := errors.New("rolled back on purpose")
	if err := client.InTx(ctx, func(ctx context.Context, tx TTx) error {
		if err := client.EnqueueBatch(ctx, tx, rolledBack); err != nil {
			return err
		}
		return errRollback
	}); !errors.Is(err, errRollback) {
		t.Fatalf("rolled-back transaction: %v", err)
	}

	// Relay, publishing every batch twice, except the messages whose ack the consumer loses.
	var mu sync.Mutex
	published := map[string]int{}
	twice := postbox.PublisherFunc(func(ctx context.Context, batch []postbox.Record) error {
		mu.Lock()
		for _, r := range batch {
			published[r.ID]++
		}
		mu.Unlock()
		if err := pub.Publish(ctx, batch); err != nil {
			return err
		}
		var again []postbox.Record
		for _, r := range batch {
			if !losesAck(r.ID) {
				again = append(again, r)
			}
		}
		return pub.Publish(ctx, again)
	})
	relay, err := postbox.NewRelay(client, twice, &postbox.RelayConfig{BatchSize: 50, PollInterval: 20 * time.Millisecond,
		BackoffBase: 50 * time.Millisecond, BackoffMax: time.Second})
	if err != nil {
		t.Fatal(err)
	}

	// Consume through the inbox with broker.Consume, losing the first ack of some messages. nacked holds how many
	// times each of them had been delivered when its ack was lost; delivered, how many times each message was
	// delivered in all. The relay publishes those messages once, so their first ack follows their processing.
	delivered := map[string]int{}
	nacked := map[string]int{}
	var processed atomic.Int64
	consumer, err := postbox.NewConsumer(client, "e2e", nil)
	if err != nil {
		t.Fatal(err)
	}
	apply := func(ctx context.Context, tx TTx, m postbox.Message) ([]postbox.Message, error) {
		if _, err := parseID(m.ID); err != nil {
			return nil, postbox.Permanent(err)
		}
		processed.Add(1)
		return nil, db.Exec(ctx, tx, "INSERT INTO "+effects+" (message_id) VALUES ('"+m.ID+"')")
	}
	lossy := func(sub broker.Subscriber) broker.Subscriber {
		return &loseAcks{Subscriber: sub,
			seen: func(id string) {
				mu.Lock()
				defer mu.Unlock()
				delivered[id]++
			},
			lose: func(id string) bool {
				mu.Lock()
				defer mu.Unlock()
				if _, lost := nacked[id]; losesAck(id) && !lost {
					nacked[id] = delivered[id]
					return true
				}
				return false
			}}
	}
	consume := func(sub broker.Subscriber) func(context.Context) error {
		return func(ctx context.Context) error {
			return broker.Consume(ctx, lossy(sub), consumer, apply,
				&broker.ConsumeConfig{NackDelay: func(int) time.Duration { return 0 }, Logger: slog.New(slog.DiscardHandler)})
		}
	}

	runCtx, stop := context.WithCancel(ctx)
	var wg sync.WaitGroup
	runs := []func(context.Context) error{relay.Run, consume(sub1)}
	if sub2 != sub1 { // a transport whose subscriber per topic is one endpoint (webhooks) has no second member
		runs = append(runs, consume(sub2))
	}
	for _, run := range runs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := run(runCtx); err != nil {
				t.Errorf("end to end: %v", err)
			}
		}()
	}
	count := func(q string) int64 {
		var n int64
		err := client.InTx(ctx, func(ctx context.Context, tx TTx) error {
			var err error
			n, err = db.QueryInt(ctx, tx, q)
			return err
		})
		if err != nil {
			t.Fatalf("count effects: %v", err)
		}
		return n
	}
	deadline := time.Now().Add(90 * time.Second)
	for count("SELECT COUNT(DISTINCT message_id) FROM "+effects) < committed && time.Now().Before(deadline) {
		time.Sleep(50 * time.Millisecond)
	}
	// Wait for the messages whose ack was lost to come again; then let the second copies drain.
	notRedelivered := func() []string {
		mu.Lock()
		defer mu.Unlock()
		var ids []string
		for id, n := range nacked {
			if delivered[id] <= n {
				ids = append(ids, id)
			}
		}
		return ids
	}
	for deadline := time.Now().Add(30 * time.Second); time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
		s, err := client.Stats(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if s.Pending == 0 && len(notRedelivered()) == 0 {
			break
		}
	}
	time.Sleep(500 * time.Millisecond)
	stop()
	wg.Wait()

	distinct := count("SELECT COUNT(DISTINCT message_id) FROM " + effects)
	total := count("SELECT COUNT(*) FROM " + effects)
	phantom := count("SELECT COUNT(*) FROM " + effects + " WHERE message_id = '" + rolledBack[0].ID + "'")
	republished := 0
	for id := range nacked {
		if published[id] > 1 {
			republished++
		}
	}
	var deliveries int64
	mu.Lock()
	for _, n := range delivered {
		deliveries += int64(n)
	}
	mu.Unlock()
	duplicates := deliveries - processed.Load() // every delivery the handler did not see was skipped by the inbox
	t.Logf("committed=%d effects=%d distinct=%d processed=%d duplicates_skipped=%d acks_lost=%d republished_by_relay=%d",
		len(want), total, distinct, processed.Load(), duplicates, len(nacked), republished)
	if distinct != int64(len(want)) || total != distinct {
		t.Fatalf("%d committed messages had %d effects (%d distinct); want each exactly once", len(want), total, distinct)
	}
	if phantom != 0 {
		t.Fatalf("a rolled-back message had an effect")
	}
	if len(nacked) == 0 {
		t.Fatalf("no ack was lost: the test injected nothing")
	}
	if ids := notRedelivered(); len(ids) > 0 {
		t.Fatalf("%d of the %d messages whose ack was lost were never delivered again, e.g. %s: a nack must make the "+
			"broker deliver the message again", len(ids), len(nacked), ids[0])
	}
	if duplicates < int64(len(nacked)) {
		t.Fatalf("the inbox skipped %d duplicates, but %d messages whose effect had committed were delivered again "+
			"after their ack was lost: each of those deliveries must be skipped as a duplicate", duplicates, len(nacked))
	}
}

// losesAck picks the messages whose ack the end-to-end test loses: about one in five, by the last digit of the ID.
func losesAck(id string) bool { return id[len(id)-1]%5 == 0 }

// parseID checks that id is a UUID before it goes into SQL text.
func parseID(id string) (string, error) {
	if len(id) != 36 {
		return "", fmt.Errorf("message ID %q is not a UUID", id)
	}
	for i, c := range id {
		if i == 8 || i == 13 || i == 18 || i == 23 {
			if c != '-' {
				return "", fmt.Errorf("message ID %q is not a UUID", id)
			}
		} else if !(c >= '0' && c <= '9' || c >= 'a' && c <= 'f') {
			return "", fmt.Errorf("message ID %q is not a lower-case UUID", id)
		}
	}
	return id, nil
}

// loseAcks is a subscriber whose first ack of the deliveries lose picks becomes a nack: a consumer that committed
// and died before its ack reached the broker. seen is called for every delivery.
type loseAcks struct {
	broker.Subscriber
	seen func(id string)
	lose func(id string) bool
}

func (l *loseAcks) Receive(ctx context.Context, handle broker.DeliveryHandler) error {
	return l.Subscriber.Receive(ctx, func(ctx context.Context, d *broker.Delivery) {
		l.seen(d.Message.ID)
		broker.Dispatch(ctx, broker.NewDelivery(d.Event, d.Attempt, &lossyAcker{d: d, lose: l.lose}), handle)
	})
}

// lossyAcker settles the adapter's delivery. It cannot reject, so that a rejected message is acked rather than
// left to the adapter to nack.
type lossyAcker struct {
	d    *broker.Delivery
	lose func(id string) bool
}

func (a *lossyAcker) Ack(ctx context.Context) error {
	if a.lose(a.d.Message.ID) {
		return a.d.Nack(ctx, 0)
	}
	return a.d.Ack(ctx)
}

func (a *lossyAcker) Nack(ctx context.Context, delay time.Duration) error {
	return a.d.Nack(ctx, delay)
}

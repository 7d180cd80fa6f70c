package brokertest

import (
	"context"
	"errors"
	"fmt"
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
// competing subscribers process them with postbox.Process into a table of effects, acking only after the
// transaction commits. Duplicates are injected on both sides: the relay publishes every batch twice (a relay
// that died between the broker's ack and its settle), and a fifth of the messages are nacked after their
// transaction committed (a lost ack), so the broker delivers them again. Every committed message must have its
// effect exactly once, and no rolled-back message any effect.
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

	// Relay, publishing every batch twice.
	twice := postbox.PublisherFunc(func(ctx context.Context, batch []postbox.Record) error {
		if err := pub.Publish(ctx, batch); err != nil {
			return err
		}
		return pub.Publish(ctx, batch)
	})
	relay, err := postbox.NewRelay(client, twice, &postbox.RelayConfig{BatchSize: 50, PollInterval: 20 * time.Millisecond,
		BackoffBase: 50 * time.Millisecond, BackoffMax: time.Second})
	if err != nil {
		t.Fatal(err)
	}

	// Consume through the inbox, losing the ack of every fifth message once.
	var mu sync.Mutex
	nacked := map[string]bool{}
	var processed, duplicates atomic.Int64
	handle := broker.AckPolicy{NackDelay: func(int) time.Duration { return 0 }}.Wrap(func(ctx context.Context, m postbox.Message) error {
		if _, err := parseID(m.ID); err != nil {
			return postbox.Permanent(err)
		}
		res, err := postbox.Process(ctx, client, "e2e", m, func(ctx context.Context, tx TTx, m postbox.Message) ([]postbox.Message, error) {
			return nil, db.Exec(ctx, tx, "INSERT INTO "+effects+" (message_id) VALUES ('"+m.ID+"')")
		})
		if err != nil {
			return err
		}
		switch res.Outcome {
		case postbox.Processed:
			processed.Add(1)
		case postbox.Duplicate:
			duplicates.Add(1)
		}
		mu.Lock()
		defer mu.Unlock()
		if res.Outcome == postbox.Processed && m.ID[len(m.ID)-1]%5 == 0 && !nacked[m.ID] {
			nacked[m.ID] = true
			return errors.New("ack lost on purpose")
		}
		return nil
	})

	runCtx, stop := context.WithCancel(ctx)
	var wg sync.WaitGroup
	runs := []func(context.Context) error{relay.Run, func(ctx context.Context) error { return sub1.Receive(ctx, handle) }}
	if sub2 != sub1 { // a transport whose subscriber per topic is one endpoint (webhooks) has no second member
		runs = append(runs, func(ctx context.Context) error { return sub2.Receive(ctx, handle) })
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
	// Let the redeliveries and the second copies drain: they must all be duplicates.
	for range 100 {
		s, err := client.Stats(ctx)
		if err != nil {
			t.Fatal(err)
		}
		mu.Lock()
		lost := len(nacked)
		mu.Unlock()
		if s.Pending == 0 && duplicates.Load() >= int64(lost) {
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	time.Sleep(500 * time.Millisecond)
	stop()
	wg.Wait()

	distinct := count("SELECT COUNT(DISTINCT message_id) FROM " + effects)
	total := count("SELECT COUNT(*) FROM " + effects)
	phantom := count("SELECT COUNT(*) FROM " + effects + " WHERE message_id = '" + rolledBack[0].ID + "'")
	t.Logf("committed=%d effects=%d distinct=%d processed=%d duplicates_skipped=%d acks_lost=%d",
		len(want), total, distinct, processed.Load(), duplicates.Load(), len(nacked))
	if distinct != int64(len(want)) || total != distinct {
		t.Fatalf("%d committed messages had %d effects (%d distinct); want each exactly once", len(want), total, distinct)
	}
	if phantom != 0 {
		t.Fatalf("a rolled-back message had an effect")
	}
	if len(nacked) == 0 || duplicates.Load() == 0 {
		t.Fatalf("no duplicate was delivered (%d acks lost, %d duplicates skipped): the test injected nothing", len(nacked), duplicates.Load())
	}
}

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

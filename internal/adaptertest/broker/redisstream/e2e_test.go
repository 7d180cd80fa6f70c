package redisstream_test

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/postbox-go/postbox"
	"github.com/postbox-go/postbox/broker"
	"github.com/postbox-go/postbox/broker/redisstream"
	"github.com/postbox-go/postbox/driver/pgxv5"
	"github.com/postbox-go/postbox/internal/testenv"
)

// TestEndToEnd enqueues messages in PostgreSQL transactions, relays them to a Redis stream through a publisher
// that publishes every batch twice (a relay that died before settling), and consumes them with two
// subscribers whose acks are lost for every fifth message: every message has its effect exactly once.
func TestEndToEnd(t *testing.T) {
	ctx := context.Background()
	dbURL, err := testenv.FreshPostgres("postbox_test_redisstream")
	if err != nil {
		t.Fatal(err)
	}
	pool, err := pgxpool.New(ctx, dbURL)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	client, err := postbox.NewClient(pgxv5.New(pool), &postbox.Config{Logger: quietLogger()})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := client.Migrate(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := pool.Exec(ctx, "CREATE TABLE effects (message_id text NOT NULL)"); err != nil { // no unique key
		t.Fatal(err)
	}

	rdb := connect(t)
	topic, name := stream(t, rdb, "billing")
	const n = 200
	var ids []string
	for i := 0; i < n; i += 20 {
		err := client.InTx(ctx, func(ctx context.Context, tx pgx.Tx) error {
			for j := range 20 {
				m := postbox.Message{ID: postbox.NewID(), Topic: topic, Key: fmt.Sprintf("order-%d", (i+j)%7), Type: "order.placed",
					Payload: []byte(fmt.Sprintf(`{"n":%d}`, i+j))}
				ids = append(ids, m.ID)
				if _, err := client.Enqueue(ctx, tx, m); err != nil {
					return err
				}
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
	}

	pub := newPub(t, rdb, nil)
	twice := postbox.PublisherFunc(func(ctx context.Context, batch []postbox.Record) error {
		if err := pub.Publish(ctx, batch); err != nil {
			return err
		}
		return pub.Publish(ctx, batch)
	})
	relay, err := postbox.NewRelay(client, twice, &postbox.RelayConfig{BatchSize: 30, PollInterval: 50 * time.Millisecond, Logger: quietLogger()})
	if err != nil {
		t.Fatal(err)
	}
	consumer, err := postbox.NewConsumer(client, "billing", &postbox.ConsumerConfig{Logger: quietLogger()})
	if err != nil {
		t.Fatal(err)
	}
	var calls, lost atomic.Int64
	var mu sync.Mutex
	ackLost := map[string]bool{} // every fifth message: false until its ack was lost once
	for i := 0; i < n; i += 5 {
		ackLost[ids[i]] = false
	}
	handle := func(ctx context.Context, d *broker.Delivery) {
		calls.Add(1)
		sctx := context.WithoutCancel(ctx)
		_, err := consumer.Process(ctx, d.Message, func(ctx context.Context, tx pgx.Tx, m postbox.Message) ([]postbox.Message, error) {
			_, err := tx.Exec(ctx, "INSERT INTO effects VALUES ($1)", m.ID)
			return nil, err
		})
		if err != nil {
			_ = d.Nack(sctx, 0)
			return
		}
		mu.Lock()
		defer mu.Unlock()
		if was, ok := ackLost[d.Message.ID]; ok && !was { // the commit happened, the ack does not
			ackLost[d.Message.ID] = true
			lost.Add(1)
			_ = d.Nack(sctx, 0)
			return
		}
		_ = d.Ack(sctx)
	}

	runCtx, stop := context.WithCancel(ctx)
	var wg sync.WaitGroup
	wg.Go(func() { _ = relay.Run(runCtx) })
	for range 2 {
		sub := newSub(t, rdb, "billing", []string{topic}, &redisstream.SubscriberConfig{ClaimIdle: time.Second})
		wg.Go(func() {
			if err := sub.Receive(runCtx, handle); err != nil {
				t.Errorf("Receive: %v", err)
			}
		})
	}
	defer func() { stop(); wg.Wait() }()

	// Done when the outbox is empty, both copies of every message are in the stream, and the group has acked
	// them all.
	deadline := time.Now().Add(60 * time.Second)
	for {
		st, err := client.Stats(ctx)
		if err != nil {
			t.Fatal(err)
		}
		length, _ := rdb.XLen(ctx, name).Result()
		groups, _ := rdb.XInfoGroups(ctx, name).Result()
		if st.Pending == 0 && length == 2*n && len(groups) == 1 && groups[0].Pending == 0 && groups[0].Lag == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("after 60s: %d messages in the outbox, %d of %d entries in the stream, group %+v", st.Pending, length, 2*n, groups)
		}
		time.Sleep(20 * time.Millisecond)
	}
	stop()
	wg.Wait()

	rows, err := pool.Query(ctx, "SELECT message_id, count(*) FROM effects GROUP BY message_id")
	if err != nil {
		t.Fatal(err)
	}
	effects, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (string, error) {
		var id string
		var c int
		if err := r.Scan(&id, &c); err != nil {
			return "", err
		}
		if c != 1 {
			t.Errorf("message %s had %d effects, want 1", id, c)
		}
		return id, nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(effects) != n {
		t.Fatalf("%d messages had an effect, want all %d", len(effects), n)
	}
	if calls.Load() < 2*n+lost.Load() {
		t.Fatalf("handler ran %d times; every message was delivered twice, plus once per lost ack (%d): duplicates were not injected",
			calls.Load(), lost.Load())
	}
}

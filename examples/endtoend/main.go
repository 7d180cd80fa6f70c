// Command endtoend runs the whole path on PostgreSQL and NATS JetStream: an order and its order.created event
// commit in one transaction, the relay publishes the event to NATS, and a billing service consumes it through
// broker.Consume and Consumer.Process, charging the order once and emitting payment.charged through the outbox in
// the same transaction. The README's quick start and "Consuming exactly once" sections are cut from this file,
// between the "docs:" markers; a test checks that they match.
//
//	DATABASE_URL=postgres://localhost:5432/shop NATS_URL=nats://127.0.0.1:4222 go run ./examples/endtoend
package main

// docs: quick start, imports
import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log"
	"os"
	"os/signal"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/postbox-go/postbox"
	"github.com/postbox-go/postbox/broker"
	"github.com/postbox-go/postbox/broker/natsbroker"
	"github.com/postbox-go/postbox/driver/pgxv5"
)

// docs: end

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	orderID, err := run(ctx, getenv("DATABASE_URL", "postgres://localhost:5432/shop"), getenv("NATS_URL", nats.DefaultURL))
	if err != nil {
		log.Fatal(err)
	}
	fmt.Printf("order %s: committed with its event, relayed to NATS, charged once, payment event published\n", orderID)
}

func getenv(name, fallback string) string {
	if v := os.Getenv(name); v != "" {
		return v
	}
	return fallback
}

// order is the order.created payload; charged is the payment.charged payload.
type order struct {
	OrderID string `json:"order_id"`
	Cents   int    `json:"cents"`
}

type charged struct {
	OrderID string `json:"order_id"`
	Cents   int    `json:"cents"`
}

// run commits one order, relays its event and charges it, and returns the order's ID once the charge is in the
// database and the payment event is on NATS.
func run(ctx context.Context, dbURL, natsURL string) (string, error) {
	// docs: quick start, client
	pool, err := pgxpool.New(ctx, dbURL)
	if err != nil {
		return "", err
	}
	defer pool.Close()
	client, err := postbox.NewClient(pgxv5.New(pool), nil) // tables postbox_outbox, postbox_inbox
	if err != nil {
		return "", err
	}
	if _, err := client.Migrate(ctx); err != nil { // or apply client.Migrations() with your migration tool
		return "", err
	}
	// Your own tables: the orders, and the charges the billing service below writes.
	if _, err := pool.Exec(ctx, `CREATE TABLE IF NOT EXISTS orders (id text PRIMARY KEY, cents int NOT NULL);
		CREATE TABLE IF NOT EXISTS charges (order_id text NOT NULL, cents int NOT NULL)`); err != nil {
		return "", err
	}
	// docs: end

	// docs: relay, broker
	nc, err := nats.Connect(natsURL)
	if err != nil {
		return "", err
	}
	defer nc.Close()
	js, err := jetstream.New(nc, jetstream.WithPublishAsyncTimeout(30*time.Second))
	if err != nil {
		return "", err
	}
	// The stream holds every topic the relay publishes: orders, and what the billing service enqueues.
	_, err = natsbroker.EnsureStream(ctx, js, jetstream.StreamConfig{Name: "SHOP",
		Subjects: []string{"orders", "payments", "billing.dead"}})
	if err != nil {
		return "", err
	}
	publisher, err := natsbroker.NewPublisher(js, nil)
	if err != nil {
		return "", err
	}
	// docs: end

	// docs: relay, run
	relay, err := postbox.NewRelay(client, publisher, nil)
	if err != nil {
		return "", err
	}
	relayCtx, stopRelay := context.WithCancel(ctx)
	relayDone := make(chan error, 1)
	go func() { relayDone <- relay.Run(relayCtx) }() // Run blocks until ctx is cancelled; the batch in flight settles first
	defer func() { stopRelay(); <-relayDone }()
	// docs: end

	orderID, err := placeOrder(ctx, pool, client, 1250)
	if err != nil {
		return "", err
	}

	// docs: consuming, consumer
	cons, err := natsbroker.EnsureConsumer(ctx, js, "SHOP", jetstream.ConsumerConfig{Durable: "billing",
		FilterSubject: "orders", AckPolicy: jetstream.AckExplicitPolicy})
	if err != nil {
		return "", err
	}
	sub, err := natsbroker.NewSubscriber(cons, nil)
	if err != nil {
		return "", err
	}
	consumer, err := postbox.NewConsumer(client, "billing", &postbox.ConsumerConfig{MaxFailures: 5, DeadLetterTopic: "billing.dead"})
	if err != nil {
		return "", err
	}
	charge := postbox.JSONHandler(func(ctx context.Context, tx pgx.Tx, o order, m postbox.Message) ([]postbox.Event, error) {
		if _, err := tx.Exec(ctx, "INSERT INTO charges (order_id, cents) VALUES ($1, $2)", o.OrderID, o.Cents); err != nil {
			return nil, err // rolled back and nacked: the broker delivers the order again
		}
		return []postbox.Event{{Topic: "payments", Key: o.OrderID, Type: "payment.charged", Data: charged(o)}}, nil
	})
	consumeCtx, stopConsuming := context.WithCancel(ctx)
	consumeDone := make(chan error, 1)
	// Consume blocks until ctx is cancelled; it acks, nacks or rejects each delivery by its outcome.
	go func() { consumeDone <- broker.Consume(consumeCtx, sub, consumer, charge, nil) }()
	// docs: end

	err = waitCharged(ctx, pool, client, orderID)
	stopConsuming()
	if cerr := <-consumeDone; err == nil {
		err = cerr
	}
	return orderID, err
}

// docs: quick start, enqueue

// placeOrder saves an order and its event in one transaction.
func placeOrder(ctx context.Context, pool *pgxpool.Pool, client *postbox.Client[pgx.Tx], cents int) (string, error) {
	orderID := postbox.NewID()
	body, err := json.Marshal(order{OrderID: orderID, Cents: cents})
	if err != nil {
		return "", err
	}
	tx, err := pool.Begin(ctx)
	if err != nil {
		return "", err
	}
	defer tx.Rollback(ctx) // does nothing once committed
	if _, err := tx.Exec(ctx, "INSERT INTO orders (id, cents) VALUES ($1, $2)", orderID, cents); err != nil {
		return "", err
	}
	// The event commits if and only if the order does. Enqueue returns the event's ID, a UUIDv7.
	if _, err := client.Enqueue(ctx, tx, postbox.Message{Topic: "orders", Key: orderID, Type: "order.created", Payload: body}); err != nil {
		return "", err
	}
	if err := tx.Commit(ctx); err != nil {
		return "", err
	}
	return orderID, nil
}

// docs: end

// waitCharged waits until the order's charge is in the database and the outbox is empty: the payment event it
// enqueued has been published.
func waitCharged(ctx context.Context, pool *pgxpool.Pool, client *postbox.Client[pgx.Tx], orderID string) error {
	ctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	for {
		var charges int
		if err := pool.QueryRow(ctx, "SELECT count(*) FROM charges WHERE order_id = $1", orderID).Scan(&charges); err != nil {
			return err
		}
		stats, err := client.Stats(ctx)
		if err != nil {
			return err
		}
		if charges > 0 && stats.Pending == 0 {
			return nil
		}
		select {
		case <-time.After(20 * time.Millisecond):
		case <-ctx.Done():
			return errors.New("the order was not charged within a minute: is the relay publishing to NATS?")
		}
	}
}

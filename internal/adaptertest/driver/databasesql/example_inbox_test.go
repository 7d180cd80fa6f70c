package databasesql_test

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"log"
	"log/slog"
	"os"
	"path/filepath"
	"time"

	"github.com/postbox-go/postbox"
	"github.com/postbox-go/postbox/broker"
	"github.com/postbox-go/postbox/driver/databasesql"
	"github.com/postbox-go/postbox/postboxtest"
)

// openExample opens a SQLite database in a new temporary directory, migrated, with a table of charges for the
// handlers to write. The returned function removes it.
func openExample(ctx context.Context) (*sql.DB, *postbox.Client[*sql.Tx], func()) {
	dir, err := os.MkdirTemp("", "postbox-example")
	if err != nil {
		log.Fatal(err)
	}
	db, err := sql.Open("sqlite", sqliteDSN(filepath.Join(dir, "app.db")))
	if err != nil {
		log.Fatal(err)
	}
	client, err := postbox.NewClient(databasesql.New(db, databasesql.SQLite), nil)
	if err != nil {
		log.Fatal(err)
	}
	if _, err := client.Migrate(ctx); err != nil {
		log.Fatal(err)
	}
	if _, err := db.ExecContext(ctx, "CREATE TABLE charges (message_id TEXT NOT NULL)"); err != nil {
		log.Fatal(err)
	}
	return db, client, func() {
		db.Close()
		os.RemoveAll(dir)
	}
}

// A consumer charges a card once per order, however often the broker delivers the order, and emits an event in
// the same transaction.
func Example_process() {
	ctx := context.Background()
	db, client, done := openExample(ctx)
	defer done()

	charge := func(ctx context.Context, tx *sql.Tx, m postbox.Message) ([]postbox.Message, error) {
		if _, err := tx.ExecContext(ctx, "INSERT INTO charges (message_id) VALUES (?)", m.ID); err != nil {
			return nil, err
		}
		return []postbox.Message{{Topic: "billing", Key: m.Key, Type: "card.charged", Payload: m.Payload}}, nil
	}

	// The broker delivers the same message twice, as it may after a crash or a lost ack.
	delivery := postbox.Message{ID: "0190f6e4-3b7a-7c3d-8e4f-123456789abc", Topic: "orders", Key: "order-1",
		Type: "order.created", Payload: []byte(`{"order":1}`)}
	for range 2 {
		res, err := postbox.Process(ctx, client, "billing", delivery, charge)
		if err != nil {
			log.Print(err) // nack: everything was rolled back and the broker will redeliver
			continue
		}
		fmt.Println(res.Outcome, "- ack:", res.Outcome.Ack())
	}

	var charges int
	if err := db.QueryRowContext(ctx, "SELECT count(*) FROM charges").Scan(&charges); err != nil {
		log.Fatal(err)
	}
	stats, err := client.Stats(ctx)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("charges:", charges, "events in the outbox:", stats.Pending)
	// Output:
	// processed - ack: true
	// duplicate - ack: true
	// charges: 1 events in the outbox: 1
}

// A consumer with a failure policy gives up on a message after three failed deliveries, acks it, and sends a copy
// to a dead-letter topic through the outbox.
func Example_failurePolicy() {
	ctx := context.Background()
	_, client, done := openExample(ctx)
	defer done()

	consumer, err := postbox.NewConsumer(client, "billing", &postbox.ConsumerConfig{MaxFailures: 3, DeadLetterTopic: "billing.dead"})
	if err != nil {
		log.Fatal(err)
	}
	declined := func(ctx context.Context, tx *sql.Tx, m postbox.Message) ([]postbox.Message, error) {
		return nil, errors.New("card declined")
	}
	delivery := postbox.Message{ID: "0190f6e4-3b7a-7c3d-8e4f-123456789abd", Topic: "orders", Type: "order.created"}
	for range 4 {
		res, err := consumer.Process(ctx, delivery, declined)
		fmt.Println(res.Outcome, res.Failures, err)
	}
	dead, err := client.Stats(ctx)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("dead letters:", dead.Topics[0].Topic, dead.Topics[0].Pending)
	// Output:
	// retry 1 card declined
	// retry 2 card declined
	// failed 3 <nil>
	// duplicate 0 <nil>
	// dead letters: billing.dead 1
}

// broker.Consume runs any broker.Subscriber into a consumer: each delivery is processed once through the inbox and
// acked, nacked or rejected by its outcome. Here an in-memory subscriber delivers an order twice and a message
// whose ID is not valid.
func Example_consume() {
	ctx, stop := context.WithCancel(context.Background())
	defer stop()
	_, client, done := openExample(ctx)
	defer done()

	consumer, err := postbox.NewConsumer(client, "billing", nil)
	if err != nil {
		log.Fatal(err)
	}
	charge := func(ctx context.Context, tx *sql.Tx, m postbox.Message) ([]postbox.Message, error) {
		if _, err := tx.ExecContext(ctx, "INSERT INTO charges (message_id) VALUES (?)", m.ID); err != nil {
			return nil, err
		}
		return []postbox.Message{{Topic: "billing", Key: m.Key, Type: "card.charged", Payload: m.Payload}}, nil
	}

	sub := &postboxtest.Subscriber{} // natsbroker.NewSubscriber(…), kafkabroker.NewSubscriber(…)…
	order := postbox.Message{ID: "0190f6e4-3b7a-7c3d-8e4f-123456789abe", Topic: "orders", Key: "order-1",
		Type: "order.created", Payload: []byte(`{"order":1}`)}
	sub.Send(broker.Event{Message: order}, broker.Event{Message: order},
		broker.Event{Message: postbox.Message{ID: "order-2\n", Topic: "orders", Type: "order.created"}})
	go func() {
		sub.WaitSettled(ctx, 3, time.Minute)
		stop()
	}()
	quiet := slog.New(slog.DiscardHandler)
	// Blocks until ctx is cancelled.
	if err := broker.Consume(ctx, sub, consumer, charge, &broker.ConsumeConfig{Logger: quiet}); err != nil {
		log.Fatal(err)
	}
	for _, s := range sub.Settlements() {
		fmt.Printf("%s %q\n", s.How, s.ID)
	}
	// Output:
	// ack "0190f6e4-3b7a-7c3d-8e4f-123456789abe"
	// ack "0190f6e4-3b7a-7c3d-8e4f-123456789abe"
	// reject "order-2\n"
}

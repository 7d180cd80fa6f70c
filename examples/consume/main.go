// Command consume shows the inbox end to end on an embedded SQLite database, with no set-up: a billing service
// receives orders through broker.Consume, charges each order once however often it is delivered, and emits a
// payment event in the same transaction. An in-memory subscriber stands in for the broker; with a real one, pass
// its broker.Subscriber (natsbroker.NewSubscriber, kafkabroker.NewSubscriber…) instead.
//
//	go run ./examples/consume
package main

import (
	"context"
	"database/sql"
	"fmt"
	"log"
	"log/slog"
	"os"
	"path/filepath"
	"time"

	_ "modernc.org/sqlite"

	"github.com/postbox-go/postbox"
	"github.com/postbox-go/postbox/broker"
	"github.com/postbox-go/postbox/driver/databasesql"
	"github.com/postbox-go/postbox/postboxtest"
)

func main() {
	if err := run(context.Background()); err != nil {
		log.Fatal(err)
	}
}

type order struct {
	OrderID string `json:"order_id"`
	Cents   int    `json:"cents"`
}

type charged struct {
	OrderID string `json:"order_id"`
	Cents   int    `json:"cents"`
}

func run(ctx context.Context) error {
	dir, err := os.MkdirTemp("", "postbox-consume")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	db, err := sql.Open("sqlite", "file:"+filepath.Join(dir, "billing.db")+
		"?_pragma=journal_mode(WAL)&_pragma=busy_timeout(10000)&_txlock=immediate")
	if err != nil {
		return err
	}
	defer db.Close()
	client, err := postbox.NewClient(databasesql.New(db, databasesql.SQLite), nil)
	if err != nil {
		return err
	}
	if _, err := client.Migrate(ctx); err != nil {
		return err
	}
	if _, err := db.ExecContext(ctx, "CREATE TABLE charges (order_id TEXT NOT NULL, cents INTEGER NOT NULL)"); err != nil {
		return err
	}

	// The broker delivers the first order twice, as it may after a lost ack, and the second order with a field
	// the billing service does not know, which it ignores.
	sub := &postboxtest.Subscriber{}
	first := postbox.Message{ID: postbox.NewID(), Topic: "orders", Key: "order-1", Type: "order.created",
		Payload: []byte(`{"order_id":"order-1","cents":1250}`)}
	second := postbox.Message{ID: postbox.NewID(), Topic: "orders", Key: "order-2", Type: "order.created",
		Payload: []byte(`{"order_id":"order-2","cents":990,"gift_wrap":true}`)}
	sub.Send(broker.Event{Message: first}, broker.Event{Message: first}, broker.Event{Message: second})

	ctx, stop := context.WithCancel(ctx)
	defer stop()
	go func() {
		sub.WaitSettled(ctx, 3, time.Minute)
		stop()
	}()

	consumer, err := postbox.NewConsumer(client, "billing", &postbox.ConsumerConfig{MaxFailures: 5, DeadLetterTopic: "billing.dead"})
	if err != nil {
		return err
	}
	charge := postbox.JSONHandler(func(ctx context.Context, tx *sql.Tx, o order, m postbox.Message) ([]postbox.Event, error) {
		if _, err := tx.ExecContext(ctx, "INSERT INTO charges (order_id, cents) VALUES (?, ?)", o.OrderID, o.Cents); err != nil {
			return nil, err // rolled back and nacked: the broker delivers the order again
		}
		return []postbox.Event{{Topic: "payments", Key: o.OrderID, Type: "payment.charged", Data: charged(o)}}, nil
	})
	// Blocks until ctx is cancelled; acks, nacks or rejects each delivery by its outcome.
	err = broker.Consume(ctx, sub, consumer, charge, &broker.ConsumeConfig{Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		return err
	}

	var charges int
	if err := db.QueryRowContext(context.Background(), "SELECT count(*) FROM charges").Scan(&charges); err != nil {
		return err
	}
	stats, err := client.Stats(context.Background())
	if err != nil {
		return err
	}
	fmt.Printf("3 deliveries settled as %v; %d charges; %d payment events in the outbox\n", sub.Settlements(), charges, stats.Pending)
	if charges != 2 || stats.Pending != 2 {
		return fmt.Errorf("%d charges and %d events; want one of each per order", charges, stats.Pending)
	}
	return nil
}

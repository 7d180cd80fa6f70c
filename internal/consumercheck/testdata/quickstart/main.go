// Command quickstart is the README's quick start as a program: an order and its event commit in one PostgreSQL
// transaction, and a relay publishes the event to NATS JetStream.
package main

import (
	"context"
	"log"
	"os"
	"os/signal"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/postbox-go/postbox"
	"github.com/postbox-go/postbox/broker/natsbroker"
	"github.com/postbox-go/postbox/driver/pgxv5"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	if err := run(ctx); err != nil {
		log.Fatal(err)
	}
}

func run(ctx context.Context) error {
	pool, err := pgxpool.New(ctx, "postgres://localhost/shop")
	if err != nil {
		return err
	}
	defer pool.Close()
	client, err := postbox.NewClient(pgxv5.New(pool), nil)
	if err != nil {
		return err
	}
	if _, err := client.Migrate(ctx); err != nil {
		return err
	}

	tx, err := pool.Begin(ctx)
	if err != nil {
		return err
	}
	defer tx.Rollback(ctx)
	if _, err := client.Enqueue(ctx, tx, postbox.Message{
		Topic: "orders", Key: "order-1", Type: "order.created", Payload: []byte(`{"total":1250}`),
	}); err != nil {
		return err
	}
	if err := tx.Commit(ctx); err != nil {
		return err
	}

	nc, err := nats.Connect(nats.DefaultURL)
	if err != nil {
		return err
	}
	defer nc.Close()
	js, err := jetstream.New(nc)
	if err != nil {
		return err
	}
	if _, err := natsbroker.EnsureStream(ctx, js, jetstream.StreamConfig{Name: "ORDERS", Subjects: []string{"orders"}}); err != nil {
		return err
	}
	publisher, err := natsbroker.NewPublisher(js, nil)
	if err != nil {
		return err
	}
	defer publisher.Close()
	relay, err := postbox.NewRelay(client, publisher, nil)
	if err != nil {
		return err
	}
	return relay.Run(ctx) // blocks until ctx is cancelled
}

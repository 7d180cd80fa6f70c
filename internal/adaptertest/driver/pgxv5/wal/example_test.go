package wal_test

import (
	"context"
	"log"
	"os"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/postbox-go/postbox"
	"github.com/postbox-go/postbox/driver/pgxv5/wal"
)

// The WAL mode: the client writes messages into the WAL, and the relay reads them from the slot
// postbox_orders_outbox, which it creates when missing.
func ExampleNewRelay() {
	ctx := context.Background()
	pool, err := pgxpool.New(ctx, "postgres://app@db-primary:5432/app")
	if err != nil {
		log.Fatal(err)
	}
	defer pool.Close()
	orderID, b := "o-1", []byte(`{}`)
	publisher := postbox.PublisherFunc(func(ctx context.Context, batch []postbox.Record) error {
		return nil // publish to your broker
	})
	// docs: wal, client
	// The same secret, 32 random bytes or more, in every client and in the relay: it publishes only what they signed.
	secret := []byte(os.Getenv("POSTBOX_WAL_SECRET"))
	drv, err := wal.NewWithConfig(pool, &wal.Config{Secret: secret})
	if err != nil {
		log.Fatal(err)
	}
	client, err := postbox.NewClient(drv, &postbox.Config{Table: "orders_outbox"})
	// docs: end
	if err != nil {
		log.Fatal(err)
	}
	err = client.InTx(ctx, func(ctx context.Context, tx pgx.Tx) error {
		// docs: wal, enqueue
		// in the business transaction, as in table mode:
		id, err := client.Enqueue(ctx, tx, postbox.Message{Topic: "orders", Key: orderID, Type: "order.created", Payload: b})
		// docs: end
		_ = id
		return err
	})
	if err != nil {
		log.Fatal(err)
	}
	// docs: wal, relay
	relay, err := wal.NewRelay(pool, client, publisher, &wal.RelayConfig{Secret: secret}) // reads the slot postbox_orders_outbox
	// docs: end
	if err != nil {
		log.Fatal(err)
	}
	// docs: wal, run
	err = relay.Run(ctx)
	// docs: end
	if err != nil {
		log.Fatal(err)
	}
}

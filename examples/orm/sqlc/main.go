// Command sqlc enqueues an event in the pgx transaction that sqlc's generated queries run in (Queries.WithTx):
// Postbox's pgxv5 driver takes the same pgx.Tx, so the event commits if and only if the transaction does. The
// package shopdb is sqlc's output for schema.sql and query.sql, committed; sqlc generate rewrites it.
//
//	DATABASE_URL=postgres://localhost:5432/shop go run ./sqlc
package main

import (
	"context"
	"errors"
	"fmt"
	"log"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/postbox-go/postbox"
	"github.com/postbox-go/postbox/driver/pgxv5"
	"github.com/postbox-go/postbox/examples/orm/internal/shop"
	"github.com/postbox-go/postbox/examples/orm/sqlc/shopdb"
)

func main() {
	ctx := context.Background()
	pool, client, err := open(ctx, shop.DatabaseURL())
	if err != nil {
		log.Fatal(err)
	}
	defer pool.Close()
	if err := placeOrder(ctx, pool, client, postbox.NewID(), 1250); err != nil {
		log.Fatal(err)
	}
	if err := placeOrder(ctx, pool, client, postbox.NewID(), 250_000); !errors.Is(err, shop.ErrDeclined) {
		log.Fatalf("a declined order: %v", err)
	}
	fmt.Println("one order committed with its event; the declined one left neither")
}

// open connects a pgx pool and a Postbox client on it, and creates the tables.
func open(ctx context.Context, dbURL string) (*pgxpool.Pool, *postbox.Client[pgx.Tx], error) {
	pool, err := pgxpool.New(ctx, dbURL)
	if err != nil {
		return nil, nil, err
	}
	client, err := postbox.NewClient(pgxv5.New(pool), nil)
	if err != nil {
		return nil, nil, err
	}
	if _, err := client.Migrate(ctx); err != nil {
		return nil, nil, err
	}
	_, err = pool.Exec(ctx, shop.Schema)
	return pool, client, err
}

// placeOrder saves an order through sqlc's queries and its event, in one pgx transaction.
func placeOrder(ctx context.Context, pool *pgxpool.Pool, client *postbox.Client[pgx.Tx], orderID string, cents int64) error {
	return pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
		if err := shopdb.New(pool).WithTx(tx).CreateOrder(ctx, shopdb.CreateOrderParams{ID: orderID, Cents: cents}); err != nil {
			return err
		}
		if _, err := client.Enqueue(ctx, tx, shop.OrderCreated(orderID, cents)); err != nil {
			return err
		}
		return shop.Charge(cents) // an error rolls back the order and its event
	})
}

// Command bun enqueues an event in a bun transaction: a bun.Tx embeds the *sql.Tx it began, which Postbox's
// databasesql driver takes, so the event commits if and only if bun's transaction does.
//
//	DATABASE_URL=postgres://localhost:5432/shop go run ./bun
package main

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"log"

	_ "github.com/jackc/pgx/v5/stdlib" // registers the "pgx" database/sql driver
	"github.com/uptrace/bun"
	"github.com/uptrace/bun/dialect/pgdialect"

	"github.com/postbox-go/postbox"
	"github.com/postbox-go/postbox/driver/databasesql"
	"github.com/postbox-go/postbox/examples/orm/internal/shop"
)

// Order is a row of the orders table.
type Order struct {
	bun.BaseModel `bun:"table:orders"`
	ID            string `bun:"id,pk"`
	Cents         int64  `bun:"cents"`
}

func main() {
	ctx := context.Background()
	db, client, err := open(ctx, shop.DatabaseURL())
	if err != nil {
		log.Fatal(err)
	}
	defer db.Close()
	if err := placeOrder(ctx, db, client, postbox.NewID(), 1250); err != nil {
		log.Fatal(err)
	}
	if err := placeOrder(ctx, db, client, postbox.NewID(), 250_000); !errors.Is(err, shop.ErrDeclined) {
		log.Fatalf("a declined order: %v", err)
	}
	fmt.Println("one order committed with its event; the declined one left neither")
}

// open connects bun and a Postbox client on the same *sql.DB, and creates the tables.
func open(ctx context.Context, dbURL string) (*bun.DB, *postbox.Client[*sql.Tx], error) {
	sqlDB, err := sql.Open("pgx", dbURL)
	if err != nil {
		return nil, nil, err
	}
	db := bun.NewDB(sqlDB, pgdialect.New())
	client, err := postbox.NewClient(databasesql.New(sqlDB, databasesql.Postgres), nil)
	if err != nil {
		return nil, nil, err
	}
	if _, err := client.Migrate(ctx); err != nil {
		return nil, nil, err
	}
	_, err = db.ExecContext(ctx, shop.Schema)
	return db, client, err
}

// placeOrder saves an order and its event in one bun transaction.
func placeOrder(ctx context.Context, db *bun.DB, client *postbox.Client[*sql.Tx], orderID string, cents int64) error {
	return db.RunInTx(ctx, nil, func(ctx context.Context, tx bun.Tx) error {
		if _, err := tx.NewInsert().Model(&Order{ID: orderID, Cents: cents}).Exec(ctx); err != nil {
			return err
		}
		if _, err := client.Enqueue(ctx, tx.Tx, shop.OrderCreated(orderID, cents)); err != nil { // tx.Tx: the *sql.Tx
			return err
		}
		return shop.Charge(cents) // an error rolls back the order and its event
	})
}

// Command sqlx enqueues an event in a sqlx transaction: an *sqlx.Tx embeds the *sql.Tx it began, which
// Postbox's databasesql driver takes, so the event commits if and only if the sqlx transaction does.
//
//	DATABASE_URL=postgres://localhost:5432/shop go run ./sqlx
package main

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"log"

	_ "github.com/jackc/pgx/v5/stdlib" // registers the "pgx" database/sql driver
	"github.com/jmoiron/sqlx"

	"github.com/postbox-go/postbox"
	"github.com/postbox-go/postbox/driver/databasesql"
	"github.com/postbox-go/postbox/examples/orm/internal/shop"
)

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

// open connects sqlx and a Postbox client on the same *sql.DB, and creates the tables.
func open(ctx context.Context, dbURL string) (*sqlx.DB, *postbox.Client[*sql.Tx], error) {
	db, err := sqlx.ConnectContext(ctx, "pgx", dbURL)
	if err != nil {
		return nil, nil, err
	}
	client, err := postbox.NewClient(databasesql.New(db.DB, databasesql.Postgres), nil)
	if err != nil {
		return nil, nil, err
	}
	if _, err := client.Migrate(ctx); err != nil {
		return nil, nil, err
	}
	_, err = db.ExecContext(ctx, shop.Schema)
	return db, client, err
}

// placeOrder saves an order and its event in one sqlx transaction.
func placeOrder(ctx context.Context, db *sqlx.DB, client *postbox.Client[*sql.Tx], orderID string, cents int64) (err error) {
	tx, err := db.BeginTxx(ctx, nil)
	if err != nil {
		return err
	}
	defer func() {
		if err != nil {
			err = errors.Join(err, tx.Rollback())
		}
	}()
	order := struct {
		ID    string `db:"id"`
		Cents int64  `db:"cents"`
	}{orderID, cents}
	if _, err := tx.NamedExecContext(ctx, "INSERT INTO orders (id, cents) VALUES (:id, :cents)", order); err != nil {
		return err
	}
	if _, err := client.Enqueue(ctx, tx.Tx, shop.OrderCreated(orderID, cents)); err != nil { // tx.Tx: the *sql.Tx
		return err
	}
	if err := shop.Charge(cents); err != nil {
		return err // rolls back the order and its event
	}
	return tx.Commit()
}

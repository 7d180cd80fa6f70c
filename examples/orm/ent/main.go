// Command ent enqueues an event in a transaction of ent's SQL driver (entgo.io/ent/dialect/sql), used directly
// with its query builder and no generated code: the driver's transaction is an *entsql.Tx whose Tx field is the
// *sql.Tx it began, which Postbox's databasesql driver takes, so the event commits if and only if ent's
// transaction does.
//
//	DATABASE_URL=postgres://localhost:5432/shop go run ./ent
package main

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"log"

	"entgo.io/ent/dialect"
	entsql "entgo.io/ent/dialect/sql"
	_ "github.com/jackc/pgx/v5/stdlib" // registers the "pgx" database/sql driver

	"github.com/postbox-go/postbox"
	"github.com/postbox-go/postbox/driver/databasesql"
	"github.com/postbox-go/postbox/examples/orm/internal/shop"
)

func main() {
	ctx := context.Background()
	drv, client, err := open(ctx, shop.DatabaseURL())
	if err != nil {
		log.Fatal(err)
	}
	defer drv.Close()
	if err := placeOrder(ctx, drv, client, postbox.NewID(), 1250); err != nil {
		log.Fatal(err)
	}
	if err := placeOrder(ctx, drv, client, postbox.NewID(), 250_000); !errors.Is(err, shop.ErrDeclined) {
		log.Fatalf("a declined order: %v", err)
	}
	fmt.Println("one order committed with its event; the declined one left neither")
}

// open makes ent's driver and a Postbox client on the same *sql.DB, and creates the tables.
func open(ctx context.Context, dbURL string) (*entsql.Driver, *postbox.Client[*sql.Tx], error) {
	sqlDB, err := sql.Open("pgx", dbURL)
	if err != nil {
		return nil, nil, err
	}
	drv := entsql.OpenDB(dialect.Postgres, sqlDB)
	client, err := postbox.NewClient(databasesql.New(sqlDB, databasesql.Postgres), nil)
	if err != nil {
		return nil, nil, err
	}
	if _, err := client.Migrate(ctx); err != nil {
		return nil, nil, err
	}
	return drv, client, drv.Exec(ctx, shop.Schema, []any{}, nil)
}

// placeOrder saves an order and its event in one transaction of ent's driver.
func placeOrder(ctx context.Context, drv *entsql.Driver, client *postbox.Client[*sql.Tx], orderID string, cents int64) (err error) {
	tx, err := drv.Tx(ctx)
	if err != nil {
		return err
	}
	defer func() {
		if err != nil {
			err = errors.Join(err, tx.Rollback())
		}
	}()
	query, args := entsql.Dialect(dialect.Postgres).Insert("orders").Columns("id", "cents").Values(orderID, cents).Query()
	if err := tx.Exec(ctx, query, args, nil); err != nil {
		return err
	}
	entTx, ok := tx.(*entsql.Tx)
	if !ok {
		return fmt.Errorf("ent's driver began a %T, not an *entsql.Tx", tx)
	}
	sqlTx, ok := entTx.Tx.(*sql.Tx)
	if !ok {
		return fmt.Errorf("ent's transaction runs on a %T, not a *sql.Tx", entTx.Tx)
	}
	if _, err := client.Enqueue(ctx, sqlTx, shop.OrderCreated(orderID, cents)); err != nil {
		return err
	}
	if err := shop.Charge(cents); err != nil {
		return err // rolls back the order and its event
	}
	return tx.Commit()
}

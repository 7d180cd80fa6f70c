// Command gorm enqueues an event in a GORM transaction: GORM's PostgreSQL driver runs on pgx's database/sql
// driver, so Postbox's databasesql driver takes the *sql.Tx inside GORM's transaction, and the event commits if
// and only if GORM's transaction does.
//
//	DATABASE_URL=postgres://localhost:5432/shop go run ./gorm
package main

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"log"

	"gorm.io/driver/postgres"
	"gorm.io/gorm"
	"gorm.io/gorm/logger"

	"github.com/postbox-go/postbox"
	"github.com/postbox-go/postbox/driver/databasesql"
	"github.com/postbox-go/postbox/examples/orm/internal/shop"
)

// Order is a row of the orders table.
type Order struct {
	ID    string `gorm:"primaryKey"`
	Cents int64
}

func main() {
	ctx := context.Background()
	db, client, err := open(ctx, shop.DatabaseURL())
	if err != nil {
		log.Fatal(err)
	}
	if err := placeOrder(ctx, db, client, postbox.NewID(), 1250); err != nil {
		log.Fatal(err)
	}
	if err := placeOrder(ctx, db, client, postbox.NewID(), 250_000); !errors.Is(err, shop.ErrDeclined) {
		log.Fatalf("a declined order: %v", err)
	}
	fmt.Println("one order committed with its event; the declined one left neither")
}

// open connects GORM and a Postbox client on the same connection pool, and creates the tables.
func open(ctx context.Context, dbURL string) (*gorm.DB, *postbox.Client[*sql.Tx], error) {
	db, err := gorm.Open(postgres.Open(dbURL), &gorm.Config{Logger: logger.Discard})
	if err != nil {
		return nil, nil, err
	}
	sqlDB, err := db.DB()
	if err != nil {
		return nil, nil, err
	}
	client, err := postbox.NewClient(databasesql.New(sqlDB, databasesql.Postgres), nil)
	if err != nil {
		return nil, nil, err
	}
	if _, err := client.Migrate(ctx); err != nil {
		return nil, nil, err
	}
	return db, client, db.WithContext(ctx).Exec(shop.Schema).Error
}

// placeOrder saves an order and its event in one GORM transaction.
func placeOrder(ctx context.Context, db *gorm.DB, client *postbox.Client[*sql.Tx], orderID string, cents int64) error {
	return db.WithContext(ctx).Transaction(func(tx *gorm.DB) error {
		if err := tx.Create(&Order{ID: orderID, Cents: cents}).Error; err != nil {
			return err
		}
		// Inside Transaction, GORM's connection pool is the *sql.Tx it began.
		sqlTx, ok := tx.Statement.ConnPool.(*sql.Tx)
		if !ok {
			return fmt.Errorf("GORM's transaction runs on %T, not a *sql.Tx", tx.Statement.ConnPool)
		}
		if _, err := client.Enqueue(ctx, sqlTx, shop.OrderCreated(orderID, cents)); err != nil {
			return err
		}
		return shop.Charge(cents) // an error rolls back the order and its event
	})
}

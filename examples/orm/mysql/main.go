// Command mysql enqueues an event in a database/sql transaction on MySQL 8 or MariaDB 10.6+, through
// go-sql-driver/mysql and Postbox's databasesql driver: the event commits if and only if the transaction does.
// docs/MYSQL.md is cut from this file, between the "docs:" markers.
//
//	MYSQL_DSN='app:secret@tcp(127.0.0.1:3306)/app' go run ./mysql
package main

// docs: mysql, imports
import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"log"
	"os"

	"github.com/go-sql-driver/mysql"

	"github.com/postbox-go/postbox"
	"github.com/postbox-go/postbox/driver/databasesql"
)

// docs: end

// The order event and the payment step every example shares.
import "github.com/postbox-go/postbox/examples/orm/internal/shop"

// schema is the orders table in MySQL's words: a TEXT column cannot be a key.
const schema = "CREATE TABLE IF NOT EXISTS orders (id varchar(36) PRIMARY KEY, cents bigint NOT NULL)"

func main() {
	ctx := context.Background()
	dsn := os.Getenv("MYSQL_DSN")
	if dsn == "" {
		dsn = "root@tcp(127.0.0.1:3306)/shop"
	}
	db, client, err := open(ctx, dsn)
	if err != nil {
		log.Fatal(err)
	}
	defer db.Close()
	if err := placeOrder(ctx, client, postbox.NewID(), 1250); err != nil {
		log.Fatal(err)
	}
	if err := placeOrder(ctx, client, postbox.NewID(), 250_000); !errors.Is(err, shop.ErrDeclined) {
		log.Fatalf("a declined order: %v", err)
	}
	fmt.Println("one order committed with its event; the declined one left neither")
}

// open connects to MySQL, makes a Postbox client and creates the tables.
func open(ctx context.Context, dsn string) (*sql.DB, *postbox.Client[*sql.Tx], error) {
	// docs: mysql, open
	// interpolateParams saves two round trips per statement; Postbox needs no other DSN option. Set through the
	// parsed DSN, it keeps the parameters the DSN already has.
	cfg, err := mysql.ParseDSN(dsn)
	if err != nil {
		return nil, nil, err
	}
	cfg.InterpolateParams = true
	db, err := sql.Open("mysql", cfg.FormatDSN())
	if err != nil {
		return nil, nil, err
	}
	client, err := postbox.NewClient(databasesql.New(db, databasesql.MySQL), nil)
	if err != nil {
		return nil, nil, err
	}
	if _, err := client.Migrate(ctx); err != nil { // or apply client.Migrations() with your own tool
		return nil, nil, err
	}
	// docs: end
	_, err = db.ExecContext(ctx, schema)
	return db, client, err
}

// placeOrder saves an order and its event in one transaction; client.InTx commits it, or rolls it back when the
// function returns an error.
func placeOrder(ctx context.Context, client *postbox.Client[*sql.Tx], orderID string, cents int64) error {
	return client.InTx(ctx, func(ctx context.Context, tx *sql.Tx) error {
		if _, err := tx.ExecContext(ctx, "INSERT INTO orders (id, cents) VALUES (?, ?)", orderID, cents); err != nil {
			return err
		}
		if _, err := client.Enqueue(ctx, tx, shop.OrderCreated(orderID, cents)); err != nil {
			return err
		}
		return shop.Charge(cents) // an error rolls back the order and its event
	})
}

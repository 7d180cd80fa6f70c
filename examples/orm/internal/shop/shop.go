// Package shop is what the ORM examples share: the orders table, the order.created event and a payment step
// that declines large orders, so that each example shows a transaction that rolls back after its enqueue.
package shop

import (
	"errors"
	"fmt"
	"os"

	"github.com/postbox-go/postbox"
)

// Schema creates the orders table every example writes to.
const Schema = "CREATE TABLE IF NOT EXISTS orders (id text PRIMARY KEY, cents bigint NOT NULL)"

// ErrDeclined is the payment step's refusal: the order and its event roll back together.
var ErrDeclined = errors.New("payment declined")

// Charge declines orders over 1000.00.
func Charge(cents int64) error {
	if cents > 100_000 {
		return fmt.Errorf("%w: %d cents is over the limit", ErrDeclined, cents)
	}
	return nil
}

// OrderCreated is the event of a new order.
func OrderCreated(orderID string, cents int64) postbox.Message {
	return postbox.Message{Topic: "orders", Key: orderID, Type: "order.created",
		Payload: fmt.Appendf(nil, `{"order_id":%q,"cents":%d}`, orderID, cents)}
}

// DatabaseURL is $DATABASE_URL, or the local PostgreSQL's shop database.
func DatabaseURL() string {
	if u := os.Getenv("DATABASE_URL"); u != "" {
		return u
	}
	return "postgres://localhost:5432/shop"
}

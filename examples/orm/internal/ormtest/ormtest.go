// Package ormtest is the test every ORM example passes: an order placed in the ORM's transaction leaves one
// event when the transaction commits and none when it rolls back.
package ormtest

import (
	"context"
	"errors"
	"testing"

	"github.com/postbox-go/postbox"
	"github.com/postbox-go/postbox/examples/orm/internal/shop"
	"github.com/postbox-go/postbox/internal/testenv"
)

// Database returns the URL of a fresh PostgreSQL database for the example named name.
func Database(t *testing.T, name string) string {
	t.Helper()
	url, err := testenv.FreshPostgres("postbox_examples_" + name)
	if err != nil {
		t.Fatal(err)
	}
	return url
}

// Example is one ORM example set up on a fresh database.
type Example struct {
	// Place saves an order and its order.created event in one transaction of the ORM, and returns the payment
	// step's error (shop.ErrDeclined for a large order), which rolls both back.
	Place func(ctx context.Context, orderID string, cents int64) error
	// Orders counts the rows of the orders table.
	Orders func(ctx context.Context) (int, error)
	// Stats is the Postbox client's Stats.
	Stats func(ctx context.Context) (postbox.Stats, error)
}

// EventIfAndOnlyIfCommit places an order that commits and one that rolls back, and checks that the outbox holds
// exactly the committed order's event.
func EventIfAndOnlyIfCommit(t *testing.T, e Example) {
	t.Helper()
	ctx := context.Background()
	check := func(when string, wantOrders int, wantEvents int64) {
		t.Helper()
		orders, err := e.Orders(ctx)
		if err != nil {
			t.Fatal(err)
		}
		s, err := e.Stats(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if orders != wantOrders || s.Pending != wantEvents {
			t.Fatalf("%s: %d orders and %d events in the outbox; want %d and %d", when, orders, s.Pending, wantOrders, wantEvents)
		}
	}
	check("before any order", 0, 0)
	if err := e.Place(ctx, postbox.NewID(), 1250); err != nil {
		t.Fatalf("committed order: %v", err)
	}
	check("after a committed order", 1, 1)
	if err := e.Place(ctx, postbox.NewID(), 250_000); !errors.Is(err, shop.ErrDeclined) {
		t.Fatalf("declined order: %v; want shop.ErrDeclined", err)
	}
	check("after an order rolled back after its enqueue", 1, 1)
}

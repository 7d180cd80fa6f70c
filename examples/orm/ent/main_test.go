package main

import (
	"context"
	"testing"

	"github.com/postbox-go/postbox/examples/orm/internal/ormtest"
)

func TestEventIfAndOnlyIfCommit(t *testing.T) {
	ctx := context.Background()
	drv, client, err := open(ctx, ormtest.Database(t, "ent"))
	if err != nil {
		t.Fatal(err)
	}
	defer drv.Close()
	ormtest.EventIfAndOnlyIfCommit(t, ormtest.Example{
		Place: func(ctx context.Context, orderID string, cents int64) error {
			return placeOrder(ctx, drv, client, orderID, cents)
		},
		Orders: func(ctx context.Context) (n int, err error) {
			return n, drv.DB().QueryRowContext(ctx, "SELECT count(*) FROM orders").Scan(&n)
		},
		Stats: client.Stats,
	})
}

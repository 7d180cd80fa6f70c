package main

import (
	"context"
	"testing"

	"github.com/postbox-go/postbox/examples/orm/internal/ormtest"
	"github.com/postbox-go/postbox/examples/orm/sqlc/shopdb"
)

func TestEventIfAndOnlyIfCommit(t *testing.T) {
	ctx := context.Background()
	pool, client, err := open(ctx, ormtest.Database(t, "sqlc"))
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Close()
	ormtest.EventIfAndOnlyIfCommit(t, ormtest.Example{
		Place: func(ctx context.Context, orderID string, cents int64) error {
			return placeOrder(ctx, pool, client, orderID, cents)
		},
		Orders: func(ctx context.Context) (int, error) {
			n, err := shopdb.New(pool).CountOrders(ctx)
			return int(n), err
		},
		Stats: client.Stats,
	})
}

package main

import (
	"context"
	"testing"

	"github.com/postbox-go/postbox/examples/orm/internal/ormtest"
)

func TestEventIfAndOnlyIfCommit(t *testing.T) {
	ctx := context.Background()
	db, client, err := open(ctx, ormtest.Database(t, "bun"))
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	ormtest.EventIfAndOnlyIfCommit(t, ormtest.Example{
		Place: func(ctx context.Context, orderID string, cents int64) error {
			return placeOrder(ctx, db, client, orderID, cents)
		},
		Orders: func(ctx context.Context) (int, error) {
			n, err := db.NewSelect().Model((*Order)(nil)).Count(ctx)
			return int(n), err
		},
		Stats: client.Stats,
	})
}

package main

import (
	"context"
	"strings"
	"testing"

	"github.com/postbox-go/postbox/examples/orm/internal/ormtest"
	"github.com/postbox-go/postbox/internal/testenv"
)

func TestEventIfAndOnlyIfCommit(t *testing.T) {
	ctx := context.Background()
	dsn, err := testenv.FreshMySQL("postbox_examples_mysql")
	if err != nil {
		t.Fatal(err)
	}
	// A DSN with parameters of its own, as a user's often has: open must keep them and add interpolateParams (a
	// "?interpolateParams=true" appended to it made "…?parseTime=true?interpolateParams=true", which fails).
	if !strings.Contains(dsn, "?") {
		dsn += "?parseTime=true"
	}
	db, client, err := open(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	ormtest.EventIfAndOnlyIfCommit(t, ormtest.Example{
		Place: func(ctx context.Context, orderID string, cents int64) error {
			return placeOrder(ctx, client, orderID, cents)
		},
		Orders: func(ctx context.Context) (n int, err error) {
			return n, db.QueryRowContext(ctx, "SELECT count(*) FROM orders").Scan(&n)
		},
		Stats: client.Stats,
	})
}

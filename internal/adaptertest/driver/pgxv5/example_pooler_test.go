package pgxv5_test

import (
	"context"
	"log"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/postbox-go/postbox"
	"github.com/postbox-go/postbox/driver/pgxv5"
)

// Behind PgBouncer in transaction mode: the pool goes through the pooler in pgx's exec mode, and the relay
// listens on a direct connection to PostgreSQL (or, without one, sets DisableListen and polls).
func ExampleDriver_WithListenConfig() {
	ctx := context.Background()
	// docs: pooler
	cfg, err := pgxpool.ParseConfig("postgres://app@pgbouncer:6432/app")
	if err != nil {
		log.Fatal(err)
	}
	// PgBouncer before 1.21 keeps no prepared statements in transaction mode: no statement cache.
	cfg.ConnConfig.DefaultQueryExecMode = pgx.QueryExecModeExec
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		log.Fatal(err)
	}
	defer pool.Close()

	direct, err := pgx.ParseConfig("postgres://app@db-primary:5432/app")
	if err != nil {
		log.Fatal(err)
	}
	client, err := postbox.NewClient(pgxv5.New(pool).WithListenConfig(direct), nil)
	if err != nil {
		log.Fatal(err)
	}
	relay, err := postbox.NewRelay(client, postbox.PublisherFunc(func(ctx context.Context, batch []postbox.Record) error {
		return nil // publish to your broker
	}), nil) // no direct connection? &postbox.RelayConfig{DisableListen: true}
	if err != nil {
		log.Fatal(err)
	}
	// docs: end
	_ = relay.Run(ctx)
}

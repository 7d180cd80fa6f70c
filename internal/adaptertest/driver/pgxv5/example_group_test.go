package pgxv5_test

import (
	"context"
	"log"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/postbox-go/postbox"
	"github.com/postbox-go/postbox/driver/pgxv5"
)

// One relay process for a database per tenant: a RelayGroup with one source per database, each with its own
// pool (bounded), its own relay and so its own workers and wake-ups.
func Example_relayGroup() {
	ctx := context.Background()
	publisher := postbox.PublisherFunc(func(ctx context.Context, batch []postbox.Record) error {
		return nil // publish to your broker
	})
	var pools []*pgxpool.Pool
	defer func() {
		for _, p := range pools {
			p.Close()
		}
	}()
	// docs: group
	group, err := postbox.NewRelayGroup(nil)
	if err != nil {
		log.Fatal(err)
	}
	for _, tenant := range []string{"tenant_a", "tenant_b"} {
		cfg, err := pgxpool.ParseConfig("postgres://relay@db-1:5432/" + tenant)
		if err != nil {
			log.Fatal(err)
		}
		cfg.MaxConns = 3 // two workers and one more: this source's share of the server
		pool, err := pgxpool.NewWithConfig(ctx, cfg)
		if err != nil {
			log.Fatal(err)
		}
		pools = append(pools, pool) // closed once the group has stopped
		client, err := postbox.NewClient(pgxv5.New(pool), nil)
		if err != nil {
			log.Fatal(err)
		}
		relay, err := postbox.NewRelay(client, publisher, nil)
		if err != nil {
			log.Fatal(err)
		}
		if err := group.Add(tenant, relay); err != nil {
			log.Fatal(err)
		}
	}
	go func() { _ = group.Run(ctx) }() // returns once ctx is done and every in-flight batch settled
	// Later, while it runs: the tenant's in-flight batches settle before Remove returns.
	if err := group.Remove(ctx, "tenant_b"); err != nil {
		log.Print(err)
	}
	// docs: end
}

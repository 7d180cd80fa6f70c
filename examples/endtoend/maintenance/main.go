// Command maintenance keeps the outbox and the inbox small on PostgreSQL: a Cleaner deletes published messages,
// dead messages and inbox claims past their retention in bounded batches, and on partitioned tables a partition
// Maintainer creates partitions ahead and drops expired ones. docs/PARTITIONS.md is cut from this file, between
// the "docs:" markers.
//
//	DATABASE_URL=postgres://localhost:5432/shop go run ./maintenance
package main

import (
	"context"
	"fmt"
	"log"
	"os"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/postbox-go/postbox"
	"github.com/postbox-go/postbox/driver/pgxv5"
	"github.com/postbox-go/postbox/partition"
)

func main() {
	dbURL := os.Getenv("DATABASE_URL")
	if dbURL == "" {
		dbURL = "postgres://localhost:5432/shop"
	}
	cleaned, parts, err := run(context.Background(), dbURL)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Printf("cleaner: %d published, %d dead, %d inbox rows deleted; partitions created: %v\n",
		cleaned.Published, cleaned.Dead, cleaned.Inbox, parts.Created)
}

// run cleans the default tables once, and creates the partitions of a partitioned table set once.
func run(ctx context.Context, dbURL string) (postbox.CleanupResult, partition.Result, error) {
	pool, err := pgxpool.New(ctx, dbURL)
	if err != nil {
		return postbox.CleanupResult{}, partition.Result{}, err
	}
	defer pool.Close()
	client, err := postbox.NewClient(pgxv5.New(pool), nil)
	if err != nil {
		return postbox.CleanupResult{}, partition.Result{}, err
	}
	if _, err := client.Migrate(ctx); err != nil {
		return postbox.CleanupResult{}, partition.Result{}, err
	}
	cleaned, err := clean(ctx, client)
	if err != nil {
		return cleaned, partition.Result{}, err
	}
	parts, err := partitions(ctx, pgxv5.New(pool))
	return cleaned, parts, err
}

func clean(ctx context.Context, client *postbox.Client[pgx.Tx]) (postbox.CleanupResult, error) {
	// docs: cleaner
	cleaner, err := postbox.NewCleaner(client, &postbox.CleanupConfig{
		Retention:      7 * 24 * time.Hour,  // published messages (default 7 days)
		DeadRetention:  30 * 24 * time.Hour, // dead messages; 0 keeps them until retried or purged
		InboxRetention: 14 * 24 * time.Hour, // inbox claims (default 7 days); above the broker's redelivery horizon
		Interval:       time.Minute,         // for Run (default 1m)
		BatchSize:      1000,                // rows per DELETE and per set (default 1000)
	})
	if err != nil {
		return postbox.CleanupResult{}, err
	}
	// Once now; cleaner.Run(ctx) does the same every Interval until ctx is cancelled.
	res, err := cleaner.RunOnce(ctx) // res.Published, res.Dead, res.Inbox, res.Batches
	// docs: end
	return res, err
}

func partitions(ctx context.Context, drv *pgxv5.Driver) (partition.Result, error) {
	// docs: partitioned
	client, err := postbox.NewClient(drv, &postbox.Config{Partitioned: true, Table: "events_outbox", InboxTable: "events_inbox"})
	if err != nil {
		return partition.Result{}, err
	}
	if _, err := client.Migrate(ctx); err != nil {
		return partition.Result{}, err
	}
	m, err := partition.New(client, &partition.Config{
		Period:         partition.Daily,    // or Hourly, Monthly
		Lookahead:      3,                  // periods after the current one kept ready (default 3)
		Retention:      7 * 24 * time.Hour, // drop an outbox partition once its whole range is older (default 7 days)
		InboxRetention: 7 * 24 * time.Hour, // the same for the inbox, by message creation time (default 7 days)
		DropDead:       false,              // keep partitions that hold dead messages (default)
		Interval:       time.Hour,          // for Run (default 1h)
	})
	if err != nil {
		return partition.Result{}, err
	}
	// Once now; m.Run(ctx) does the same every Interval until ctx is cancelled.
	res, err := m.RunOnce(ctx) // res.Created, res.Dropped, res.Kept, res.InboxCreated…
	// docs: end
	return res, err
}

package databasesql_test

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/postbox-go/postbox"
	"github.com/postbox-go/postbox/driver/databasesql"
	"github.com/postbox-go/postbox/partition"
	"github.com/postbox-go/postbox/postboxtest"
)

// The outbox on SQLite: enqueue in the transaction that saves the data, then relay what committed.
func Example() {
	ctx := context.Background()
	dir, _ := os.MkdirTemp("", "postbox-example")
	defer os.RemoveAll(dir)
	db, err := sql.Open("sqlite", "file:"+filepath.Join(dir, "app.db")+"?_pragma=journal_mode(WAL)&_pragma=busy_timeout(10000)&_txlock=immediate")
	if err != nil {
		panic(err)
	}
	defer db.Close()

	client, err := postbox.NewClient(databasesql.New(db, databasesql.SQLite), nil)
	if err != nil {
		panic(err)
	}
	if _, err := client.Migrate(ctx); err != nil {
		panic(err)
	}
	if _, err := db.Exec("CREATE TABLE orders (id TEXT PRIMARY KEY)"); err != nil {
		panic(err)
	}

	err = client.InTx(ctx, func(ctx context.Context, tx *sql.Tx) error {
		if _, err := tx.ExecContext(ctx, "INSERT INTO orders (id) VALUES ('o-1')"); err != nil {
			return err
		}
		_, err := client.Enqueue(ctx, tx, postbox.Message{Topic: "orders", Key: "o-1", Type: "order.created", Payload: []byte(`{"id":"o-1"}`)})
		return err
	})
	if err != nil {
		panic(err)
	}

	broker := &postboxtest.Recorder{}
	relay, err := postbox.NewRelay(client, broker, nil)
	if err != nil {
		panic(err)
	}
	if _, err := relay.RunOnce(ctx); err != nil {
		panic(err)
	}
	for _, r := range broker.Records() {
		fmt.Println(r.Topic, r.Type, r.Key, string(r.Payload))
	}
	// Output: orders order.created o-1 {"id":"o-1"}
}

// Operators see what is stuck and put it back in line.
func Example_deadLetters() {
	ctx := context.Background()
	dir, _ := os.MkdirTemp("", "postbox-example")
	defer os.RemoveAll(dir)
	db, _ := sql.Open("sqlite", "file:"+filepath.Join(dir, "app.db")+"?_txlock=immediate")
	defer db.Close()
	client, _ := postbox.NewClient(databasesql.New(db, databasesql.SQLite), nil)
	if _, err := client.Migrate(ctx); err != nil {
		panic(err)
	}
	_ = client.InTx(ctx, func(ctx context.Context, tx *sql.Tx) error {
		_, err := client.Enqueue(ctx, tx, postbox.Message{Topic: "orders", Type: "order.created"})
		return err
	})
	rejecting := postbox.PublisherFunc(func(context.Context, []postbox.Record) error {
		return postbox.Permanent(fmt.Errorf("schema registry rejected the payload"))
	})
	relay, _ := postbox.NewRelay(client, rejecting, nil)
	_, _ = relay.RunOnce(ctx)

	dead, _ := client.ListDead(ctx, postbox.DeadFilter{Topic: "orders"})
	fmt.Println(len(dead), dead[0].LastError)
	n, _ := client.RetryDead(ctx, postbox.DeadFilter{Topic: "orders"})
	fmt.Println("retried", n)
	// Output:
	// 1 permanent: schema registry rejected the payload
	// retried 1
}

// A cleaner keeps the outbox small when published messages are kept for audit: it deletes them, and dead messages
// if asked, once their retention has passed, in short batches.
func Example_cleaner() {
	ctx := context.Background()
	dir, _ := os.MkdirTemp("", "postbox-example")
	defer os.RemoveAll(dir)
	db, _ := sql.Open("sqlite", "file:"+filepath.Join(dir, "app.db")+"?_txlock=immediate")
	defer db.Close()
	clock := postboxtest.NewClock(time.Now())
	client, _ := postbox.NewClient(databasesql.New(db, databasesql.SQLite), &postbox.Config{Clock: clock})
	if _, err := client.Migrate(ctx); err != nil {
		panic(err)
	}
	_ = client.InTx(ctx, func(ctx context.Context, tx *sql.Tx) error {
		_, err := client.Enqueue(ctx, tx, postbox.Message{Topic: "orders", Type: "order.created"})
		return err
	})
	relay, _ := postbox.NewRelay(client, &postboxtest.Recorder{}, &postbox.RelayConfig{KeepPublished: true})
	_, _ = relay.RunOnce(ctx)

	cleaner, err := postbox.NewCleaner(client, &postbox.CleanupConfig{Retention: 24 * time.Hour, DeadRetention: 30 * 24 * time.Hour})
	if err != nil {
		panic(err)
	}
	res, _ := cleaner.RunOnce(ctx) // or go cleaner.Run(ctx), every CleanupConfig.Interval
	fmt.Println("today:", res.Published)
	clock.Advance(25 * time.Hour)
	res, _ = cleaner.RunOnce(ctx)
	fmt.Println("tomorrow:", res.Published)
	// Output:
	// today: 0
	// tomorrow: 1
}

// High volume on MySQL or MariaDB: a table partitioned by day, whose old days are dropped instead of deleted.
func Example_partitions() {
	ctx := context.Background()
	db, err := sql.Open("mysql", "app:secret@tcp(localhost:3306)/app?interpolateParams=true")
	if err != nil {
		panic(err)
	}
	client, err := postbox.NewClient(databasesql.New(db, databasesql.MySQL), &postbox.Config{Partitioned: true})
	if err != nil {
		panic(err)
	}
	if _, err := client.Migrate(ctx); err != nil {
		panic(err)
	}
	m, err := partition.New(client, &partition.Config{Period: partition.Daily, Lookahead: 3, Retention: 7 * 24 * time.Hour})
	if err != nil {
		panic(err)
	}
	// Once now, as a cron job would, then every hour until ctx ends.
	if _, err := m.RunOnce(ctx); err != nil && !errors.Is(err, postbox.ErrLocked) {
		panic(err)
	}
	go m.Run(ctx)
}

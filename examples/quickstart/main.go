// Command quickstart shows the outbox end to end on an embedded SQLite database, with no set-up: an order
// service saves orders and their events in one transaction, some transactions roll back, and a relay publishes
// every committed event exactly once and nothing of the rolled-back ones.
//
//	go run ./examples/quickstart
package main

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"log"
	"os"
	"path/filepath"
	"sync"
	"time"

	_ "modernc.org/sqlite"

	"github.com/postbox-go/postbox"
	"github.com/postbox-go/postbox/driver/databasesql"
)

const orders = 2000

func main() {
	if err := run(context.Background()); err != nil {
		log.Fatal(err)
	}
}

func run(ctx context.Context) error {
	dir, err := os.MkdirTemp("", "postbox-quickstart")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	db, err := sql.Open("sqlite", "file:"+filepath.Join(dir, "shop.db")+
		"?_pragma=journal_mode(WAL)&_pragma=busy_timeout(10000)&_txlock=immediate")
	if err != nil {
		return err
	}
	defer db.Close()

	client, err := postbox.NewClient(databasesql.New(db, databasesql.SQLite), nil)
	if err != nil {
		return err
	}
	if _, err := client.Migrate(ctx); err != nil {
		return err
	}
	if _, err := db.ExecContext(ctx, "CREATE TABLE orders (id TEXT PRIMARY KEY, total INTEGER NOT NULL)"); err != nil {
		return err
	}

	// The "broker": remembers what it was given.
	var mu sync.Mutex
	published := map[string]int{}
	broker := postbox.PublisherFunc(func(_ context.Context, batch []postbox.Record) error {
		mu.Lock()
		defer mu.Unlock()
		for _, r := range batch {
			published[r.ID]++
		}
		return nil
	})
	relay, err := postbox.NewRelay(client, broker, &postbox.RelayConfig{PollInterval: 20 * time.Millisecond})
	if err != nil {
		return err
	}
	relayCtx, stopRelay := context.WithCancel(ctx)
	defer stopRelay()
	relayDone := make(chan error, 1)
	go func() { relayDone <- relay.Run(relayCtx) }()

	// The order service: every tenth order fails after its event was enqueued, and rolls back.
	start := time.Now()
	committed := map[string]bool{}
	rolledBack := 0
	for i := range orders {
		msg := postbox.Message{ID: postbox.NewID(), Topic: "orders", Key: fmt.Sprintf("customer-%d", i%50),
			Type: "order.created", Payload: fmt.Appendf(nil, `{"order":%d,"total":%d}`, i, 100+i)}
		err := client.InTx(ctx, func(ctx context.Context, tx *sql.Tx) error {
			if _, err := tx.ExecContext(ctx, "INSERT INTO orders (id, total) VALUES (?, ?)", msg.ID, 100+i); err != nil {
				return err
			}
			if _, err := client.Enqueue(ctx, tx, msg); err != nil {
				return err
			}
			if i%10 == 9 {
				return errPaymentDeclined
			}
			return nil
		})
		switch {
		case errors.Is(err, errPaymentDeclined):
			rolledBack++
		case err != nil:
			return err
		default:
			committed[msg.ID] = true
		}
		relay.Wake()
	}

	// Wait until the outbox is empty, then stop the relay gracefully.
	for {
		s, err := client.Stats(ctx)
		if err != nil {
			return err
		}
		if s.Pending == 0 {
			break
		}
		select {
		case <-time.After(10 * time.Millisecond):
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	stopRelay()
	if err := <-relayDone; err != nil {
		return err
	}

	lost, duplicates, phantom := 0, 0, 0
	for id := range committed {
		switch n := published[id]; {
		case n == 0:
			lost++
		case n > 1:
			duplicates += n - 1
		}
	}
	for id := range published {
		if !committed[id] {
			phantom++
		}
	}
	elapsed := time.Since(start)
	fmt.Printf("orders committed: %d, rolled back: %d\n", len(committed), rolledBack)
	fmt.Printf("events published: %d in %v (%.0f events/s)\n", len(published), elapsed.Round(time.Millisecond),
		float64(len(published))/elapsed.Seconds())
	fmt.Printf("lost: %d, duplicates: %d, events of rolled-back orders published: %d\n", lost, duplicates, phantom)
	if lost+duplicates+phantom > 0 {
		return errors.New("the outbox broke its promise")
	}
	return nil
}

var errPaymentDeclined = errors.New("payment declined")

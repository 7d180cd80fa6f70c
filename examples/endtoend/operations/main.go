// Command operations handles dead letters on PostgreSQL: it parks one message, lists the dead messages a filter
// selects a page at a time, counts them before retrying, and resends a corrected copy of one. docs/OPERATIONS.md is
// cut from this file, between the "docs:" markers.
//
//	DATABASE_URL=postgres://localhost:5432/shop go run ./operations
package main

import (
	"context"
	"errors"
	"fmt"
	"log"
	"os"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/postbox-go/postbox"
	"github.com/postbox-go/postbox/driver/pgxv5"
)

func main() {
	dbURL := os.Getenv("DATABASE_URL")
	if dbURL == "" {
		dbURL = "postgres://localhost:5432/shop"
	}
	res, err := run(context.Background(), dbURL)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Printf("dead: %d listed, %s counted, %d retried; resent %s as %s\n",
		res.Listed, res.Counted, res.Retried, res.Original, res.Resent)
}

// result is what run did.
type result struct {
	Listed           int
	Counted          postbox.Count
	Retried          int64
	Original, Resent string
}

// run parks one message through a relay whose publisher refuses it for good, then handles it as an operator would.
func run(ctx context.Context, dbURL string) (result, error) {
	pool, err := pgxpool.New(ctx, dbURL)
	if err != nil {
		return result{}, err
	}
	defer pool.Close()
	client, err := postbox.NewClient(pgxv5.New(pool), nil)
	if err != nil {
		return result{}, err
	}
	if _, err := client.Migrate(ctx); err != nil {
		return result{}, err
	}
	if err := park(ctx, client); err != nil {
		return result{}, err
	}
	res, err := deadLetters(ctx, client)
	if err != nil {
		return res, err
	}
	res.Original = res.Resent
	res.Resent, err = resend(ctx, client, res.Original, []byte(`{"order":"A-1","total":42}`))
	return res, err
}

// park enqueues one message and relays it to a publisher that refuses it for good, which makes it dead.
func park(ctx context.Context, client *postbox.Client[pgx.Tx]) error {
	err := client.InTx(ctx, func(ctx context.Context, tx pgx.Tx) error {
		_, err := client.Enqueue(ctx, tx, postbox.Message{Topic: "orders", Type: "order.placed", Payload: []byte(`{"order":"A-1","total":"42"}`)})
		return err
	})
	if err != nil {
		return err
	}
	refuse := postbox.PublisherFunc(func(context.Context, []postbox.Record) error {
		return postbox.Permanent(errors.New("timeout: total is not a number"))
	})
	relay, err := postbox.NewRelay(client, refuse, nil)
	if err != nil {
		return err
	}
	_, err = relay.RunOnce(ctx)
	return err
}

// deadLetters lists, counts and retries the dead messages of a filter. Resent carries the first listed ID.
func deadLetters(ctx context.Context, client *postbox.Client[pgx.Tx]) (result, error) {
	var res result
	// docs: dead letters
	f := postbox.DeadFilter{Topic: "orders", ErrorContains: "timeout", Limit: 50, Newest: true, Actor: "alice"}
	page, err := client.ListDead(ctx, f) // newest first, 50 at a time
	if err != nil {
		return res, err
	}
	if len(page) > 0 {
		f.After = page[len(page)-1].ID // the next page
	}
	// docs: end
	if len(page) == 0 {
		return res, errors.New("no dead message: the relay did not park it")
	}
	res.Listed, res.Resent = len(page), page[0].ID
	f.After = ""
	// docs: dead letters, count
	n, err := client.CountDead(ctx, f, 0) // up to 100,000: n.More means "more than n.N"
	if err != nil {
		return res, err
	}
	retried, err := client.RetryDead(ctx, f) // Limit, After and Newest do not apply
	// docs: end
	res.Counted, res.Retried = n, retried
	return res, err
}

// resend enqueues a corrected copy of the message id under a new ID.
func resend(ctx context.Context, client *postbox.Client[pgx.Tx], id string, fixed []byte) (string, error) {
	// docs: resend
	orig, err := client.FindMessage(ctx, id)
	if err != nil {
		return "", err
	}
	m := orig.Message
	m.ID, m.Payload = "", fixed
	newID, err := client.ResendEdited(ctx, orig.ID, m, "alice") // header postbox-replay-of: <orig.ID>
	// docs: end
	return newID, err
}

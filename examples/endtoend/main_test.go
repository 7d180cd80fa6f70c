package main

import (
	"context"
	"errors"
	"os"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/postbox-go/postbox/internal/testenv"
)

// TestEndToEnd runs the README's program against the local PostgreSQL and NATS: the order's event crosses the
// relay and NATS, the billing service charges the order once, and its payment event reaches NATS with the
// charged order in it.
func TestEndToEnd(t *testing.T) {
	ctx := context.Background()
	dbURL, err := testenv.FreshPostgres("postbox_examples_endtoend")
	if err != nil {
		t.Fatal(err)
	}
	natsURL := nats.DefaultURL
	if u := os.Getenv("POSTBOX_TEST_NATS"); u != "" {
		natsURL = u
	}
	nc, err := nats.Connect(natsURL)
	if err != nil {
		t.Fatalf("NATS is not reachable at %s (start nats-server -js, or set POSTBOX_TEST_NATS): %v", natsURL, err)
	}
	defer nc.Close()
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	// The program's stream and consumer, from a run before, would hold deliveries this database never saw.
	if err := js.DeleteStream(ctx, "SHOP"); err != nil && !errors.Is(err, jetstream.ErrStreamNotFound) {
		t.Fatal(err)
	}

	orderID, err := run(ctx, dbURL, natsURL)
	if err != nil {
		t.Fatal(err)
	}

	conn, err := pgx.Connect(ctx, dbURL)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	var charges, cents int
	if err := conn.QueryRow(ctx, "SELECT count(*), coalesce(sum(cents), 0) FROM charges WHERE order_id = $1", orderID).Scan(&charges, &cents); err != nil {
		t.Fatal(err)
	}
	if charges != 1 || cents != 1250 {
		t.Fatalf("order %s: %d charges for %d cents; want one of 1250", orderID, charges, cents)
	}
	stream, err := js.Stream(ctx, "SHOP")
	if err != nil {
		t.Fatal(err)
	}
	payment, err := stream.GetLastMsgForSubject(ctx, "payments")
	if err != nil {
		t.Fatalf("no payment event on NATS: %v", err)
	}
	if got := payment.Header.Get("ce-type"); got != "payment.charged" || string(payment.Data) != `{"order_id":"`+orderID+`","cents":1250}` {
		t.Fatalf("payment event on NATS: type %q, data %s", got, payment.Data)
	}
}

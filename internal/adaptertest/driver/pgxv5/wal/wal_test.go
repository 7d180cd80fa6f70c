package wal_test

import (
	"bytes"
	"context"
	"errors"
	"maps"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"go.uber.org/goleak"

	"github.com/postbox-go/postbox"
	"github.com/postbox-go/postbox/driver"
	"github.com/postbox-go/postbox/driver/pgxv5/wal"
	"github.com/postbox-go/postbox/internal/testenv"
)

var dbURL string

func TestMain(m *testing.M) {
	dbURL = testenv.OrExit(testenv.FreshPostgres("postbox_test_wal"))
	goleak.VerifyTestMain(m)
}

func TestEncodeDecodeRoundTrip(t *testing.T) {
	created := time.Date(2026, 1, 2, 3, 4, 5, 678000, time.UTC)
	for _, rec := range []driver.Record{
		{Message: driver.Message{ID: postbox.NewID(), Topic: "orders", Key: "o-1", Type: "order.created", Payload: []byte(`{"n":1}`),
			Headers: map[string]string{"traceparent": "00-abc-def-01", "tenant": "é"}, AvailableAt: created}, CreatedAt: created},
		{Message: driver.Message{ID: postbox.NewID(), Topic: "t", Type: "x", AvailableAt: created}, CreatedAt: created},
		{Message: driver.Message{ID: postbox.NewID(), Topic: "t", Type: "x", Payload: bytes.Repeat([]byte{0, 255}, 40000),
			AvailableAt: created.Add(time.Hour)}, CreatedAt: created},
	} {
		b, err := wal.Encode(rec)
		if err != nil {
			t.Fatal(err)
		}
		if b[0] != wal.Version {
			t.Errorf("first byte %d, want the version %d", b[0], wal.Version)
		}
		got, err := wal.Decode(b)
		if err != nil {
			t.Fatal(err)
		}
		if got.ID != rec.ID || got.Topic != rec.Topic || got.Key != rec.Key || got.Type != rec.Type ||
			!bytes.Equal(got.Payload, rec.Payload) || !maps.Equal(got.Headers, rec.Headers) ||
			!got.CreatedAt.Equal(rec.CreatedAt) || !got.AvailableAt.Equal(rec.AvailableAt) || got.Status != driver.StatusPending {
			t.Errorf("round trip changed the record:\n got %+v\nwant %+v", got.Message, rec.Message)
		}
		if overhead := len(b) - len(rec.Payload) - len(rec.Topic) - len(rec.Key) - len(rec.Type); len(rec.Headers) == 0 && overhead > 40 {
			t.Errorf("%d bytes besides the fields' own, want at most 40: the encoding should be compact", overhead)
		}
	}
}

func TestDecodeRefusesWhatItCannotRead(t *testing.T) {
	b, err := wal.Encode(driver.Record{Message: driver.Message{ID: postbox.NewID(), Topic: "t", Type: "x"}, CreatedAt: time.Now()})
	if err != nil {
		t.Fatal(err)
	}
	later := append([]byte{wal.SignedVersion + 1}, b[1:]...)
	if _, err := wal.Decode(later); !errors.Is(err, wal.ErrVersion) || !strings.Contains(err.Error(), "upgrade the relay") {
		t.Errorf("a later version: %v, want ErrVersion saying to upgrade the relay", err)
	}
	for n := 1; n < len(b); n++ {
		if _, err := wal.Decode(b[:n]); err == nil {
			t.Fatalf("a message cut to %d of %d bytes decoded without error", n, len(b))
		}
	}
}

func TestSlotNames(t *testing.T) {
	for n, want := range map[driver.Names]string{
		{Outbox: "postbox_outbox"}:               "postbox_postbox_outbox",
		{Schema: "Sales", Outbox: "Orders"}:      "postbox_sales_orders",
		{Outbox: strings.Repeat("a", 63)}:        "postbox_" + strings.Repeat("a", 55),
		{Schema: "app", Outbox: "orders_outbox"}: "postbox_app_orders_outbox",
	} {
		if got := wal.SlotName(n); got != want {
			t.Errorf("SlotName(%+v) = %q, want %q", n, got, want)
		}
	}
	if got := wal.Prefix(driver.Names{Schema: "app", Outbox: "o"}); got != "postbox:app.o" {
		t.Errorf("Prefix = %q", got)
	}
}

// The shared test server runs with wal_level = replica: the relay must refuse at start and say what to change.
func TestRelayRefusesWithoutLogicalWAL(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	pool, err := pgxpool.New(ctx, dbURL)
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Close()
	var level string
	if err := pool.QueryRow(ctx, "SHOW wal_level").Scan(&level); err != nil {
		t.Fatal(err)
	}
	if level == "logical" {
		t.Skip("the test server has wal_level = logical; the refusal needs another level")
	}
	client, err := postbox.NewClient(wal.New(pool), nil)
	if err != nil {
		t.Fatal(err)
	}
	relay, err := wal.NewRelay(pool, client, postbox.PublisherFunc(func(context.Context, []postbox.Record) error { return nil }), nil)
	if err != nil {
		t.Fatal(err)
	}
	err = relay.Run(ctx)
	if !errors.Is(err, wal.ErrRefused) || !strings.Contains(err.Error(), "wal_level = logical") {
		t.Fatalf("Run: %v, want ErrRefused naming wal_level = logical", err)
	}
}

// A client in WAL mode writes no outbox row for a message due now, and a row for a delayed one, which the table
// relay publishes when due; both leave the caller's transaction to commit or roll back.
func TestEnqueueWritesNoRow(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	pool, err := pgxpool.New(ctx, dbURL)
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Close()
	client, err := postbox.NewClient(wal.New(pool), &postbox.Config{Table: "wal_norow_outbox", InboxTable: "wal_norow_inbox"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := client.Migrate(ctx); err != nil {
		t.Fatal(err)
	}
	err = client.InTx(ctx, func(ctx context.Context, tx pgx.Tx) error {
		if _, err := client.Enqueue(ctx, tx, postbox.Message{Topic: "t", Type: "x"}); err != nil {
			return err
		}
		return client.EnqueueBatch(ctx, tx, []postbox.Message{{Topic: "t", Type: "x"}, {Topic: "t", Type: "x"},
			{Topic: "t", Type: "later", AvailableAt: time.Now().Add(time.Hour)}})
	})
	if err != nil {
		t.Fatal(err)
	}
	st, err := client.Stats(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if st.Pending != 1 || st.Scheduled != 1 {
		t.Errorf("outbox holds %d pending (%d scheduled), want only the delayed message", st.Pending, st.Scheduled)
	}
}

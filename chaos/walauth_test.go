package chaos

import (
	"context"
	"errors"
	"net/url"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pglogrepl"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/postbox-go/postbox"
	"github.com/postbox-go/postbox/driver"
	"github.com/postbox-go/postbox/driver/pgxv5/wal"
)

// walSecret signs the scenarios' WAL messages. Their clusters are fresh, so PUBLIC may execute
// pg_logical_emit_message, and a relay without a secret would refuse to run.
var walSecret = []byte("chaos-scenarios-wal-secret-0123456789")

// walDriver returns the WAL driver of the scenarios' clients, signing with walSecret.
func walDriver(pool *pgxpool.Pool) *wal.Driver {
	d, err := wal.NewWithConfig(pool, &wal.Config{Secret: walSecret})
	if err != nil {
		panic(err) // walSecret is long enough
	}
	return d
}

// TestWALForgedMessageNotPublished: a role that may not insert into the outbox, but may log in, cannot get a
// message published through the WAL relay. With a secret the relay skips the forged message, counts it and
// confirms past it; without one it refuses to run while PUBLIC may execute pg_logical_emit_message, and once that
// is revoked the role cannot write the message at all.
func TestWALForgedMessageNotPublished(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), deadline())
	defer cancel()
	cluster := ownCluster(ctx, t, walSettings...)
	pool, err := pgxpool.New(ctx, cluster.URL("chaos"))
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Close()
	names := driver.Names{Outbox: "walauth_outbox"}
	client, err := postbox.NewClient(walDriver(pool), &postbox.Config{Table: "walauth_outbox", InboxTable: "walauth_inbox"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := client.Migrate(ctx); err != nil {
		t.Fatal(err)
	}
	if err := wal.CreateSlot(ctx, pool, wal.SlotName(names)); err != nil {
		t.Fatal(err)
	}
	if _, err := pool.Exec(ctx, "CREATE ROLE intruder LOGIN"); err != nil {
		t.Fatal(err)
	}
	u, err := url.Parse(cluster.URL("chaos"))
	if err != nil {
		t.Fatal(err)
	}
	u.User = url.User("intruder")
	intruder, err := pgx.Connect(ctx, u.String())
	if err != nil {
		t.Fatal(err)
	}
	defer intruder.Close(ctx)
	if _, err := intruder.Exec(ctx, "INSERT INTO walauth_outbox (id, topic, type) VALUES (gen_random_uuid(), 'payments', 'refund.issued')"); !isDenied(err) {
		t.Fatalf("the intruder's INSERT into the outbox: %v, want permission denied (the table mode's boundary)", err)
	}
	forge := func(conn *pgx.Conn) error {
		b, err := wal.Encode(driver.Record{Message: driver.Message{ID: postbox.NewID(), Topic: "payments", Type: "refund.issued",
			Payload: []byte(`{"to":"intruder","amount":1000000}`)}, CreatedAt: time.Now()})
		if err != nil {
			t.Fatal(err)
		}
		_, err = conn.Exec(ctx, "SELECT pg_logical_emit_message(true, $1, $2::bytea)", wal.Prefix(names), b)
		return err
	}
	if err := forge(intruder); err != nil {
		t.Fatalf("PUBLIC may execute pg_logical_emit_message on a fresh cluster, yet the intruder could not: %v", err)
	}
	var afterForgery pglogrepl.LSN
	var lsn string
	if err := pool.QueryRow(ctx, "SELECT pg_current_wal_lsn()::text").Scan(&lsn); err != nil {
		t.Fatal(err)
	}
	if afterForgery, err = pglogrepl.ParseLSN(lsn); err != nil {
		t.Fatal(err)
	}
	enqueue := func(typ string) {
		t.Helper()
		if err := client.InTx(ctx, func(ctx context.Context, tx pgx.Tx) error {
			_, err := client.Enqueue(ctx, tx, postbox.Message{Topic: "orders", Type: typ})
			return err
		}); err != nil {
			t.Fatal(err)
		}
	}
	enqueue("order.created")

	var mu sync.Mutex
	var published []string
	pub := postbox.PublisherFunc(func(_ context.Context, b []postbox.Record) error {
		mu.Lock()
		defer mu.Unlock()
		for _, r := range b {
			published = append(published, r.Type)
		}
		return nil
	})
	relay, err := wal.NewRelay(pool, client, pub, &wal.RelayConfig{Secret: walSecret, StatusInterval: 100 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	rctx, stop := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- relay.Run(rctx) }()
	confirmedPast := func() bool {
		c, err := pglogrepl.ParseLSN(relay.Stats().Confirmed)
		return err == nil && c > afterForgery
	}
	for ctx.Err() == nil && (relay.Stats().Published < 1 || !confirmedPast()) {
		wait(ctx, 10*time.Millisecond)
	}
	stop()
	if err := <-done; err != nil {
		t.Fatalf("relay with a secret: %v", err)
	}
	st := relay.Stats()
	mu.Lock()
	got := slices.Clone(published)
	mu.Unlock()
	if slices.Contains(got, "refund.issued") {
		t.Errorf("a role refused INSERT on the outbox published a message through the WAL relay: published %v", got)
	}
	if !slices.Contains(got, "order.created") {
		t.Errorf("the client's signed message was not published by the deadline: published %v", got)
	}
	if st.Unverified != 1 {
		t.Errorf("Stats.Unverified = %d, want 1: the forged message must be counted", st.Unverified)
	}
	if !confirmedPast() {
		t.Errorf("the relay confirmed %s, not past the forged message's %s: a skipped message must not hold the slot", st.Confirmed, afterForgery)
	}

	// Without a secret the relay refuses while PUBLIC may execute the function, and says what to revoke.
	unsigned, err := wal.NewRelay(pool, client, pub, &wal.RelayConfig{StatusInterval: 100 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	err = unsigned.Run(ctx)
	if !errors.Is(err, wal.ErrRefused) || !strings.Contains(err.Error(), "REVOKE EXECUTE ON FUNCTION pg_logical_emit_message(boolean,text,bytea) FROM PUBLIC") {
		t.Fatalf("relay without a secret, PUBLIC may emit: %v, want ErrRefused giving the REVOKE", err)
	}
	for _, f := range mustPublicEmit(ctx, t, pool) {
		if _, err := pool.Exec(ctx, "REVOKE EXECUTE ON FUNCTION "+f+" FROM PUBLIC"); err != nil {
			t.Fatal(err)
		}
	}
	if open := mustPublicEmit(ctx, t, pool); len(open) > 0 {
		t.Fatalf("after the REVOKE, PUBLIC may still execute %v", open)
	}
	if err := forge(intruder); !isDenied(err) {
		t.Errorf("the intruder's pg_logical_emit_message after the REVOKE: %v, want permission denied", err)
	}
}

func mustPublicEmit(ctx context.Context, t *testing.T, pool *pgxpool.Pool) []string {
	t.Helper()
	open, err := wal.PublicEmit(ctx, pool)
	if err != nil {
		t.Fatal(err)
	}
	return open
}

func isDenied(err error) bool {
	var pgErr *pgconn.PgError
	return errors.As(err, &pgErr) && pgErr.Code == "42501"
}

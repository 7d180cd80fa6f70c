package chaos

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/postbox-go/postbox"
)

// TestLedgerCounts: the ledger sees each kind of failure the scenarios look for, so that a scenario's clean line
// means something.
func TestLedgerCounts(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	pool, err := pgxpool.New(ctx, sharedDB)
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Close()
	cfg := roleConfig{Prefix: "ledgertest"}
	client, err := cfg.client(pool, nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := client.Migrate(ctx); err != nil {
		t.Fatal(err)
	}
	l, err := cfg.ledger()
	if err != nil {
		t.Fatal(err)
	}
	if err := l.Migrate(ctx, pool); err != nil {
		t.Fatal(err)
	}

	effected, twice, dead, failed, lost, phantom := postbox.NewID(), postbox.NewID(), postbox.NewID(), postbox.NewID(), postbox.NewID(), postbox.NewID()
	err = pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
		if err := l.Commit(ctx, tx, []string{effected, twice, dead, failed, lost}); err != nil {
			return err
		}
		for _, id := range []string{effected, twice, twice, phantom} {
			if err := l.Effect(ctx, tx, id, "", "c"); err != nil {
				return err
			}
		}
		if _, err := tx.Exec(ctx, "INSERT INTO "+l.outbox+" (id, topic, type, payload, status, available_at, created_at)"+
			" VALUES ($1, 't', 't', '', 'dead', now(), now())", dead); err != nil {
			return err
		}
		_, err := tx.Exec(ctx, "INSERT INTO "+l.inbox+" (consumer, message_id, status, received_at) VALUES ('c', $1, 'failed', now())", failed)
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	l.Published(effected, effected, effected, twice)

	got, err := l.Tally(ctx, pool)
	if err != nil {
		t.Fatal(err)
	}
	want := Tally{Committed: 5, Effects: 4, Lost: 1, Parked: 2, DuplicatesPublished: 2, DuplicateEffects: 1, Phantoms: 1, Unpublished: 3}
	if got != want {
		t.Fatalf("tally %+v, want %+v", got, want)
	}
	if n, err := l.Remaining(ctx, pool); err != nil || n != 1 {
		t.Fatalf("Remaining = %d, %v; want 1 (the lost event)", n, err)
	}
	if line := got.Line(); line != "lost=1 duplicates_published=2 duplicate_effects=1" {
		t.Fatalf("line %q", line)
	}

	// One consumer handles key k's messages a, b, c as b, a, c: one effect out of order. Another handles them in
	// order, and a third handles messages without a key in any order.
	a, b, c := postbox.NewID(), postbox.NewID(), postbox.NewID()
	effects := []struct{ id, key, consumer string }{
		{b, "k", "unordered"}, {a, "k", "unordered"}, {c, "k", "unordered"},
		{a, "k", "ordered"}, {b, "k", "ordered"}, {c, "k", "ordered"},
		{c, "", "nokey"}, {a, "", "nokey"},
	}
	err = pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
		for _, e := range effects {
			if err := l.Effect(ctx, tx, e.id, e.key, e.consumer); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if n, err := l.OutOfOrder(ctx, pool); err != nil || n != 1 {
		t.Fatalf("OutOfOrder = %d, %v; want 1", n, err)
	}
}

// TestLedgerNames: table names are checked before they reach SQL.
func TestLedgerNames(t *testing.T) {
	for _, name := range []string{"", "Upper", `x"; DROP TABLE y; --`, strings.Repeat("a", 42)} {
		if _, err := NewLedger(name, "o", "i"); err == nil {
			t.Errorf("NewLedger(%q) accepted the name", name)
		}
	}
}

package pgxv5_test

import (
	"context"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/postbox-go/postbox"
	"github.com/postbox-go/postbox/driver/drivertest"
	"github.com/postbox-go/postbox/driver/pgxv5"
)

// BenchmarkOperatorMillion times what an operator's page calls on an outbox of 1,000,000 pending and 100,000 dead
// messages over 20 topics, beside Stats, which counts every row:
//
//	go test -run '^$' -bench OperatorMillion -benchtime 20x ./driver/pgxv5/
func BenchmarkOperatorMillion(b *testing.B) {
	ctx := context.Background()
	pool, err := pgxpool.New(ctx, dbURL)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(pool.Close)
	c, err := postbox.NewClient(pgxv5.New(pool), drivertest.Tables(nil))
	if err != nil {
		b.Fatal(err)
	}
	if _, err := c.Migrate(ctx); err != nil {
		b.Fatal(err)
	}
	table := c.Config().Table
	b.Cleanup(func() {
		_ = c.InTx(ctx, func(ctx context.Context, tx pgx.Tx) error {
			_, err := tx.Exec(ctx, "DROP TABLE "+table+", "+table+"_paused, "+table+"_migrations, "+c.Config().InboxTable+", "+c.Config().InboxTable+"_failures")
			return err
		})
	})
	// IDs in time order, as UUIDv7s are; 'pending' rows are the newest, as they are in a live outbox.
	seed := "INSERT INTO " + table + " (id, topic, type, payload, available_at, created_at, status, attempts, last_error)" +
		" SELECT (lpad(to_hex(i), 8, '0') || '-0000-7000-8000-000000000000')::uuid, 'topic-' || (i % 20), 'order.created'," +
		" '\\x7b7d'::bytea, now() - interval '1 hour' + i * interval '1 millisecond', now() - interval '1 hour' + i * interval '1 millisecond'," +
		" CASE WHEN i <= 100000 THEN 'dead' ELSE 'pending' END, CASE WHEN i <= 100000 THEN 20 ELSE 0 END," +
		" CASE WHEN i <= 100000 THEN 'timeout after 5s' ELSE '' END FROM generate_series(1, 1100000) AS i"
	if err := c.InTx(ctx, func(ctx context.Context, tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, seed); err != nil {
			return err
		}
		_, err := tx.Exec(ctx, "ANALYZE "+table)
		return err
	}); err != nil {
		b.Fatal(err)
	}
	for _, bc := range []struct {
		name string
		fn   func() error
	}{
		{"Overview", func() error { _, err := c.Overview(ctx, 0); return err }},
		{"Overview100k", func() error { _, err := c.Overview(ctx, 100_000); return err }},
		{"CountDeadByError", func() error {
			_, err := c.CountDead(ctx, postbox.DeadFilter{ErrorContains: "timeout"}, 0)
			return err
		}},
		{"ListDeadNewestPage", func() error {
			_, err := c.ListDead(ctx, postbox.DeadFilter{All: true, Newest: true, Limit: 50})
			return err
		}},
		{"ListDeadTopicPage", func() error {
			_, err := c.ListDead(ctx, postbox.DeadFilter{Topic: "topic-7", Limit: 50})
			return err
		}},
		{"Stats", func() error { _, err := c.Stats(ctx); return err }},
	} {
		b.Run(bc.name, func(b *testing.B) {
			for b.Loop() {
				if err := bc.fn(); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

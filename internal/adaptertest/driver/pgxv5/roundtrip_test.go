package pgxv5_test

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/postbox-go/postbox"
	"github.com/postbox-go/postbox/driver/pgxv5"
)

// statementCounter counts the statements a pool sends.
type statementCounter struct{ n atomic.Int64 }

func (c *statementCounter) TraceQueryStart(ctx context.Context, _ *pgx.Conn, _ pgx.TraceQueryStartData) context.Context {
	c.n.Add(1)
	return ctx
}

func (c *statementCounter) TraceQueryEnd(context.Context, *pgx.Conn, pgx.TraceQueryEndData) {}

// EnqueueBatch writes any number of messages with one statement: one round trip, however large the batch.
func TestEnqueueBatchIsOneStatement(t *testing.T) {
	ctx := context.Background()
	cfg, err := pgxpool.ParseConfig(dbURL)
	if err != nil {
		t.Fatal(err)
	}
	counter := &statementCounter{}
	cfg.ConnConfig.Tracer = counter
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Close()
	table := fmt.Sprintf("pbt_batch_%x", time.Now().UnixNano()) // a fresh table on every run
	c, err := postbox.NewClient(pgxv5.New(pool), &postbox.Config{Table: table, InboxTable: table + "_inbox"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.Migrate(ctx); err != nil {
		t.Fatal(err)
	}
	for _, size := range []int{1, 100, 1500} {
		msgs := make([]postbox.Message, size)
		for i := range msgs {
			msgs[i] = postbox.Message{Topic: "orders", Key: fmt.Sprint("k", i%7), Type: "order.created",
				Payload: []byte(`{"n":1}`), Headers: map[string]string{"traceparent": "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"}}
		}
		tx, err := pool.Begin(ctx)
		if err != nil {
			t.Fatal(err)
		}
		before := counter.n.Load()
		if err := c.EnqueueBatch(ctx, tx, msgs); err != nil {
			t.Fatal(err)
		}
		sent := counter.n.Load() - before
		if err := tx.Commit(ctx); err != nil {
			t.Fatal(err)
		}
		if sent != 1 {
			t.Errorf("EnqueueBatch of %d messages sent %d statements, want 1", size, sent)
		}
	}
	if st, err := c.Stats(ctx); err != nil || st.Pending != 1601 {
		t.Fatalf("Stats = %+v, %v; want the 1601 enqueued messages pending", st, err)
	}
}

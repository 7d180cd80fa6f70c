package pgxv5_test

import (
	"context"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/postbox-go/postbox"
	"github.com/postbox-go/postbox/driver/drivertest"
	"github.com/postbox-go/postbox/driver/pgxv5"
	"github.com/postbox-go/postbox/postboxtest"
)

// A claim and its settle each go out as one batch. When either fails, the transaction must end and its
// connection go back to the pool (or be closed), and the records must stay pending.
func TestPipelinedClaimAndSettleFailures(t *testing.T) {
	ctx := context.Background()
	pool, err := pgxpool.New(ctx, dbURL)
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Close()
	drv := pgxv5.New(pool)

	// A claim on a table that does not exist fails inside the batch.
	missing, err := postbox.NewClient(drv, &postbox.Config{Table: "pbt_missing_outbox", InboxTable: "pbt_missing_inbox"})
	if err != nil {
		t.Fatal(err)
	}
	r, err := postbox.NewRelay(missing, &postboxtest.Recorder{}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := r.RunOnce(ctx); err == nil || !strings.Contains(err.Error(), "pbt_missing_outbox") {
		t.Fatalf("claim on a missing table: %v, want the database's error", err)
	}
	if n := pool.Stat().AcquiredConns(); n != 0 {
		t.Fatalf("%d connections still held after a failed claim", n)
	}

	// A settle the database refuses (a trigger deferred to COMMIT here, which refuses the settle whether the claim
	// or the settle deleted the rows) rolls back: nothing is lost, and the connection is free.
	c := drivertest.Client(t, drv, nil)
	table := c.Config().Table
	if _, err := pool.Exec(ctx, `CREATE FUNCTION pbt_refuse() RETURNS trigger LANGUAGE plpgsql AS
		$$ BEGIN RAISE EXCEPTION 'settle refused'; END $$`); err != nil {
		t.Fatal(err)
	}
	defer pool.Exec(context.Background(), "DROP FUNCTION pbt_refuse() CASCADE")
	if _, err := pool.Exec(ctx, `CREATE CONSTRAINT TRIGGER pbt_refuse AFTER DELETE ON "`+table+`"
		DEFERRABLE INITIALLY DEFERRED FOR EACH ROW EXECUTE FUNCTION pbt_refuse()`); err != nil {
		t.Fatal(err)
	}
	if err := c.InTx(ctx, func(ctx context.Context, tx pgx.Tx) error {
		return c.EnqueueBatch(ctx, tx, []postbox.Message{{Topic: "orders", Type: "a"}, {Topic: "orders", Type: "b"}})
	}); err != nil {
		t.Fatal(err)
	}
	rec := &postboxtest.Recorder{}
	r, err = postbox.NewRelay(c, rec, nil)
	if err != nil {
		t.Fatal(err)
	}
	if n, err := r.RunOnce(ctx); n != 2 || err == nil || !strings.Contains(err.Error(), "settle refused") {
		t.Fatalf("RunOnce = %d, %v; want the settle's error for the 2 records", n, err)
	}
	if n := pool.Stat().AcquiredConns(); n != 0 {
		t.Fatalf("%d connections still held after a failed settle", n)
	}
	if st, err := c.Stats(ctx); err != nil || st.Pending != 2 {
		t.Fatalf("after a failed settle: %+v, %v; want both records pending again", st, err)
	}
	if _, err := pool.Exec(ctx, `DROP TRIGGER pbt_refuse ON "`+table+`"`); err != nil {
		t.Fatal(err)
	}
	if n, err := r.RunOnce(ctx); n != 2 || err != nil {
		t.Fatalf("RunOnce after the trigger went = %d, %v", n, err)
	}
	if st, err := c.Stats(ctx); err != nil || st.Pending != 0 || rec.Distinct() != 2 {
		t.Fatalf("after settling: %+v, %v, %d published", st, err, rec.Distinct())
	}
}

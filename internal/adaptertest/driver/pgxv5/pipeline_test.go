package pgxv5_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

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

// roundTrips counts what a pool sends to the server: each batch once, each statement outside a batch once.
type roundTrips struct {
	n       atomic.Int64
	inBatch atomic.Int32
}

func (c *roundTrips) TraceQueryStart(ctx context.Context, _ *pgx.Conn, _ pgx.TraceQueryStartData) context.Context {
	if c.inBatch.Load() == 0 {
		c.n.Add(1)
	}
	return ctx
}
func (c *roundTrips) TraceQueryEnd(context.Context, *pgx.Conn, pgx.TraceQueryEndData) {}
func (c *roundTrips) TraceBatchStart(ctx context.Context, _ *pgx.Conn, _ pgx.TraceBatchStartData) context.Context {
	c.n.Add(1)
	c.inBatch.Add(1)
	return ctx
}
func (c *roundTrips) TraceBatchQuery(context.Context, *pgx.Conn, pgx.TraceBatchQueryData) {}
func (c *roundTrips) TraceBatchEnd(context.Context, *pgx.Conn, pgx.TraceBatchEndData) {
	c.inBatch.Add(-1)
}

// A relay draining a backlog settles each full batch and claims the next one in the same round trip, written-back
// failures included, and still publishes every message.
func TestRelaySettlesAndClaimsInOneRoundTrip(t *testing.T) {
	ctx := context.Background()
	cfg, err := pgxpool.ParseConfig(dbURL)
	if err != nil {
		t.Fatal(err)
	}
	trips := &roundTrips{}
	cfg.ConnConfig.Tracer = trips
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Close()
	c := drivertest.Client(t, pgxv5.New(pool), nil)
	const n, batch = 100, 10
	payload := func(i int) []byte { return []byte(fmt.Sprintf(`{"n":%d}`, i)) }
	enqueueOrders(t, c, n, payload)

	for _, failing := range []bool{false, true} {
		rec := &postboxtest.Recorder{}
		if failing {
			// The messages whose number ends in 7 fail once: the settle writes each back, with the next claim in the
			// same batch.
			var mu sync.Mutex
			seen := map[string]bool{}
			rec.Fail = func(r postbox.Record) error {
				mu.Lock()
				defer mu.Unlock()
				if r.Payload[len(r.Payload)-2] == '7' && !seen[r.ID] {
					seen[r.ID] = true
					return errors.New("refused once")
				}
				return nil
			}
			enqueueOrders(t, c, n, payload)
		}
		// No look after the backlog while counting; short ones when failures come back a moment later.
		rcfg := &postbox.RelayConfig{BatchSize: batch, Workers: 1, DisableListen: true, PollInterval: time.Minute,
			RecheckDelay: time.Minute, BackoffBase: time.Millisecond, BackoffMax: time.Millisecond}
		if failing {
			rcfg.PollInterval, rcfg.RecheckDelay = 10*time.Millisecond, time.Millisecond
		}
		relay, err := postbox.NewRelay(c, rec, rcfg)
		if err != nil {
			t.Fatal(err)
		}
		runCtx, stop := context.WithCancel(ctx)
		done := make(chan error, 1)
		before := trips.n.Load()
		go func() { done <- relay.Run(runCtx) }()
		ok := rec.WaitDistinct(ctx, n, 30*time.Second)
		stop()
		if err := <-done; err != nil || !ok {
			t.Fatalf("failing=%v: %d of %d published (%v)", failing, rec.Distinct(), n, err)
		}
		if failing {
			continue // the retries' claims and backoffs make the count depend on timing
		}
		// Ten full batches: the first claim, then a settle with the next claim for each (the last finding none),
		// and a claim finding nothing, each ending its empty transaction. Settling and claiming apart takes 23.
		if got := trips.n.Load() - before; got > 16 {
			t.Errorf("draining %d batches took %d round trips, want at most 16: each settle carries the next claim", n/batch, got)
		}
	}
	if st, err := c.Stats(ctx); err != nil || st.Pending != 0 || st.Dead != 0 {
		t.Fatalf("after draining: %+v, %v; want nothing pending or dead", st, err)
	}
}

// A settle refused at COMMIT while it carries the next claim ends the transaction with nothing claimed: the batch
// is pending again, no connection stays held, and the relay drains everything once the database accepts.
func TestRelayChainedSettleRefused(t *testing.T) {
	ctx := context.Background()
	pool := newPool(t)
	c := drivertest.Client(t, pgxv5.New(pool), nil)
	table := c.Config().Table
	if _, err := pool.Exec(ctx, `CREATE FUNCTION pbt_refuse_chain() RETURNS trigger LANGUAGE plpgsql AS
		$$ BEGIN RAISE EXCEPTION 'settle refused'; END $$`); err != nil {
		t.Fatal(err)
	}
	defer pool.Exec(context.Background(), "DROP FUNCTION pbt_refuse_chain() CASCADE")
	if _, err := pool.Exec(ctx, `CREATE CONSTRAINT TRIGGER pbt_refuse_chain AFTER DELETE ON "`+table+`"
		DEFERRABLE INITIALLY DEFERRED FOR EACH ROW EXECUTE FUNCTION pbt_refuse_chain()`); err != nil {
		t.Fatal(err)
	}
	const n = 30
	enqueueOrders(t, c, n, nil)
	rec := &postboxtest.Recorder{}
	relay, err := postbox.NewRelay(c, rec, &postbox.RelayConfig{BatchSize: 10, Workers: 1, DisableListen: true,
		PollInterval: 10 * time.Millisecond, RecheckDelay: time.Millisecond, ErrorBackoffBase: time.Millisecond,
		ErrorBackoffMax: 5 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	runCtx, stop := context.WithCancel(ctx)
	defer stop()
	done := make(chan error, 1)
	go func() { done <- relay.Run(runCtx) }()
	deadline := time.Now().Add(30 * time.Second)
	for relay.Stats().Errors < 3 && time.Now().Before(deadline) {
		time.Sleep(5 * time.Millisecond)
	}
	if st := relay.Stats(); st.Errors < 3 || st.Batches != 0 {
		t.Fatalf("relay with every settle refused: %+v; want failed settles and none settled", st)
	}
	if _, err := pool.Exec(ctx, `DROP TRIGGER pbt_refuse_chain ON "`+table+`"`); err != nil {
		t.Fatal(err)
	}
	ok := rec.WaitDistinct(ctx, n, 30*time.Second)
	stop()
	if err := <-done; err != nil || !ok {
		t.Fatalf("after the trigger went: %d of %d published (%v)", rec.Distinct(), n, err)
	}
	if n := pool.Stat().AcquiredConns(); n != 0 {
		t.Fatalf("%d connections still held after the relay stopped", n)
	}
	if st, err := c.Stats(ctx); err != nil || st.Pending != 0 {
		t.Fatalf("after draining: %+v, %v; want nothing pending", st, err)
	}
}

// stopAfterFirstBatch is a RelayObserver that cancels a relay's run once the first batch is settled, which for a
// full batch is after the worker took the next claim with the settle.
type stopAfterFirstBatch struct{ stop context.CancelFunc }

func (s stopAfterFirstBatch) ObserveBatch(context.Context, postbox.BatchReport) { s.stop() }

// A relay stopped while it holds a claim taken with the last settle publishes that batch before Run returns, as
// it does the batch in flight: rolling it back would make the next relay claim the same rows again.
func TestRelayStoppingPublishesClaimTakenAhead(t *testing.T) {
	ctx := context.Background()
	c := drivertest.Client(t, pgxv5.New(newPool(t)), nil)
	const n, batch = 50, 10
	enqueueOrders(t, c, n, nil)
	runCtx, stop := context.WithCancel(ctx)
	defer stop()
	rec := &postboxtest.Recorder{}
	relay, err := postbox.NewRelay(c, rec, &postbox.RelayConfig{BatchSize: batch, Workers: 1, DisableListen: true,
		Observer: stopAfterFirstBatch{stop: stop}})
	if err != nil {
		t.Fatal(err)
	}
	if err := relay.Run(runCtx); err != nil {
		t.Fatal(err)
	}
	st, err := c.Stats(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if got := rec.Distinct(); got != 2*batch || st.Pending != n-2*batch || relay.Stats().Published != 2*batch {
		t.Fatalf("stopped after the first batch: %d published (relay counted %d), %d pending; want the first batch and the one claimed with its settle published (%d), %d pending",
			got, relay.Stats().Published, st.Pending, 2*batch, n-2*batch)
	}
}

// newPool returns a pool on the test database, closed when the test ends.
func newPool(t *testing.T) *pgxpool.Pool {
	t.Helper()
	pool, err := pgxpool.New(context.Background(), dbURL)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	return pool
}

// enqueueOrders enqueues n messages of topic orders in one transaction, payload(i) the payload of the i-th (nil
// for none).
func enqueueOrders(t *testing.T, c *postbox.Client[pgx.Tx], n int, payload func(i int) []byte) {
	t.Helper()
	msgs := make([]postbox.Message, n)
	for i := range msgs {
		msgs[i] = postbox.Message{Topic: "orders", Type: "order.created"}
		if payload != nil {
			msgs[i].Payload = payload(i)
		}
	}
	ctx := context.Background()
	if err := c.InTx(ctx, func(ctx context.Context, tx pgx.Tx) error { return c.EnqueueBatch(ctx, tx, msgs) }); err != nil {
		t.Fatal(err)
	}
}

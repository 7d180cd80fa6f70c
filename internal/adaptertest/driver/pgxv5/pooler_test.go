package pgxv5_test

import (
	"context"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/postbox-go/postbox"
	"github.com/postbox-go/postbox/driver"
	"github.com/postbox-go/postbox/driver/drivertest"
	"github.com/postbox-go/postbox/driver/pgxv5"
	"github.com/postbox-go/postbox/internal/testenv"
)

// The Pooler tests run the driver through PgBouncer in transaction mode, configured as the package documentation
// says: the exec query mode for the pool, and LISTEN on a direct connection.

const execMode = "default_query_exec_mode=exec"

// poolerDriver returns a driver whose pool goes through PgBouncer, and which listens on PostgreSQL itself.
func poolerDriver(t *testing.T, pooled string) *pgxv5.Driver {
	pool, err := pgxpool.New(context.Background(), pooled)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	direct, err := pgx.ParseConfig(dbURL)
	if err != nil {
		t.Fatal(err)
	}
	return pgxv5.New(pool).WithListenConfig(direct)
}

func TestPoolerConformance(t *testing.T) {
	pooled := testenv.ThroughPgBouncer(t, dbURL, execMode)
	drivertest.Exercise(t, func(t *testing.T) driver.Driver[pgx.Tx] { return poolerDriver(t, pooled) }, sqlHooks)
}

func TestPoolerPartitions(t *testing.T) {
	pooled := testenv.ThroughPgBouncer(t, dbURL, execMode)
	drivertest.ExercisePartitions(t, func(t *testing.T) driver.Driver[pgx.Tx] { return poolerDriver(t, pooled) }, sqlHooks)
}

func TestPoolerKilledRelay(t *testing.T) {
	pooled := testenv.ThroughPgBouncer(t, dbURL, execMode)
	drivertest.ExerciseKilledRelay(t, poolerDriver(t, pooled), "DATABASE_URL="+pooled)
}

// TestPoolerStatementCacheErrorNamesTheFix: with pgx's default statement cache, a second client meets the first
// one's prepared statement on the server connection PgBouncer hands it, and the error says what to set.
func TestPoolerStatementCacheErrorNamesTheFix(t *testing.T) {
	pooled := testenv.ThroughPgBouncer(t, dbURL, "")
	ctx := context.Background()
	cfg := &postbox.Config{Table: "pooler_cache_outbox", InboxTable: "pooler_cache_inbox"}
	drivertest.Client(t, newDriver(t), cfg) // migrated directly
	var errs []error
	for range 3 {
		pool, err := pgxpool.New(ctx, pooled)
		if err != nil {
			t.Fatal(err)
		}
		defer pool.Close()
		c, err := postbox.NewClient(pgxv5.New(pool), cfg)
		if err != nil {
			t.Fatal(err)
		}
		err = c.InTx(ctx, func(ctx context.Context, tx pgx.Tx) error {
			_, err := c.Enqueue(ctx, tx, postbox.Message{Topic: "orders", Type: "order.created", Payload: []byte("{}")})
			return err
		})
		if err != nil {
			errs = append(errs, err)
		}
	}
	if len(errs) == 0 {
		t.Fatal("three clients enqueued through PgBouncer with the statement cache and none met another's prepared statement; " +
			"is PgBouncer in transaction mode?")
	}
	t.Logf("the first error: %v", errs[0])
	for _, err := range errs {
		if !strings.Contains(err.Error(), execMode) {
			t.Errorf("enqueue through a transaction pooler failed with %q, which does not name the fix %s", err, execMode)
		}
	}
}

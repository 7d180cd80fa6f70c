package pgxv5_test

import (
	"context"
	"fmt"
	"os"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"go.uber.org/goleak"

	"github.com/postbox-go/postbox/driver"
	"github.com/postbox-go/postbox/driver/drivertest"
	"github.com/postbox-go/postbox/driver/pgxv5"
	"github.com/postbox-go/postbox/internal/testenv"
	"github.com/postbox-go/postbox/internal/testenv/pgxenv"
)

var dbURL string

func TestMain(m *testing.M) {
	if drivertest.IsChild() {
		os.Exit(runChild())
	}
	dbURL = testenv.OrExit(testenv.FreshPostgres("postbox_test_pgxv5"))
	goleak.VerifyTestMain(m)
}

func newDriver(t *testing.T) driver.Driver[pgx.Tx] {
	pool, err := pgxpool.New(context.Background(), dbURL)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	return pgxv5.New(pool)
}

var sqlHooks = pgxenv.Hooks

func TestConformance(t *testing.T) {
	drivertest.Exercise(t, newDriver, sqlHooks)
}

func TestPartitions(t *testing.T) {
	drivertest.ExercisePartitions(t, newDriver, sqlHooks)
}

func TestKilledRelay(t *testing.T) {
	drivertest.ExerciseKilledRelay(t, newDriver(t), "DATABASE_URL="+dbURL)
}

func runChild() int {
	pool, err := pgxpool.New(context.Background(), os.Getenv("DATABASE_URL"))
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer pool.Close()
	return drivertest.RunChild(pgxv5.New(pool))
}

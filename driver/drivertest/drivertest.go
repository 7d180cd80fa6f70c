// Package drivertest is the conformance suite every Postbox store driver passes. A driver's test file is a few
// lines:
//
//	func TestConformance(t *testing.T) {
//		drivertest.Exercise(t, func(t *testing.T) driver.Driver[pgx.Tx] { return pgxv5.New(pool(t)) },
//			drivertest.Options[pgx.Tx]{Exec: exec, QueryInt: queryInt})
//	}
//
// Each test makes tables of its own, so the database may be shared by every test of one package.
package drivertest

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/postbox-go/postbox"
	"github.com/postbox-go/postbox/driver"
	"github.com/postbox-go/postbox/postboxtest"
)

// NewDriver returns a driver on the database under test. It may register cleanups on t.
type NewDriver[TTx any] func(t *testing.T) driver.Driver[TTx]

// Options give the suite what it cannot do through the driver interface: run a user's own SQL in a transaction of
// the driver's type, as a handler does. The queries take no arguments, so placeholders never differ.
type Options[TTx any] struct {
	// Exec runs a statement in tx. The inbox tests create and write a table of business rows with it.
	Exec func(ctx context.Context, tx TTx, query string) error
	// QueryInt runs a query in tx that returns one row of one integer, such as a count.
	QueryInt func(ctx context.Context, tx TTx, query string) (int64, error)
}

// Exercise runs every conformance test against the driver newDriver makes.
func Exercise[TTx any](t *testing.T, newDriver NewDriver[TTx], opts Options[TTx]) {
	if opts.Exec == nil || opts.QueryInt == nil {
		t.Fatal("drivertest: Options.Exec and Options.QueryInt are required; implement them with your driver's transaction type")
	}
	t.Run("Migrate", func(t *testing.T) { testMigrate(t, newDriver) })
	t.Run("Store", func(t *testing.T) { testStore(t, newDriver, opts) })
	t.Run("Enqueue", func(t *testing.T) { testEnqueue(t, newDriver) })
	t.Run("InvalidInput", func(t *testing.T) { testInvalid(t, newDriver) })
	t.Run("Relay", func(t *testing.T) { testRelay(t, newDriver) })
	t.Run("Failures", func(t *testing.T) { testFailures(t, newDriver) })
	t.Run("Operations", func(t *testing.T) { testOperations(t, newDriver) })
	t.Run("Operator", func(t *testing.T) { testOperator(t, newDriver, opts) })
	t.Run("Stats", func(t *testing.T) { testStats(t, newDriver) })
	t.Run("ConcurrentRelays", func(t *testing.T) { testConcurrentRelays(t, newDriver) })
	t.Run("Inbox", func(t *testing.T) { testInbox(t, newDriver, opts) })
	t.Run("Ordered", func(t *testing.T) { testOrdered(t, newDriver) })
	t.Run("Wake", func(t *testing.T) { testWake(t, newDriver) })
	t.Run("Settle", func(t *testing.T) { testSettle(t, newDriver) })
	t.Run("Registry", func(t *testing.T) { testRegistry(t, newDriver) })
	t.Run("Cleanup", func(t *testing.T) { testCleanup(t, newDriver) })
	t.Run("Heartbeats", func(t *testing.T) { testHeartbeats(t, newDriver) })
	t.Run("SQLAPI", func(t *testing.T) { testSQLAPI(t, newDriver, opts) })
}

var tableSeq atomic.Int64

// Tables returns a Config naming tables no other test uses, with the given clock (nil for the system clock).
func Tables(clock postbox.Clock) *postbox.Config {
	n := tableSeq.Add(1)
	suffix := fmt.Sprintf("%d_%d", time.Now().UnixNano()%1_000_000, n)
	return &postbox.Config{Table: "pbt_outbox_" + suffix, InboxTable: "pbt_inbox_" + suffix, Clock: clock}
}

// Client returns a migrated client on fresh tables.
func Client[TTx any](t *testing.T, drv driver.Driver[TTx], cfg *postbox.Config) *postbox.Client[TTx] {
	t.Helper()
	if cfg == nil {
		cfg = Tables(nil)
	}
	c, err := postbox.NewClient(drv, cfg)
	if err != nil {
		t.Fatalf("NewClient: %v", err)
	}
	if _, err := c.Migrate(context.Background()); err != nil {
		t.Fatalf("Migrate: %v", err)
	}
	return c
}

// enqueue commits msgs in one transaction.
func enqueue[TTx any](t *testing.T, c *postbox.Client[TTx], msgs ...postbox.Message) {
	t.Helper()
	err := c.InTx(context.Background(), func(ctx context.Context, tx TTx) error {
		return c.EnqueueBatch(ctx, tx, msgs)
	})
	if err != nil {
		t.Fatalf("enqueue: %v", err)
	}
}

// messages returns n valid messages on topic.
func messages(n int, topic string) []postbox.Message {
	out := make([]postbox.Message, n)
	for i := range out {
		out[i] = postbox.Message{Topic: topic, Type: "test.event", Key: fmt.Sprintf("k%d", i%7),
			Payload: []byte(fmt.Sprintf(`{"n":%d}`, i))}
	}
	return out
}

// poisonRecorder returns a Recorder that fails every message on the topic "poison" as permanent, so the relay
// parks it as dead at once, and acknowledges the rest.
func poisonRecorder() *postboxtest.Recorder {
	return &postboxtest.Recorder{Fail: func(r postbox.Record) error {
		if r.Topic == "poison" {
			return postbox.Permanent(errors.New("rejected"))
		}
		return nil
	}}
}

// relay returns a relay with a short poll interval for tests.
func relay[TTx any](t *testing.T, c *postbox.Client[TTx], pub postbox.Publisher, cfg *postbox.RelayConfig) *postbox.Relay {
	t.Helper()
	if cfg == nil {
		cfg = &postbox.RelayConfig{}
	}
	if cfg.PollInterval == 0 {
		cfg.PollInterval = 10 * time.Millisecond
	}
	r, err := postbox.NewRelay(c, pub, cfg)
	if err != nil {
		t.Fatalf("NewRelay: %v", err)
	}
	return r
}

// drain runs r.RunOnce until a claim comes back empty and returns how many records it claimed in all.
func drain(t *testing.T, r *postbox.Relay) int {
	t.Helper()
	total := 0
	for {
		n, err := r.RunOnce(context.Background())
		if err != nil {
			t.Fatalf("RunOnce: %v", err)
		}
		if n == 0 {
			return total
		}
		total += n
	}
}

func stats[TTx any](t *testing.T, c *postbox.Client[TTx]) postbox.Stats {
	t.Helper()
	s, err := c.Stats(context.Background())
	if err != nil {
		t.Fatalf("Stats: %v", err)
	}
	return s
}

func ids(msgs []postbox.Message) []string {
	out := make([]string, len(msgs))
	for i, m := range msgs {
		out[i] = m.ID
	}
	return out
}

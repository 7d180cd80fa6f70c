package chaos

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/postbox-go/postbox"
	"github.com/postbox-go/postbox/driver"
	"github.com/postbox-go/postbox/driver/pgxv5/wal"
)

// walSettings make a cluster of the scenario's own able to serve WAL relays.
var walSettings = []string{"wal_level = logical", "max_replication_slots = 10", "max_wal_senders = 10"}

// runWALRelay relays the scenario's WAL messages to the broker until ctx ends, calling acked with the IDs of each
// batch the broker acknowledged before the relay confirms its position.
func runWALRelay(ctx context.Context, cfg roleConfig, log *slog.Logger, acked func(ids []string)) error {
	pool, err := pgxpool.New(ctx, cfg.DB)
	if err != nil {
		return err
	}
	defer pool.Close()
	client, err := cfg.client(pool, log)
	if err != nil {
		return err
	}
	pub, closePub, err := publisher(cfg, log)
	if err != nil {
		return err
	}
	defer closePub()
	relay, err := wal.NewRelay(pool, client, ackLog{pub, acked}, &wal.RelayConfig{Secret: walSecret,
		BatchSize: cfg.BatchSize, PublishTimeout: 3 * time.Second, MaxAttempts: cfg.MaxAttempts,
		BackoffBase: 100 * time.Millisecond, BackoffMax: 100 * time.Millisecond, ErrorBackoffMax: 500 * time.Millisecond,
		StatusInterval: time.Second, HeartbeatInterval: 2 * time.Second, SlotCheckInterval: time.Second,
	})
	if err != nil {
		return err
	}
	return relay.Run(ctx)
}

// TestWALRelayKilled: clients write their messages into the WAL and relay processes read them from the outbox's
// replication slot, while relays are killed with SIGKILL two at a time (half of the kills right after a batch the
// broker acknowledged, before the relay confirms its position) and the scenario's PostgreSQL cluster is stopped
// with pg_ctl -m immediate and started again. Nothing committed is lost, nothing from a rolled-back transaction is
// published, no effect happens twice and each key's messages take effect in commit order.
func TestWALRelayKilled(t *testing.T) {
	events, minKills := size(3000, 50000), size(6, 20)
	over := size(8*time.Second, 40*time.Second)
	ctx, cancel := context.WithTimeout(context.Background(), deadline())
	defer cancel()
	cluster := ownCluster(ctx, t, walSettings...)
	w := newWorld(t, "walkill", worldOptions{db: cluster.URL("chaos"), wal: true})
	if err := wal.CreateSlot(ctx, w.pool, wal.SlotName(driver.Names{Outbox: w.role.outbox()})); err != nil {
		t.Fatal(err)
	}
	rolledBack := w.rollBack(ctx, 20, 5)
	w.goConsumer(w.consumerConfig())
	w.produce(ctx, events, over)

	restarted := make(chan error, 1)
	go func() {
		wait(ctx, over/2)
		err := cluster.Stop(ctx, PGImmediate)
		if err == nil {
			wait(ctx, time.Second)
			err = cluster.Start(ctx)
		}
		restarted <- err
	}()

	var kills, spawned atomic.Int64
	w.killers(ctx, &kills, minKills, func() bool {
		acked := make(chan struct{}, 1)
		c, err := w.spawn(w.relayConfig(), func(string) {
			select {
			case acked <- struct{}{}:
			default:
			}
		})
		if err != nil {
			t.Error(err)
			return false
		}
		life := time.NewTimer(randDuration(200*time.Millisecond, 1500*time.Millisecond))
		if spawned.Add(1)%2 == 0 {
			select {
			case <-life.C:
			case <-ctx.Done():
			}
		} else {
			select {
			case <-acked:
			case <-life.C:
			case <-ctx.Done():
			}
		}
		life.Stop()
		if c.exited() {
			t.Errorf("a WAL relay process exited on its own before it was killed")
			return false
		}
		c.kill()
		if c.killed {
			kills.Add(1)
		}
		return true
	})
	if err := <-restarted; err != nil {
		t.Fatal(err)
	}
	w.mustSpawn(w.relayConfig()) // the survivor
	w.settle(ctx)
	k := kills.Load()
	// A killed relay publishes again what followed the position it last confirmed: its batch in flight. The
	// PostgreSQL crash goes back further, to the slot position saved at the last checkpoint: at most every
	// event once more.
	tally := w.verdict(ctx, expect{events: events, dupBound: int64(events) + k*int64(w.role.BatchSize),
		bound:  "one batch per kill, and every event once more for the crash",
		fault:  fmt.Sprintf("%d WAL relay processes killed with SIGKILL, PostgreSQL stopped with pg_ctl -m immediate and started", k),
		dead:   nil,
		failed: nil})
	counts := w.ledger.PublishCounts()
	var phantom int
	for _, id := range rolledBack {
		phantom += counts[id]
	}
	// The relay's promise is the order in which messages reach the broker: the stream's. The consumer's effects
	// may come out of order while PostgreSQL is down, because a message whose transaction failed is redelivered
	// after the next ones of its key; that is the consumer's, and is printed only.
	outOfOrder, err := streamOutOfOrder(ctx, w.js, w.role.Stream)
	if err != nil {
		t.Fatal(err)
	}
	effectsOutOfOrder, err := w.ledger.OutOfOrder(ctx, w.pool)
	if err != nil {
		t.Fatal(err)
	}
	fmt.Printf("%s: WAL relay ledger: %s rolled_back_published=%d out_of_order=%d kills=%d (effects out of order after consumer retries: %d)\n",
		t.Name(), tally.Line(), phantom, outOfOrder, k, effectsOutOfOrder)
	if phantom != 0 {
		t.Errorf("%d messages of rolled-back transactions were published", phantom)
	}
	if outOfOrder != 0 {
		t.Errorf("%d messages reached the stream after a later message of the same key", outOfOrder)
	}
	if k < int64(minKills) {
		t.Errorf("%d kills, want at least %d", k, minKills)
	}
}

// rollBack enqueues n transactions of per messages each and rolls every one back, returning the messages' IDs.
func (w *world) rollBack(ctx context.Context, n, per int) []string {
	w.t.Helper()
	errRollBack := errors.New("roll back")
	var ids []string
	for i := range n {
		msgs := w.events(per, int64(-1-i), 0, 1)
		err := w.client.InTx(ctx, func(ctx context.Context, tx pgx.Tx) error {
			if err := w.client.EnqueueBatch(ctx, tx, msgs); err != nil {
				return err
			}
			return errRollBack
		})
		if !errors.Is(err, errRollBack) {
			w.t.Fatal(err)
		}
		for _, m := range msgs {
			ids = append(ids, m.ID)
		}
	}
	return ids
}

// TestWALDeadRetried: a message the broker refuses for good is parked dead in the outbox table by the WAL relay;
// retried, it is published by a table relay, and the slot's position moves on.
func TestWALDeadRetried(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), deadline())
	defer cancel()
	cluster := ownCluster(ctx, t, walSettings...)
	w := newWorld(t, "waldead", worldOptions{db: cluster.URL("chaos"), wal: true})
	poison := postbox.Message{ID: postbox.NewID(), Topic: w.topic, Type: "chaos.refused", Key: "k00", Payload: []byte(`{}`)}
	pub, closePub, err := publisher(w.relayConfig(), w.log)
	if err != nil {
		t.Fatal(err)
	}
	defer closePub()
	refuse := postbox.PublisherFunc(func(ctx context.Context, batch []postbox.Record) error {
		errs := make([]error, len(batch))
		for i, r := range batch {
			if r.Type == poison.Type {
				errs[i] = postbox.Permanent(errors.New("refused"))
			}
		}
		ok := make([]postbox.Record, 0, len(batch))
		for i, r := range batch {
			if errs[i] == nil {
				ok = append(ok, r)
			}
		}
		if err := pub.Publish(ctx, ok); err != nil {
			return err
		}
		w.ledger.Published(idsOf(ok)...)
		return &postbox.BatchError{Errs: errs}
	})
	relay, err := wal.NewRelay(w.pool, w.client, refuse, &wal.RelayConfig{StatusInterval: time.Second, Secret: walSecret})
	if err != nil {
		t.Fatal(err)
	}
	if err := wal.CreateSlot(ctx, w.pool, relay.Slot()); err != nil {
		t.Fatal(err)
	}
	w.goRole(relay.Run)
	w.goConsumer(w.consumerConfig())
	if err := w.commit(ctx, poison); err != nil {
		t.Fatal(err)
	}
	if err := w.commit(ctx, w.events(10, 0, 0, 1)...); err != nil {
		t.Fatal(err)
	}
	for ctx.Err() == nil {
		if dead, _ := w.client.ListDead(ctx, postbox.DeadFilter{All: true}); len(dead) == 1 && dead[0].ID == poison.ID {
			break
		}
		wait(ctx, 100*time.Millisecond)
	}
	if n, err := w.client.RetryDead(ctx, postbox.DeadFilter{IDs: []string{poison.ID}}); err != nil || n != 1 {
		t.Fatalf("retry dead: %d, %v", n, err)
	}
	// The retried message is a pending row now: a table relay publishes it.
	cfg := w.relayConfig()
	cfg.WAL = false
	w.goRelay(cfg)
	w.settle(ctx)
	tally := w.verdict(ctx, expect{events: 11, bound: "no fault", fault: "one message refused for good, parked, retried"})
	fmt.Printf("%s: dead message retried through the table relay: %s\n", t.Name(), tally.Line())
	if st := relay.Stats(); st.Dead != 1 || st.Published != 10 {
		t.Errorf("WAL relay stats: %+v, want 1 dead and 10 published", st)
	}
}

func idsOf(recs []postbox.Record) []string {
	ids := make([]string, len(recs))
	for i, r := range recs {
		ids[i] = r.ID
	}
	return ids
}

// TestWALTransientFailureHoldsKey: a message whose publish fails, and fails again, is retried without the relay
// confirming past it; the later message of its key waits for it, and a message of another key does not.
func TestWALTransientFailureHoldsKey(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), deadline())
	defer cancel()
	cluster := ownCluster(ctx, t, walSettings...)
	pool, err := pgxpool.New(ctx, cluster.URL("chaos"))
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Close()
	client, err := postbox.NewClient(walDriver(pool), &postbox.Config{Table: "walhold_outbox", InboxTable: "walhold_inbox"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := client.Migrate(ctx); err != nil {
		t.Fatal(err)
	}
	slot := wal.SlotName(driver.Names{Outbox: "walhold_outbox"})
	if err := wal.CreateSlot(ctx, pool, slot); err != nil {
		t.Fatal(err)
	}
	first := postbox.Message{ID: postbox.NewID(), Topic: "t", Type: "first", Key: "k"}
	second := postbox.Message{ID: postbox.NewID(), Topic: "t", Type: "second", Key: "k"}
	other := postbox.Message{ID: postbox.NewID(), Topic: "t", Type: "other", Key: "j"}
	if err := client.InTx(ctx, func(ctx context.Context, tx pgx.Tx) error {
		return client.EnqueueBatch(ctx, tx, []postbox.Message{first, second, other})
	}); err != nil {
		t.Fatal(err)
	}
	var published []string
	var failures atomic.Int64
	confirmedWhileFailing := make(chan string, 1)
	pub := postbox.PublisherFunc(func(ctx context.Context, batch []postbox.Record) error {
		errs := make([]error, len(batch))
		failed := false
		for i, r := range batch {
			if r.Type == "first" && failures.Add(1) <= 2 {
				errs[i], failed = errors.New("broker hiccup"), true
				continue
			}
			published = append(published, r.Type)
		}
		if failed {
			return &postbox.BatchError{Errs: errs}
		}
		return nil
	})
	relay, err := wal.NewRelay(pool, client, pub, &wal.RelayConfig{Secret: walSecret, BackoffBase: 300 * time.Millisecond, BackoffMax: 300 * time.Millisecond,
		StatusInterval: 100 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	rctx, stop := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- relay.Run(rctx) }()
	var start string
	if err := pool.QueryRow(ctx, "SELECT confirmed_flush_lsn::text FROM pg_replication_slots WHERE slot_name = $1", slot).Scan(&start); err != nil {
		t.Fatal(err)
	}
	for ctx.Err() == nil && failures.Load() < 2 {
		wait(ctx, 10*time.Millisecond)
	}
	wait(ctx, 150*time.Millisecond) // past a status interval, while the first message waits for its retry
	if st := relay.Stats(); st.Confirmed != start {
		confirmedWhileFailing <- st.Confirmed
	}
	for ctx.Err() == nil && relay.Stats().Published < 3 {
		wait(ctx, 10*time.Millisecond)
	}
	stop()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	select {
	case c := <-confirmedWhileFailing:
		t.Errorf("the relay confirmed %s (from %s) while the first message was failing", c, start)
	default:
	}
	if want := []string{"other", "first", "second"}; !slices.Equal(published, want) {
		t.Errorf("published %v, want %v: the second message of key k must wait for the first, the other key must not", published, want)
	}
	if st := relay.Stats(); st.Failed != 2 || st.Published != 3 || st.Confirmed == start {
		t.Errorf("stats %+v: want 2 failed attempts, 3 published and a confirmed position past %s", st, start)
	}
}

// streamOutOfOrder reads every message of a JetStream stream in sequence and counts the messages whose first
// appearance follows that of a later message (by ID, which a producer takes in commit order) of the same key.
// A message appearing again, published once more after a crash beyond the duplicate window, is not counted.
func streamOutOfOrder(ctx context.Context, js jetstream.JetStream, name string) (int, error) {
	s, err := js.Stream(ctx, name)
	if err != nil {
		return 0, fmt.Errorf("stream %s: %w", name, err)
	}
	info, err := s.Info(ctx)
	if err != nil {
		return 0, fmt.Errorf("stream %s: %w", name, err)
	}
	seen := make(map[string]bool)
	last := make(map[string]string) // key -> greatest ID seen
	var n, read int
	for seq := info.State.FirstSeq; seq <= info.State.LastSeq && seq > 0; seq++ {
		m, err := s.GetMsg(ctx, seq)
		if errors.Is(err, jetstream.ErrMsgNotFound) {
			continue
		}
		if err != nil {
			return 0, fmt.Errorf("stream %s, message %d: %w", name, seq, err)
		}
		id, key := m.Header.Get(jetstream.MsgIDHeader), m.Header.Get("ce-partitionkey")
		if key == "" || seen[id] {
			continue
		}
		seen[id] = true
		read++
		if id < last[key] {
			n++
			continue
		}
		last[key] = id
	}
	if read == 0 {
		return 0, fmt.Errorf("stream %s holds no message with a key: nothing shows the order", name)
	}
	return n, nil
}

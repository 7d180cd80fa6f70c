package chaos

import (
	"context"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/postbox-go/postbox"
	"github.com/postbox-go/postbox/internal/testenv"
)

// A world is one scenario's system: its own nats-server, its tables on a PostgreSQL server, producers, relays
// and consumers in process or as child processes, and the ledger that judges them.
type world struct {
	t      *testing.T
	name   string
	role   roleConfig // the base every role of the scenario starts from
	logs   *Tail      // the roles' logs
	nlogs  *Tail      // the nats-server's
	log    *slog.Logger
	nats   *NATSServer
	pool   *pgxpool.Pool
	client *postbox.Client[pgx.Tx]
	ledger *Ledger
	js     jetstream.JetStream // on NATS
	amqp   amqpAdmin           // on RabbitMQ
	topic  string
	stats  roleStats    // what the in-process roles saw
	redel  redeliveries // what every consumer, in process or not, reported about redeliveries

	rolesCtx    context.Context
	stopRoles   context.CancelFunc
	roles       sync.WaitGroup
	childMu     sync.Mutex
	children    []*child
	produced    atomic.Int64
	producing   sync.WaitGroup
	producersOn atomic.Bool
}

// worldOptions vary a world.
type worldOptions struct {
	db      string        // PostgreSQL URL; default: the shared server's suite database
	ackWait time.Duration // the JetStream consumer's AckWait; default 5s
	// broker is brokerNATS (default: a nats-server of the scenario's own), brokerAMQP, or brokerNone.
	broker string
	// amqpURL is the RabbitMQ of brokerAMQP; default: the shared one (rabbitURL).
	amqpURL string
	// ordered makes every client ordered (postbox.Config.Ordered): the outbox is migrated for it and relays claim
	// in per-key order.
	ordered bool
	// wal makes every client write messages into the WAL and every relay read them from the outbox's slot.
	wal bool
}

// newWorld starts the scenario's nats-server and creates its stream and durable consumer (or, on RabbitMQ, its
// queue), creates its tables, and arranges for all of it to be stopped when the test ends. The topic and the
// consumer's name are unique to the checkout, so that runs from two checkouts on the shared RabbitMQ never see
// each other's messages.
func newWorld(t *testing.T, name string, opt worldOptions) *world {
	t.Helper()
	if opt.db == "" {
		opt.db = sharedDB
	}
	if opt.ackWait == 0 {
		opt.ackWait = 5 * time.Second
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	w := &world{t: t, name: name, logs: NewTail(200), nlogs: NewTail(40), topic: "chaos." + testenv.Unique(name)}
	w.log = slog.New(slog.NewTextHandler(w.logs, &slog.HandlerOptions{Level: slog.LevelWarn}))
	w.rolesCtx, w.stopRoles = context.WithCancel(context.Background())
	t.Cleanup(func() {
		w.shutdown()
		if t.Failed() {
			t.Logf("nats-server's last log lines:\n%s\nthe roles' last log lines:\n%s", w.nlogs, w.logs)
		}
	})

	w.role = roleConfig{DB: opt.db, Prefix: name, Stream: strings.ToUpper(name), Consumer: testenv.Unique("chaos_" + name),
		BatchSize: 100, Workers: 1, MaxAttempts: 1000, PollInterval: 20 * time.Millisecond, Backoff: 100 * time.Millisecond,
		Ordered: opt.ordered, WAL: opt.wal}
	setup := w.setupNATS
	switch opt.broker {
	case brokerAMQP:
		setup = w.setupAMQP
	case brokerNone:
		setup = func(context.Context, worldOptions) error { return nil }
	}
	if err := setup(ctx, opt); err != nil {
		t.Fatal(err)
	}

	var err error
	if w.pool, err = pgxpool.New(ctx, opt.db); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(w.pool.Close)
	if w.client, err = w.role.client(w.pool, w.log); err != nil {
		t.Fatal(err)
	}
	if _, err := w.client.Migrate(ctx); err != nil {
		t.Fatal(err)
	}
	if w.ledger, err = w.role.ledger(); err != nil {
		t.Fatal(err)
	}
	if err := w.ledger.Migrate(ctx, w.pool); err != nil {
		t.Fatal(err)
	}

	return w
}

// relayConfig returns the base role as a relay.
func (w *world) relayConfig() roleConfig {
	c := w.role
	c.Role = "relay"
	return c
}

// consumerConfig returns the base role as a consumer.
func (w *world) consumerConfig() roleConfig {
	c := w.role
	c.Role = "consumer"
	return c
}

// goRelay runs a relay in this process until the scenario stops its roles.
func (w *world) goRelay(cfg roleConfig) {
	w.goRole(func(ctx context.Context) error {
		return runRelay(ctx, cfg, w.log, func(ids []string) { w.ledger.Published(ids...) }, &w.stats)
	})
}

// goConsumer runs a consumer in this process until the scenario stops its roles.
func (w *world) goConsumer(cfg roleConfig) {
	hooks := consumerHooks{duplicate: func(id string) { w.redel.add(reportDuplicate, id) }}
	w.goRole(func(ctx context.Context) error { return runConsumer(ctx, cfg, w.log, hooks, &w.stats) })
}

func (w *world) goRole(run func(ctx context.Context) error) {
	w.roles.Add(1)
	go func() {
		defer w.roles.Done()
		if err := run(w.rolesCtx); err != nil {
			w.log.Error("role failed", "err", err)
			w.t.Errorf("role failed: %v", err)
		}
	}()
}

// spawn starts a role as a child process. A relay child's acknowledged IDs go to the publish ledger, and then
// to acked when it is not nil; a consumer child's reports go to the scenario's redeliveries. It may be called
// from any goroutine.
func (w *world) spawn(cfg roleConfig, acked func(id string)) (*child, error) {
	c, err := startChild(cfg, w.logs, func(kind, id string) {
		if kind != reportAcked {
			w.redel.add(kind, id)
			return
		}
		w.ledger.Published(id)
		if acked != nil {
			acked(id)
		}
	})
	if err != nil {
		return nil, err
	}
	w.childMu.Lock()
	w.children = append(w.children, c)
	w.childMu.Unlock()
	return c, nil
}

// mustSpawn is spawn for the test's goroutine.
func (w *world) mustSpawn(cfg roleConfig) *child {
	w.t.Helper()
	c, err := w.spawn(cfg, nil)
	if err != nil {
		w.t.Fatal(err)
	}
	return c
}

// shutdown stops every role: children cleanly (SIGTERM), in-process roles by cancelling their context.
func (w *world) shutdown() {
	w.childMu.Lock()
	children := w.children
	w.children = nil
	w.childMu.Unlock()
	for _, c := range children {
		if !c.exited() {
			c.stop()
		}
	}
	w.stopRoles()
	w.roles.Wait()
	w.producing.Wait()
}

// produce commits total events in the background from four producers, ten events per transaction, spread over
// about `over` (0: as fast as they can). A failed transaction is retried with new events until it commits; the
// ledger, written in the same transactions, knows which did. Each producer has keys of its own, so that a key's
// events are enqueued one transaction after another, as by an application that locks the aggregate's row: each
// key's enqueue (ID) order is its commit order, which ordered mode keeps.
func (w *world) produce(ctx context.Context, total int, over time.Duration) {
	const producers, perTx = 4, 10
	slots := int64((total + perTx - 1) / perTx)
	var next atomic.Int64
	start := time.Now()
	w.producersOn.Store(true)
	var wg sync.WaitGroup
	for p := range producers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				slot := next.Add(1) - 1
				if slot >= slots || ctx.Err() != nil {
					return
				}
				if over > 0 {
					wait(ctx, time.Until(start.Add(time.Duration(float64(over)*float64(slot)/float64(slots)))))
				}
				for ctx.Err() == nil {
					err := w.commit(ctx, w.events(perTx, slot, p, producers)...)
					if err == nil {
						break
					}
					w.log.Warn("producer transaction failed; retrying with new events", "err", err)
					wait(ctx, 50*time.Millisecond)
				}
			}
		}()
	}
	w.producing.Add(1)
	go func() {
		defer w.producing.Done()
		wg.Wait()
		w.producersOn.Store(false)
	}()
}

// producing reports whether producers are still at work.
func (w *world) producersRunning() bool { return w.producersOn.Load() }

// killers runs two goroutines that each call kill again and again until ctx ends, or until the producers are done
// and kills has reached minKills; kill returns false to stop its goroutine, having reported why with t.Error.
// killers returns once both have stopped, and ends the test if either failed it.
func (w *world) killers(ctx context.Context, kills *atomic.Int64, minKills int, kill func() bool) {
	var wg sync.WaitGroup
	for range 2 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for ctx.Err() == nil && (w.producersRunning() || kills.Load() < int64(minKills)) {
				if !kill() {
					return
				}
			}
		}()
	}
	wg.Wait()
	if w.t.Failed() {
		w.t.FailNow()
	}
}

// eventKeys is how many keys a scenario's events are spread over: k00 to k49.
const eventKeys = 50

// events returns n events of the scenario's topic for producer p of producers, on the keys of k00 to k49 that are
// p's: those whose number is p modulo producers.
func (w *world) events(n int, slot int64, p, producers int) []postbox.Message {
	msgs := make([]postbox.Message, n)
	for i := range msgs {
		k := p + producers*rand.IntN((eventKeys-p+producers-1)/producers)
		msgs[i] = postbox.Message{Topic: w.topic, Type: "chaos.event", Key: fmt.Sprintf("k%02d", k),
			Payload: fmt.Appendf(nil, `{"slot":%d,"i":%d}`, slot, i)}
	}
	return msgs
}

// commit enqueues msgs and records them in the ledger, in one transaction, as an application would.
func (w *world) commit(ctx context.Context, msgs ...postbox.Message) error {
	err := w.client.InTx(ctx, func(ctx context.Context, tx pgx.Tx) error {
		if err := w.client.EnqueueBatch(ctx, tx, msgs); err != nil {
			return err
		}
		ids := make([]string, len(msgs))
		for i, m := range msgs {
			ids[i] = m.ID
		}
		return w.ledger.Commit(ctx, tx, ids)
	})
	if err == nil {
		w.produced.Add(int64(len(msgs)))
	}
	return err
}

// settle waits until the producers are done, every committed event has an effect or is parked, the outbox has
// nothing pending and the broker has nothing left to deliver or awaiting an ack. A scenario whose system does not
// settle before its deadline fails, showing where it stood.
func (w *world) settle(ctx context.Context) {
	w.t.Helper()
	tick := time.NewTicker(250 * time.Millisecond)
	defer tick.Stop()
	var last string
	for {
		state, done := w.progress(ctx)
		if done {
			return
		}
		if state != "" {
			last = state
		}
		select {
		case <-ctx.Done():
			w.t.Fatalf("%s did not settle: %s", w.name, last)
		case <-tick.C:
		}
	}
}

// progress reports where the scenario stands and whether it has settled.
func (w *world) progress(ctx context.Context) (string, bool) {
	qctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	remaining, err := w.ledger.Remaining(qctx, w.pool)
	if err != nil {
		return "ledger: " + err.Error(), false
	}
	stats, err := w.client.Stats(qctx)
	if err != nil {
		return "outbox stats: " + err.Error(), false
	}
	brokerState, idle, err := w.brokerState(qctx)
	if err != nil {
		return err.Error(), false
	}
	state := fmt.Sprintf("producers running %v, %d produced, %d without effect, %d pending in the outbox, %d dead, %s",
		w.producersRunning(), w.produced.Load(), remaining, stats.Pending, stats.Dead, brokerState)
	return state, !w.producersRunning() && remaining == 0 && stats.Pending == 0 && idle
}

// expect is what a scenario allows.
type expect struct {
	events   int      // at least this many events must have committed
	dupBound int64    // the most duplicates_published allowed
	bound    string   // why that bound
	dead     []string // the IDs the relay must have parked as dead
	failed   []string // the IDs the consumer must have recorded as failed
	fault    string   // what was done to the system, for the report
	// felt, when set, checks that the in-process roles met the fault (a scenario whose fault went unnoticed
	// shows nothing): it returns what is missing, or "".
	felt func(s *roleStats) string
}

// verdict stops every role, tallies the ledger, prints the scenario's line and fails the test unless nothing was
// lost, no effect happened twice and published duplicates stay within the bound.
func (w *world) verdict(ctx context.Context, e expect) Tally {
	w.t.Helper()
	w.shutdown()
	if w.role.Broker == brokerAMQP {
		// The consumers are gone, so RabbitMQ has requeued whatever they held unacknowledged: nothing may be left.
		if state, idle, err := w.brokerState(ctx); err != nil || !idle {
			w.t.Errorf("after the consumers stopped, the queue is not empty: %s %v", state, err)
		}
	}
	tally, err := w.ledger.Tally(ctx, w.pool)
	if err != nil {
		w.t.Fatal(err)
	}
	fmt.Printf("%s: %s; %d events committed, %d effects, %d parked; duplicates_published bound %d (%s)\n",
		w.t.Name(), e.fault, tally.Committed, tally.Effects, tally.Parked, e.dupBound, e.bound)
	fmt.Printf("%s: %s; %d warnings logged\n", w.t.Name(), &w.stats, w.logs.Count())
	if e.felt != nil {
		if missing := e.felt(&w.stats); missing != "" {
			w.t.Errorf("the fault was not felt: %s", missing)
		}
	}
	fmt.Println(tally.Line())
	if tally.Committed < int64(e.events) {
		w.t.Errorf("%d events committed, want at least %d", tally.Committed, e.events)
	}
	if tally.Lost != 0 {
		w.t.Errorf("%d committed events were lost: no effect and not parked", tally.Lost)
	}
	if tally.DuplicateEffects != 0 {
		w.t.Errorf("%d duplicate effects: the inbox let a message's effects commit twice", tally.DuplicateEffects)
	}
	if tally.Phantoms != 0 {
		w.t.Errorf("%d effects of events that never committed", tally.Phantoms)
	}
	if tally.DuplicatesPublished > e.dupBound {
		w.t.Errorf("%d published duplicates, over the bound of %d (%s)", tally.DuplicatesPublished, e.dupBound, e.bound)
	}
	if tally.Unpublished != int64(len(e.dead)) {
		w.t.Errorf("%d committed events were never acknowledged by the broker, want %d (the ones parked dead)", tally.Unpublished, len(e.dead))
	}
	if got := w.parked(ctx, "SELECT id::text FROM "+w.ledger.outbox+" WHERE status = 'dead'"); !sameIDs(got, e.dead) {
		w.t.Errorf("dead in the outbox: %v, want %v", got, e.dead)
	}
	if got := w.parked(ctx, "SELECT message_id FROM "+w.ledger.inbox+" WHERE status = 'failed'"); !sameIDs(got, e.failed) {
		w.t.Errorf("recorded as failed in the inbox: %v, want %v", got, e.failed)
	}
	return tally
}

func (w *world) parked(ctx context.Context, query string) []string {
	w.t.Helper()
	rows, err := w.pool.Query(ctx, query)
	if err != nil {
		w.t.Fatal(err)
	}
	ids, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		w.t.Fatal(err)
	}
	return ids
}

func sameIDs(a, b []string) bool {
	a, b = slices.Clone(a), slices.Clone(b)
	slices.Sort(a)
	slices.Sort(b)
	return slices.Equal(a, b)
}

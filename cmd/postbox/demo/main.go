// Command demo shows the outbox and inbox at work, with no set-up: an embedded SQLite database and an embedded
// NATS JetStream server in a temporary directory. It is a command of its own, apart from the postbox relay, so that
// the relay binary links no server and trying Postbox builds only what the demo runs.
//
//	go run ./cmd/postbox/demo      (from a clone of the repository, or make demo)
//	go run ./cmd/postbox/demo --orders 20000 --duplicates 25
//	go run ./cmd/postbox/demo --json | jq .lost
//
// An order service commits orders together with their order.created events, the relay publishes the events to
// JetStream, and a shipping service consumes them, deduplicating every delivery through an inbox
// (postbox.Process) in the same transaction as its own write. A share of the acks is "lost" on purpose, so
// JetStream delivers those messages again and the inbox skips them.
//
// It prints a live progress line on a terminal, then a summary: orders committed, events published and
// delivered, duplicate deliveries skipped, events lost (always 0), throughput and enqueue-to-processed latency.
// With --json the summary is one JSON object. It exits 1 if any event was lost or processed twice, 2 on a
// wrong flag.
package main

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"os"
	"os/signal"
	"path/filepath"
	"slices"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/postbox-go/postbox"
	"github.com/postbox-go/postbox/broker"
	natsbroker "github.com/postbox-go/postbox/broker/natsbroker"
	"github.com/postbox-go/postbox/broker/natsbroker/embedded"
	"github.com/postbox-go/postbox/driver/databasesql"

	_ "modernc.org/sqlite"
)

// Exit codes of run.
const (
	exitOK      = 0 // every event was processed exactly once
	exitFailure = 1 // an event was lost or processed twice, or the pipeline failed
	exitUsage   = 2 // a wrong flag or argument
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	go func() {
		<-ctx.Done()
		stop()
	}()
	os.Exit(run(ctx, os.Args[1:], os.Stdout, os.Stderr))
}

// runtime is what the demo writes to.
type runtime struct {
	stdout, stderr io.Writer
	tty            bool // stderr is a terminal: a live progress line is welcome
	log            *slog.Logger
}

// run is the whole program: it parses args, runs the demo and returns the exit code.
func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	var o demoOptions
	f := flag.NewFlagSet("demo", flag.ContinueOnError)
	f.SetOutput(stderr)
	f.Usage = func() {
		fmt.Fprint(stderr, "Usage: go run ./cmd/postbox/demo [--json] [--orders N] [--duplicates PERCENT]\n\n"+
			"Runs orders → outbox → relay → NATS JetStream → inbox in one process, on embedded SQLite and NATS.\n\nFlags:\n")
		f.PrintDefaults()
	}
	f.BoolVar(&o.json, "json", false, "print the summary as one JSON object")
	f.IntVar(&o.orders, "orders", 3000, "orders to commit")
	f.IntVar(&o.producers, "producers", 4, "concurrent order-service workers")
	f.IntVar(&o.rate, "rate", 1500, "orders per second in all, so that latency is measured below saturation; 0 for as fast as possible")
	f.IntVar(&o.duplicates, "duplicates", 10, "percent of messages whose ack is lost, so that the broker delivers them again")
	f.DurationVar(&o.timeout, "timeout", time.Minute, "give up when the pipeline has not drained by then")
	logLevel := f.String("log-level", "warn", "log level: debug, info, warn or error")
	if err := f.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return exitOK
		}
		return exitUsage
	}
	usage := func(format string, a ...any) int {
		fmt.Fprintf(stderr, "demo: "+format+"\n", a...)
		return exitUsage
	}
	if f.NArg() > 0 {
		return usage("unexpected argument %q", f.Arg(0))
	}
	if o.orders <= 0 || o.producers <= 0 || o.rate < 0 || o.duplicates < 0 || o.duplicates > 100 {
		return usage("--orders and --producers must be positive, --rate not negative and --duplicates between 0 and 100")
	}
	var level slog.Level
	if err := level.UnmarshalText([]byte(*logLevel)); err != nil {
		return usage("--log-level %q: use debug, info, warn or error", *logLevel)
	}
	rt := &runtime{stdout: stdout, stderr: stderr, tty: isTerminal(stderr),
		log: slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: level}))}
	if err := runDemo(ctx, rt, o); err != nil {
		fmt.Fprintf(stderr, "demo: %v\n", err)
		return exitFailure
	}
	return exitOK
}

func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	if !ok {
		return false
	}
	fi, err := f.Stat()
	return err == nil && fi.Mode()&os.ModeCharDevice != 0
}

type demoOptions struct {
	json                          bool
	orders, producers, duplicates int
	rate                          int // orders per second; 0 is unpaced
	timeout                       time.Duration
	progressTick                  time.Duration // how often the live progress line is redrawn; 100ms when 0
}

// demoSummary is what the demo reports; --json prints it as is.
type demoSummary struct {
	Committed         int64   `json:"committed"`
	Published         int64   `json:"published"`
	Delivered         int64   `json:"delivered"`
	Deliveries        int64   `json:"deliveries"`
	DuplicatesSkipped int64   `json:"duplicates_skipped"`
	Lost              int64   `json:"lost"`
	ProcessedTwice    int64   `json:"processed_twice"`
	Broker            string  `json:"broker"`
	Database          string  `json:"database"`
	Seconds           float64 `json:"seconds"`
	PerSecond         float64 `json:"throughput_per_second"`
	LatencyP50Ms      float64 `json:"latency_p50_ms"`
	LatencyP99Ms      float64 `json:"latency_p99_ms"`
}

// orderCreated is the demo's event payload, checked by the client's registry at enqueue.
type orderCreated struct {
	OrderID  string `json:"order_id"`
	Customer string `json:"customer"`
	Total    int    `json:"total_cents"`
}

func (o *orderCreated) Validate() error {
	if o.Total <= 0 {
		return errors.New("total_cents must be positive")
	}
	return nil
}

func runDemo(ctx context.Context, rt *runtime, o demoOptions) error {
	ctx, cancel := context.WithTimeout(ctx, o.timeout)
	defer cancel()
	dir, err := os.MkdirTemp("", "postbox-demo-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	// WAL so that readers do not block the writer, a busy timeout so that writers wait instead of failing,
	// immediate transactions so that a transaction that reads first cannot fail to write, and
	// synchronous(NORMAL): a throwaway database needs no fsync per commit.
	db, err := sql.Open("sqlite", "file:"+filepath.Join(dir, "shop.db")+"?_pragma=journal_mode(WAL)&_pragma=busy_timeout(10000)"+
		"&_pragma=synchronous(NORMAL)&_txlock=immediate")
	if err != nil {
		return err
	}
	defer db.Close()
	// One connection: SQLite has one writer anyway, and writers queued in the pool take turns at once, where
	// writers contending for the file lock back off in SQLite's busy handler for up to 100ms at a time.
	db.SetMaxOpenConns(1)
	reg, err := postbox.NewRegistry(postbox.EventType{Type: "order.created", Topic: "orders", KeyRequired: true,
		Payload: postbox.JSON[orderCreated]()})
	if err != nil {
		return err
	}
	client, err := postbox.NewClient(databasesql.New(db, databasesql.SQLite), &postbox.Config{Registry: reg, Logger: rt.log})
	if err != nil {
		return err
	}
	if _, err := client.Migrate(ctx); err != nil {
		return err
	}
	for _, ddl := range demoTables {
		if _, err := db.ExecContext(ctx, ddl); err != nil {
			return err
		}
	}

	natsURL, stopNATS, err := embedded.Run(ctx, filepath.Join(dir, "nats"))
	if err != nil {
		return err
	}
	defer stopNATS()
	nc, err := nats.Connect(natsURL)
	if err != nil {
		return err
	}
	defer nc.Close()
	js, err := jetstream.New(nc, jetstream.WithPublishAsyncTimeout(30*time.Second))
	if err != nil {
		return err
	}
	if _, err := natsbroker.EnsureStream(ctx, js, jetstream.StreamConfig{Name: "SHOP", Subjects: []string{"orders"}}); err != nil {
		return err
	}
	cons, err := natsbroker.EnsureConsumer(ctx, js, "SHOP", jetstream.ConsumerConfig{Durable: "shipping", AckPolicy: jetstream.AckExplicitPolicy})
	if err != nil {
		return err
	}
	pub, err := natsbroker.NewPublisher(js, nil)
	if err != nil {
		return err
	}
	sub, err := natsbroker.NewSubscriber(cons, &natsbroker.SubscriberConfig{Concurrency: 4, Logger: rt.log})
	if err != nil {
		return err
	}

	relay, err := postbox.NewRelay(client, pub, &postbox.RelayConfig{BatchSize: 250, PollInterval: 20 * time.Millisecond})
	if err != nil {
		return err
	}
	relayCtx, stopRelay := context.WithCancel(ctx)
	defer stopRelay()
	relayDone := make(chan error, 1)
	go func() { relayDone <- relay.Run(relayCtx) }()

	stats := demoCounters{settled: make(chan struct{}, 1)}
	consumerCtx, stopConsumer := context.WithCancel(ctx)
	defer stopConsumer()
	consumerDone := make(chan error, 1)
	shipping, err := postbox.NewConsumer(client, "shipping", nil)
	if err != nil {
		return err
	}
	go func() {
		consumerDone <- broker.Consume(consumerCtx, &losingAcks{Subscriber: sub, percent: o.duplicates, c: &stats}, shipping, ship,
			shippingConfig(&stats, rt))
	}()

	start := time.Now()
	produceErr := make(chan error, 1)
	go func() { produceErr <- produce(ctx, client, relay, o, &stats) }()

	tick := o.progressTick
	if tick <= 0 {
		tick = 100 * time.Millisecond
	}
	progress := time.NewTicker(tick)
	defer progress.Stop()
	var runErr error
	produced := false
wait:
	for {
		select {
		case err := <-produceErr:
			produced = true
			if err != nil {
				runErr = fmt.Errorf("order service: %w", err)
				break wait
			}
		case err := <-consumerDone:
			runErr = fmt.Errorf("shipping service stopped: %v", err)
			consumerDone = nil
			break wait
		case <-stats.settled:
			// A delivery was settled: the pipeline may be done, checked below, not at the next progress tick.
		case <-progress.C:
			if rt.tty && !o.json {
				fmt.Fprintf(rt.stderr, "\rcommitted %6d   published %6d   delivered %6d   duplicates skipped %5d ",
					stats.committed.Load(), relay.Stats().Published, stats.delivered.Load(), stats.skipped.Load())
			}
		case <-ctx.Done():
			runErr = errors.New("interrupted")
			if errors.Is(ctx.Err(), context.DeadlineExceeded) {
				runErr = fmt.Errorf("the pipeline did not drain within --timeout %v", o.timeout)
			}
			break wait
		}
		// Done when every committed order was processed and every injected redelivery came back and was skipped.
		if produced && stats.delivered.Load() >= stats.committed.Load() && stats.skipped.Load() >= stats.injected.Load() {
			break
		}
	}
	elapsed := time.Since(start)
	stopRelay()
	if err := <-relayDone; err != nil && runErr == nil {
		runErr = err
	}
	stopConsumer()
	if consumerDone != nil {
		if err := <-consumerDone; err != nil && runErr == nil {
			runErr = fmt.Errorf("shipping service: %w", err)
		}
	}
	if rt.tty && !o.json {
		fmt.Fprint(rt.stderr, "\r\033[K")
	}
	if runErr != nil {
		return runErr
	}

	s := demoSummary{Committed: stats.committed.Load(), Published: relay.Stats().Published,
		Delivered: stats.delivered.Load(), Deliveries: stats.deliveries.Load(), DuplicatesSkipped: stats.skipped.Load(),
		Broker: "NATS JetStream (embedded)", Database: "SQLite (embedded)", Seconds: elapsed.Seconds()}
	// Lost and processed-twice come from the database, not from counters: an order without a shipment was lost.
	if err := db.QueryRowContext(context.WithoutCancel(ctx), finalCheck).Scan(&s.Lost, &s.ProcessedTwice); err != nil {
		return err
	}
	s.PerSecond = float64(s.Delivered) / elapsed.Seconds()
	s.LatencyP50Ms, s.LatencyP99Ms = stats.percentile(0.50), stats.percentile(0.99)
	if o.json {
		enc := json.NewEncoder(rt.stdout)
		enc.SetEscapeHTML(false)
		if err := enc.Encode(s); err != nil {
			return err
		}
	} else {
		printDemoSummary(rt, s)
	}
	if s.Lost != 0 || s.ProcessedTwice != 0 {
		return fmt.Errorf("%d events lost and %d processed twice", s.Lost, s.ProcessedTwice)
	}
	return nil
}

// demoTables are the order and shipping services' own tables.
var demoTables = []string{
	"CREATE TABLE orders (id TEXT PRIMARY KEY, customer TEXT NOT NULL, total_cents INTEGER NOT NULL)",
	// No key on order_id: a second effect for one order must show up as a row, not as an error.
	"CREATE TABLE shipments (order_id TEXT NOT NULL, created_at INTEGER NOT NULL)",
	// The final check looks each order's shipments up: without an index it read the whole table per order, and
	// --orders 20000 sat silent for about 50 s after the pipeline had finished.
	"CREATE INDEX shipments_order_id ON shipments (order_id)",
}

// finalCheck counts the orders without a shipment (lost) and the shipments beyond one per order (processed twice).
const finalCheck = "SELECT (SELECT count(*) FROM orders o WHERE NOT EXISTS" +
	" (SELECT 1 FROM shipments s WHERE s.order_id = o.id)), (SELECT count(*) - count(DISTINCT order_id) FROM shipments)"

func printDemoSummary(rt *runtime, s demoSummary) {
	w := rt.stdout
	fmt.Fprintf(w, "Postbox demo: %s, broker: %s\n\n", s.Database, s.Broker)
	fmt.Fprintf(w, "  orders committed with their event   %7d\n", s.Committed)
	fmt.Fprintf(w, "  events published by the relay      %7d\n", s.Published)
	fmt.Fprintf(w, "  deliveries, duplicates included     %7d\n", s.Deliveries)
	fmt.Fprintf(w, "  duplicates skipped by the inbox     %7d\n", s.DuplicatesSkipped)
	fmt.Fprintf(w, "  events processed exactly once       %7d\n", s.Delivered)
	fmt.Fprintf(w, "  events lost                         %7d\n", s.Lost)
	fmt.Fprintf(w, "  events processed twice              %7d\n\n", s.ProcessedTwice)
	fmt.Fprintf(w, "  %.0f events/s over %.2fs; enqueue to processed p50 %.1f ms, p99 %.1f ms\n",
		s.PerSecond, s.Seconds, s.LatencyP50Ms, s.LatencyP99Ms)
}

type demoCounters struct {
	committed, delivered, deliveries, skipped, injected atomic.Int64
	settled                                             chan struct{} // a delivery was acked or nacked
	mu                                                  sync.Mutex
	latencies                                           []time.Duration
}

func (c *demoCounters) percentile(p float64) float64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	if len(c.latencies) == 0 {
		return 0
	}
	slices.Sort(c.latencies)
	i := min(len(c.latencies)-1, int(p*float64(len(c.latencies))))
	return float64(c.latencies[i].Microseconds()) / 1000
}

// produce is the order service: each order and its event commit in one transaction.
func produce(ctx context.Context, client *postbox.Client[*sql.Tx], relay *postbox.Relay, o demoOptions, c *demoCounters) error {
	var next atomic.Int64
	errs := make(chan error, o.producers)
	start := time.Now()
	for range o.producers {
		go func() {
			for ctx.Err() == nil {
				i := next.Add(1)
				if i > int64(o.orders) {
					errs <- nil
					return
				}
				if o.rate > 0 && !waitUntil(ctx, start.Add(time.Duration(i)*time.Second/time.Duration(o.rate))) {
					break
				}
				order := orderCreated{OrderID: postbox.NewID(), Customer: fmt.Sprintf("customer-%d", i%97), Total: 100 + int(i%5000)}
				payload, _ := json.Marshal(order)
				err := client.InTx(ctx, func(ctx context.Context, tx *sql.Tx) error {
					if _, err := tx.ExecContext(ctx, "INSERT INTO orders (id, customer, total_cents) VALUES (?, ?, ?)",
						order.OrderID, order.Customer, order.Total); err != nil {
						return err
					}
					_, err := client.Enqueue(ctx, tx, postbox.Message{Topic: "orders", Key: order.Customer,
						Type: "order.created", Payload: payload})
					return err
				})
				if err != nil {
					errs <- err
					return
				}
				c.committed.Add(1)
				relay.Wake()
			}
			errs <- ctx.Err()
		}()
	}
	var first error
	for range o.producers {
		if err := <-errs; err != nil && first == nil {
			first = err
		}
	}
	return first
}

// waitUntil waits for t and reports whether ctx is still live.
func waitUntil(ctx context.Context, t time.Time) bool {
	d := time.Until(t)
	if d <= 0 {
		return ctx.Err() == nil
	}
	timer := time.NewTimer(d)
	defer timer.Stop()
	select {
	case <-timer.C:
		return true
	case <-ctx.Done():
		return false
	}
}

// ship is the shipping service's handler. broker.Consume runs each delivery through postbox's inbox in a
// transaction that first claims the message, so a redelivered message is a Duplicate and ship does not run again.
func ship(ctx context.Context, tx *sql.Tx, m postbox.Message) ([]postbox.Message, error) {
	var order orderCreated
	if err := json.Unmarshal(m.Payload, &order); err != nil {
		return nil, postbox.Permanent(err)
	}
	_, err := tx.ExecContext(ctx, "INSERT INTO shipments (order_id, created_at) VALUES (?, ?)", order.OrderID, time.Now().UnixMicro())
	return nil, err
}

// shippingConfig counts what became of each delivery.
func shippingConfig(c *demoCounters, rt *runtime) *broker.ConsumeConfig {
	return &broker.ConsumeConfig{Logger: rt.log, NackDelay: func(int) time.Duration { return 50 * time.Millisecond },
		OnOutcome: func(_ context.Context, d *broker.Delivery, res postbox.Result, _ error) {
			c.deliveries.Add(1)
			switch res.Outcome {
			case postbox.Duplicate:
				c.skipped.Add(1)
			case postbox.Processed:
				c.delivered.Add(1)
				c.mu.Lock()
				c.latencies = append(c.latencies, time.Since(d.Time))
				c.mu.Unlock()
			}
		}}
}

// losingAcks is a subscriber that loses the ack of percent of the first deliveries: it nacks them instead, as if
// the ack never reached the broker after the commit, so the broker delivers them again.
type losingAcks struct {
	broker.Subscriber
	percent int
	c       *demoCounters
}

func (l *losingAcks) Receive(ctx context.Context, handle broker.DeliveryHandler) error {
	return l.Subscriber.Receive(ctx, func(ctx context.Context, d *broker.Delivery) {
		broker.Dispatch(ctx, broker.NewDelivery(d.Event, d.Attempt, &losingAck{d: d, l: l}), handle)
	})
}

// losingAck settles the broker's delivery; it cannot reject, so a message that can never be processed is acked.
type losingAck struct {
	d *broker.Delivery
	l *losingAcks
}

// settledOne tells the demo's loop that a delivery was settled, without waiting for it to look.
func (c *demoCounters) settledOne() {
	select {
	case c.settled <- struct{}{}:
	default:
	}
}

func (a *losingAck) Ack(ctx context.Context) error {
	defer a.l.c.settledOne()
	if a.d.Attempt <= 1 && rand.IntN(100) < a.l.percent {
		a.l.c.injected.Add(1)
		return a.d.Nack(ctx, 0)
	}
	return a.d.Ack(ctx)
}

func (a *losingAck) Nack(ctx context.Context, delay time.Duration) error {
	defer a.l.c.settledOne()
	return a.d.Nack(ctx, delay)
}

package chaos

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/url"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/postbox-go/postbox"
	"github.com/postbox-go/postbox/broker/natsbroker"
	"github.com/postbox-go/postbox/driver/pgxv5"
	"github.com/postbox-go/postbox/internal/testenv/tcpproxy"
)

// multiSource is one database of TestManySources: its producer's client, its ledger, and the latencies of its
// messages, by phase.
type multiSource struct {
	name    string
	pool    *pgxpool.Pool // direct, for the producer and the tally
	client  *postbox.Client[pgx.Tx]
	ledger  *Ledger
	failing atomic.Bool // the source's broker route refuses every message
	phase   *atomic.Int32

	mu        sync.Mutex
	latencies [3][]time.Duration // enqueue to the broker's ack: in the no-fault phase, the fault phase, the warm-up
}

// ledgerRoute publishes a source's messages through the shared NATS publisher and records them in its ledger,
// unless the route is failing.
type ledgerRoute struct {
	next postbox.Publisher
	src  *multiSource
}

func (r ledgerRoute) Publish(ctx context.Context, recs []postbox.Record) error {
	if r.src.failing.Load() {
		return postbox.Unavailable(errors.New("route of " + r.src.name + " refusing messages"))
	}
	if err := r.next.Publish(ctx, recs); err != nil {
		var be *postbox.BatchError
		if !errors.As(err, &be) {
			return err
		}
		var ok []string
		for i, e := range be.Errs {
			if e == nil {
				ok = append(ok, recs[i].ID)
			}
		}
		r.src.ledger.Published(ok...)
		return err
	}
	now := time.Now()
	ids := make([]string, len(recs))
	phase := r.src.phase.Load()
	r.src.mu.Lock()
	for i, rec := range recs {
		ids[i] = rec.ID
		r.src.latencies[phase] = append(r.src.latencies[phase], now.Sub(rec.CreatedAt))
	}
	r.src.mu.Unlock()
	r.src.ledger.Published(ids...)
	return nil
}

// TestManySources: one relay group serves 20 databases on one PostgreSQL server, a producer on each. After a
// phase without faults, the relay's connections to one database are cut and refused for 10 seconds (through a
// proxy; its producer goes on committing), and the broker route of another refuses every message for 5 seconds.
// No source loses a message; the cut source drains once it is back; the healthy sources' messages are not held
// up meanwhile: their latencies with and without the faults are printed side by side.
func TestManySources(t *testing.T) {
	const (
		sources = 20
		cutFor  = 10 * time.Second
		failFor = 5 * time.Second
	)
	rate, calm := size(10, 50), size(4*time.Second, 20*time.Second) // events per second per source; the no-fault phase
	ctx, cancel := context.WithTimeout(context.Background(), deadline())
	defer cancel()
	logs := NewTail(200)
	log := slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelWarn}))

	cluster, err := NewPGCluster(ctx)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("the relays' last log lines:\n%s\nPostgreSQL's log:\n%s", logs, cluster.Log())
		}
		_ = cluster.Close()
	})
	admin, err := pgxpool.New(ctx, cluster.URL("postgres"))
	if err != nil {
		t.Fatal(err)
	}
	defer admin.Close()
	u, err := url.Parse(cluster.URL("postgres"))
	if err != nil {
		t.Fatal(err)
	}
	proxy := tcpproxy.Start(t, u.Host)

	nlogs := NewTail(40)
	ns, err := StartNATS(ctx, t.TempDir(), nlogs)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(ns.Close)
	nc, err := connectNATS(ns.URL(), "chaos-multi", log)
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	js, err := jetstream.New(nc, jetstream.WithPublishAsyncTimeout(5*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := natsbroker.EnsureStream(ctx, js, jetstream.StreamConfig{Name: "MULTI", Subjects: []string{"multi.>"},
		Storage: jetstream.MemoryStorage}); err != nil {
		t.Fatal(err)
	}
	pub, err := natsbroker.NewPublisher(js, nil)
	if err != nil {
		t.Fatal(err)
	}

	group, err := postbox.NewRelayGroup(&postbox.RelayGroupConfig{Logger: log})
	if err != nil {
		t.Fatal(err)
	}
	var phase atomic.Int32
	phase.Store(2) // warm-up: the first claims and connections are not the steady state
	srcs := make([]*multiSource, sources)
	var pools []*pgxpool.Pool
	defer func() {
		for _, p := range pools {
			p.Close()
		}
	}()
	open := func(raw string, maxConns int32) *pgxpool.Pool {
		t.Helper()
		pc, err := pgxpool.ParseConfig(raw)
		if err != nil {
			t.Fatal(err)
		}
		pc.MaxConns = maxConns
		p, err := pgxpool.NewWithConfig(ctx, pc)
		if err != nil {
			t.Fatal(err)
		}
		pools = append(pools, p)
		return p
	}
	for i := range srcs {
		name := fmt.Sprintf("multi_%02d", i)
		if _, err := admin.Exec(ctx, "CREATE DATABASE "+name); err != nil {
			t.Fatal(err)
		}
		s := &multiSource{name: name, phase: &phase, pool: open(cluster.URL(name), 2)}
		cfg := &postbox.Config{Table: "outbox", InboxTable: "inbox", Logger: log}
		if s.client, err = postbox.NewClient(pgxv5.New(s.pool), cfg); err != nil {
			t.Fatal(err)
		}
		if _, err := s.client.Migrate(ctx); err != nil {
			t.Fatal(err)
		}
		if s.ledger, err = NewLedger("ledger", "outbox", "inbox"); err != nil {
			t.Fatal(err)
		}
		if err := s.ledger.Migrate(ctx, s.pool); err != nil {
			t.Fatal(err)
		}
		relayURL := cluster.URL(name)
		if i == 0 { // the source whose database is cut: its relay goes through the proxy
			via := *u
			via.Host, via.Path = proxy.Addr(), "/"+name
			relayURL = via.String()
		}
		relayClient, err := postbox.NewClient(pgxv5.New(open(relayURL, 2)), cfg)
		if err != nil {
			t.Fatal(err)
		}
		relay, err := postbox.NewRelay(relayClient, ledgerRoute{next: pub, src: s}, &postbox.RelayConfig{BatchSize: 100,
			MaxAttempts: 1000, ErrorBackoffMax: 200 * time.Millisecond})
		if err != nil {
			t.Fatal(err)
		}
		if err := group.Add(name, relay); err != nil {
			t.Fatal(err)
		}
		srcs[i] = s
	}
	cut, routed := srcs[0], srcs[1]

	groupCtx, stopGroup := context.WithCancel(ctx)
	groupDone := make(chan error, 1)
	go func() { groupDone <- group.Run(groupCtx) }()
	prodCtx, stopProducers := context.WithCancel(ctx)
	var producers sync.WaitGroup
	for _, s := range srcs {
		producers.Go(func() { s.produce(prodCtx, t, rate) })
	}

	wait(ctx, time.Second)
	phase.Store(0)
	wait(ctx, calm)
	phase.Store(1)
	proxy.Refuse(true)
	proxy.Cut()
	routed.failing.Store(true)
	wait(ctx, failFor)
	routed.failing.Store(false)
	wait(ctx, cutFor-failFor)
	proxy.Refuse(false)
	wait(ctx, time.Second)
	stopProducers()
	producers.Wait()

	// Every source drains, the cut one included.
	for _, s := range srcs {
		for ctx.Err() == nil {
			tally, err := s.ledger.Tally(ctx, s.pool)
			if err != nil {
				t.Fatal(err)
			}
			if tally.Unpublished == 0 {
				break
			}
			wait(ctx, 100*time.Millisecond)
		}
	}
	stopGroup()
	if err := <-groupDone; err != nil {
		t.Fatal(err)
	}
	stats := map[string]postbox.RelayStats{}
	for _, st := range group.Stats() {
		stats[st.Name] = st.RelayStats
	}
	if st := stats[cut.name]; st.Errors == 0 || st.Unavailable == 0 {
		t.Errorf("the cut was not felt: source %s's relay saw %d errors and was unavailable %v", cut.name, st.Errors, st.Unavailable)
	}
	if st := stats[routed.name]; st.Unavailable == 0 {
		t.Errorf("the failing route was not felt: source %s's relay was never unavailable", routed.name)
	}

	var calmLat, faultLat []time.Duration
	var lost, dups int64
	for _, s := range srcs {
		tally, err := s.ledger.Tally(ctx, s.pool)
		if err != nil {
			t.Fatal(err)
		}
		role := "healthy"
		switch s {
		case cut:
			role = fmt.Sprintf("database cut %v", cutFor)
		case routed:
			role = fmt.Sprintf("broker route failing %v", failFor)
		}
		// A settle cut off mid-way republishes its batch: the cut source may publish its in-flight batches twice.
		bound := int64(0)
		if s == cut {
			bound = 100 * postbox.DefaultWorkers
		}
		fmt.Printf("%s/%s: %s; %d events committed; lost=%d duplicates_published=%d (bound %d)\n", t.Name(), s.name, role,
			tally.Committed, tally.Unpublished, tally.DuplicatesPublished, bound)
		lost, dups = lost+tally.Unpublished, dups+tally.DuplicatesPublished
		if tally.Unpublished != 0 {
			t.Errorf("source %s: %d committed events never published", s.name, tally.Unpublished)
		}
		if tally.DuplicatesPublished > bound {
			t.Errorf("source %s: %d published duplicates, over the bound of %d", s.name, tally.DuplicatesPublished, bound)
		}
		if s != cut && s != routed {
			calmLat, faultLat = append(calmLat, s.latencies[0]...), append(faultLat, s.latencies[1]...)
		}
	}
	p99Calm, p99Fault, maxFault := percentile(calmLat, 0.99), percentile(faultLat, 0.99), percentile(faultLat, 1)
	fmt.Printf("%s: lost=%d duplicates_published=%d over %d sources at %d events/s each; healthy sources' enqueue-to-publish p99 %v without faults, %v with one database cut and one route failing (max %v)\n",
		t.Name(), lost, dups, sources, rate, p99Calm.Round(time.Millisecond), p99Fault.Round(time.Millisecond), maxFault.Round(time.Millisecond))
	if maxFault >= cutFor {
		t.Errorf("a healthy source's message waited %v, as long as the cut: it waited for the cut source", maxFault)
	}
}

// produce commits rate events per second, each in a transaction of its own with its ledger row, until ctx is done.
func (s *multiSource) produce(ctx context.Context, t *testing.T, rate int) {
	tick := time.NewTicker(time.Second / time.Duration(rate))
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		err := s.client.InTx(ctx, func(ctx context.Context, tx pgx.Tx) error {
			id, err := s.client.Enqueue(ctx, tx, postbox.Message{Topic: "multi." + s.name, Type: "multi.event", Payload: []byte("{}")})
			if err != nil {
				return err
			}
			return s.ledger.Commit(ctx, tx, []string{id})
		})
		if err != nil && ctx.Err() == nil {
			t.Errorf("source %s: enqueue: %v", s.name, err)
			return
		}
	}
}

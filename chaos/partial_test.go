package chaos

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/postbox-go/postbox"
	"github.com/postbox-go/postbox/broker/webhook"
	"github.com/postbox-go/postbox/driver"
	"github.com/postbox-go/postbox/driver/pgxv5"
)

// The partial-failure scenarios (DESIGN.md invariant 9): two destinations behind one relay, webhook receivers on
// loopback reached through the webhook adapter and a postbox.Router, producers committing at a steady rate on a
// healthy topic and on the other destination's topic. Each scenario first runs without the fault, then with it, in
// the same test, and compares the healthy topic's commit-to-receipt latency of the two phases: what a fault holds
// back must be only its own destination's messages.

const partialSecret = "whsec_cGFydGlhbC1mYWlsdXJlcy1zdGF5LXBhcnRpYWwtMzI="

// Receiver behaviours.
const (
	answerOK   int32 = iota
	answer500        // a failure, not an outage
	answerSlow       // 2 s per request
)

// hookReceiver is a webhook receiver on loopback that can refuse connections, fail or answer slowly.
type hookReceiver struct {
	addr   string
	answer atomic.Int32
	mu     sync.Mutex
	srv    *http.Server
	got    map[string]time.Time // first receipt of each message ID
	order  map[string][]string  // IDs of each key, in the order first received
	tries  map[string]int       // requests per message ID
	copies int
}

func newHookReceiver(t *testing.T) *hookReceiver {
	t.Helper()
	r := &hookReceiver{got: map[string]time.Time{}, order: map[string][]string{}, tries: map[string]int{}}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	r.addr = ln.Addr().String()
	r.serve(ln)
	t.Cleanup(r.down)
	return r
}

func (r *hookReceiver) serve(ln net.Listener) {
	srv := &http.Server{Handler: http.HandlerFunc(r.handle), ReadHeaderTimeout: 5 * time.Second}
	r.mu.Lock()
	r.srv = srv
	r.mu.Unlock()
	go func() { _ = srv.Serve(ln) }()
}

// down closes the listener and every connection: connections are refused until up.
func (r *hookReceiver) down() {
	r.mu.Lock()
	srv := r.srv
	r.srv = nil
	r.mu.Unlock()
	if srv != nil {
		_ = srv.Close()
	}
}

// up listens again on the same address.
func (r *hookReceiver) up(t *testing.T) {
	ln, err := net.Listen("tcp", r.addr)
	if err != nil {
		t.Fatalf("listen again on %s: %v", r.addr, err)
	}
	r.serve(ln)
}

func (r *hookReceiver) handle(w http.ResponseWriter, req *http.Request) {
	id, key := req.Header.Get(webhook.HeaderID), req.Header.Get("ce-subject")
	r.mu.Lock()
	r.tries[id]++
	r.mu.Unlock()
	switch r.answer.Load() {
	case answer500:
		http.Error(w, "receiver failing", http.StatusInternalServerError)
		return
	case answerSlow:
		t := time.NewTimer(2 * time.Second) // the fault itself: a receiver that takes 2 s per request
		select {
		case <-t.C:
		case <-req.Context().Done():
			t.Stop()
			return
		}
	}
	now := time.Now()
	r.mu.Lock()
	if _, dup := r.got[id]; dup {
		r.copies++
	} else {
		r.got[id] = now
		r.order[key] = append(r.order[key], id)
	}
	r.mu.Unlock()
	w.WriteHeader(http.StatusNoContent)
}

func (r *hookReceiver) received(id string) (time.Time, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	at, ok := r.got[id]
	return at, ok
}

// inversions counts, per key, messages received before an earlier-enqueued one of the same key (IDs are UUIDv7,
// made in enqueue order by one producer).
func (r *hookReceiver) inversions() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	n := 0
	for _, ids := range r.order {
		for i := 1; i < len(ids); i++ {
			if ids[i] < ids[i-1] {
				n++
			}
		}
	}
	return n
}

// partial is one scenario's world: a table set on the shared server, the two receivers and the producer's record.
type partial struct {
	t                *testing.T
	pool             *pgxpool.Pool
	client           *postbox.Client[pgx.Tx]
	healthy, faulty  *hookReceiver
	logs             *Tail
	log              *slog.Logger
	mu               sync.Mutex
	commits          map[string]time.Time // commit time of every message
	topic            map[string]string
	healthyTopic     string
	faultyTopic      string
	phaseOf          map[string]int // the phase each message was committed in
	phase            atomic.Int32
	producing        sync.WaitGroup
	stopProducing    context.CancelFunc
	healthyPerSecond int
	faultyPerSecond  int
}

func newPartial(ctx context.Context, t *testing.T, name string, ordered bool) *partial {
	return newPartialOn(ctx, t, name, ordered, sharedDB, func(pool *pgxpool.Pool) driver.Driver[pgx.Tx] { return pgxv5.New(pool) })
}

// newPartialOn is newPartial on the database at dbURL, through the driver drv makes.
func newPartialOn(ctx context.Context, t *testing.T, name string, ordered bool, dbURL string,
	drv func(*pgxpool.Pool) driver.Driver[pgx.Tx]) *partial {
	t.Helper()
	p := &partial{t: t, commits: map[string]time.Time{}, topic: map[string]string{}, phaseOf: map[string]int{},
		healthyTopic: "orders.created", faultyTopic: "warehouse.pick", healthyPerSecond: 100, faultyPerSecond: 20}
	p.logs = NewTail(200)
	p.log = slog.New(slog.NewTextHandler(p.logs, &slog.HandlerOptions{Level: slog.LevelInfo}))
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("the relay's last log lines:\n%s", p.logs)
		}
	})
	var err error
	if p.pool, err = pgxpool.New(ctx, dbURL); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(p.pool.Close)
	table := fmt.Sprintf("partial_%s_%d", name, time.Now().UnixNano()%1_000_000)
	if p.client, err = postbox.NewClient(drv(p.pool), &postbox.Config{Table: table + "_outbox",
		InboxTable: table + "_inbox", Ordered: ordered, Logger: p.log}); err != nil {
		t.Fatal(err)
	}
	if _, err := p.client.Migrate(ctx); err != nil {
		t.Fatal(err)
	}
	p.healthy, p.faulty = newHookReceiver(t), newHookReceiver(t)
	return p
}

// router is the relay's publisher: the warehouse topics to the faulty receiver, the rest to the healthy one.
func (p *partial) router() *postbox.Router {
	p.t.Helper()
	hook := func(r *hookReceiver) postbox.Publisher {
		pub, err := webhook.NewPublisher(&webhook.PublisherConfig{URL: "http://" + r.addr + "/in", Secret: partialSecret, Logger: p.log})
		if err != nil {
			p.t.Fatal(err)
		}
		return pub
	}
	return &postbox.Router{Routes: []postbox.Route{{Topics: "warehouse.*", Publisher: hook(p.faulty), Name: "warehouse"}},
		Default: hook(p.healthy), DefaultName: "orders"}
}

// produce commits one message per transaction, each topic at its rate, each message on one of ten keys of its
// topic, until stop.
func (p *partial) produce(ctx context.Context) {
	ctx, p.stopProducing = context.WithCancel(ctx)
	for _, spec := range []struct {
		topic string
		rate  int
	}{{p.healthyTopic, p.healthyPerSecond}, {p.faultyTopic, p.faultyPerSecond}} {
		p.producing.Add(1)
		go func() {
			defer p.producing.Done()
			tick := time.NewTicker(time.Second / time.Duration(spec.rate))
			defer tick.Stop()
			for n := 0; ; n++ {
				select {
				case <-ctx.Done():
					return
				case <-tick.C:
				}
				m := postbox.Message{ID: postbox.NewID(), Topic: spec.topic, Type: "partial", Key: fmt.Sprintf("%s-%d", spec.topic, n%10),
					Payload: []byte(`{}`)}
				phase := int(p.phase.Load())
				err := p.client.InTx(ctx, func(ctx context.Context, tx pgx.Tx) error {
					_, err := p.client.Enqueue(ctx, tx, m)
					return err
				})
				if err != nil {
					if ctx.Err() == nil {
						p.t.Errorf("enqueue: %v", err)
					}
					return
				}
				at := time.Now()
				p.mu.Lock()
				p.commits[m.ID], p.topic[m.ID], p.phaseOf[m.ID] = at, spec.topic, phase
				p.mu.Unlock()
			}
		}()
	}
}

func (p *partial) stop() {
	p.stopProducing()
	p.producing.Wait()
}

// latency returns the healthy topic's commit-to-receipt latencies of the messages committed in phase, and how
// many of them were not received.
func (p *partial) latency(phase int) (lat []time.Duration, missing int) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for id, at := range p.commits {
		if p.topic[id] != p.healthyTopic || p.phaseOf[id] != phase {
			continue
		}
		if got, ok := p.healthy.received(id); ok {
			lat = append(lat, got.Sub(at))
		} else {
			missing++
		}
	}
	slices.Sort(lat)
	return lat, missing
}

func quantile(lat []time.Duration, q float64) time.Duration {
	if len(lat) == 0 {
		return 0
	}
	return lat[min(len(lat)-1, int(q*float64(len(lat))))]
}

// compare fails unless the healthy topic's p99 in the fault phase is within 2× of the fault-free phase's. A
// loaded two-core machine moves a p99 of a few milliseconds by a few milliseconds either way, so the bound is
// 2× the fault-free p99 or that p99 plus 25 ms, whichever is larger; a fault that holds the healthy topic back
// costs it seconds.
func (p *partial) compare(fault string) {
	p.t.Helper()
	base, lostBase := p.latency(0)
	during, lostDuring := p.latency(1)
	if len(base) < 100 || len(during) < 100 {
		p.t.Fatalf("too few healthy messages measured: %d without the fault, %d with it", len(base), len(during))
	}
	b99, d99 := quantile(base, 0.99), quantile(during, 0.99)
	fmt.Printf("%s: healthy topic commit-to-receipt p50 %v / %v, p99 %v / %v (without / with %s; %d and %d messages)\n",
		p.t.Name(), quantile(base, 0.5).Round(100*time.Microsecond), quantile(during, 0.5).Round(100*time.Microsecond),
		b99.Round(100*time.Microsecond), d99.Round(100*time.Microsecond), fault, len(base), len(during))
	if lostBase+lostDuring > 0 {
		p.t.Errorf("%d healthy messages never received", lostBase+lostDuring)
	}
	if bound := max(2*b99, b99+25*time.Millisecond); d99 > bound {
		p.t.Errorf("with %s the healthy topic's p99 is %v, over %v (2× its fault-free %v): the fault held back a healthy destination",
			fault, d99, bound, b99)
	}
}

// awaitAll waits until every message committed is received by its receiver, or counts as settled by done, and
// returns when the last of those of the faulty topic arrived.
func (p *partial) awaitAll(ctx context.Context, done func(id string) bool) time.Time {
	p.t.Helper()
	var last time.Time
	for {
		missing := 0
		last = time.Time{}
		p.mu.Lock()
		for id := range p.commits {
			r := p.healthy
			if p.topic[id] == p.faultyTopic {
				r = p.faulty
			}
			at, ok := r.received(id)
			switch {
			case ok && r == p.faulty && at.After(last):
				last = at
			case !ok && (done == nil || !done(id)):
				missing++
			}
		}
		p.mu.Unlock()
		if missing == 0 {
			return last
		}
		if ctx.Err() != nil {
			p.t.Fatalf("%d committed messages were never published: lost", missing)
		}
		wait(ctx, 20*time.Millisecond)
	}
}

// firstAfter returns the first receipt by r after t.
func firstAfter(r *hookReceiver, t time.Time) time.Time {
	r.mu.Lock()
	defer r.mu.Unlock()
	var first time.Time
	for _, at := range r.got {
		if at.After(t) && (first.IsZero() || at.Before(first)) {
			first = at
		}
	}
	return first
}

// start runs a relay with cfg through the router, starts the producers, lets the fault-free phase run and moves
// to the fault phase; the caller injects the fault. It returns the relay, stopped when the test ends.
func (p *partial) start(ctx context.Context, cfg *postbox.RelayConfig) *postbox.Relay {
	p.t.Helper()
	relay, err := postbox.NewRelay(p.client, p.router(), cfg)
	if err != nil {
		p.t.Fatal(err)
	}
	p.t.Cleanup(p.run(ctx, relay))
	p.produce(ctx)
	wait(ctx, size(4*time.Second, 20*time.Second))
	p.phase.Store(1)
	return relay
}

func (p *partial) run(ctx context.Context, relay *postbox.Relay) func() {
	rctx, stop := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- relay.Run(rctx) }()
	return func() {
		stop()
		if err := <-done; err != nil {
			p.t.Error(err)
		}
	}
}

// TestPartialDestinationDown: one of two destinations refuses connections for 20 s, then is back. The healthy
// topic keeps its latency, nothing is lost, and the down destination's messages flow again within a second of
// its return.
func TestPartialDestinationDown(t *testing.T) {
	partialDown(t, false)
}

// TestPartialDestinationDownOrdered: the same in ordered mode. Only the down destination's keys wait, and no key
// is ever received out of order.
func TestPartialDestinationDownOrdered(t *testing.T) {
	partialDown(t, true)
}

func partialDown(t *testing.T, ordered bool) {
	ctx, cancel := context.WithTimeout(context.Background(), deadline())
	defer cancel()
	name := "down"
	if ordered {
		name = "downord"
	}
	p := newPartial(ctx, t, name, ordered)
	relay := p.start(ctx, nil)
	p.faulty.down()
	downAt := time.Now()
	wait(ctx, 20*time.Second)
	st := relay.Stats()
	p.faulty.up(t)
	backAt := time.Now()
	p.phase.Store(2)
	wait(ctx, time.Second)
	p.stop()
	last := p.awaitAll(ctx, nil)
	first := firstAfter(p.faulty, backAt)
	fmt.Printf("%s: the warehouse destination down %v; its first message after its return %v later, its backlog all received %v after\n",
		t.Name(), backAt.Sub(downAt).Round(time.Millisecond), first.Sub(backAt).Round(time.Millisecond), last.Sub(backAt).Round(time.Millisecond))
	p.compare("the warehouse destination refusing connections")
	if first.IsZero() || first.Sub(backAt) > time.Second {
		t.Errorf("the down destination's first message came %v after its return, want within 1s (ErrorBackoffMax)", first.Sub(backAt))
	}
	if last.Sub(backAt) > 3*time.Second {
		t.Errorf("the down destination's backlog took %v after its return to arrive, want within 3s", last.Sub(backAt))
	}
	var down *postbox.DestinationHealth
	for i, d := range st.Destinations {
		if d.Name == "warehouse" {
			down = &st.Destinations[i]
		}
	}
	if down == nil || down.State != postbox.DestinationDown || !slices.Contains(down.Topics, p.faultyTopic) || down.Waiting == 0 {
		t.Errorf("RelayStats.Destinations during the outage = %+v, want warehouse down, naming %s, with messages waiting", st.Destinations, p.faultyTopic)
	}
	if !strings.Contains(p.logs.String(), "destination down") || !strings.Contains(p.logs.String(), "destination available again") {
		t.Errorf("the relay did not log the destination going down and coming back")
	}
	if strings.Contains(p.logs.String(), "relay cannot work") {
		t.Errorf("the relay logged that it cannot work while a healthy destination took messages")
	}
	if n := p.healthy.inversions() + p.faulty.inversions(); ordered && n > 0 {
		t.Errorf("%d messages were received before an earlier message of their key", n)
	}
}

// TestPartialDestinationFailing: one destination answers HTTP 500 for 8 s: a failure, not an outage. Its messages
// are retried with their backoff and parked as dead after MaxAttempts; the healthy topic is unaffected.
func TestPartialDestinationFailing(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), deadline())
	defer cancel()
	p := newPartial(ctx, t, "fail", false)
	p.start(ctx, &postbox.RelayConfig{MaxAttempts: 3,
		BackoffBase: 200 * time.Millisecond, BackoffMax: 400 * time.Millisecond})
	p.faulty.answer.Store(answer500)
	failFrom := time.Now()
	wait(ctx, 8*time.Second)
	p.stop()
	wait(ctx, 2*time.Second) // the last failing messages' three attempts: 0.2 s and at most 0.4 s apart
	p.faulty.answer.Store(answerOK)
	dead := map[string]int{}
	rows, err := p.pool.Query(ctx, "SELECT id::text, attempts FROM "+p.client.Config().Table+" WHERE status = 'dead'")
	if err != nil {
		t.Fatal(err)
	}
	for rows.Next() {
		var id string
		var n int
		if err := rows.Scan(&id, &n); err != nil {
			t.Fatal(err)
		}
		dead[id] = n
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	p.awaitAll(ctx, func(id string) bool { _, ok := dead[id]; return ok })
	p.compare("the warehouse destination answering 500")
	failing := 0
	p.mu.Lock()
	for id, at := range p.commits {
		if p.topic[id] != p.faultyTopic || at.Before(failFrom.Add(100*time.Millisecond)) || at.After(failFrom.Add(7*time.Second)) {
			continue
		}
		failing++
		if n, ok := dead[id]; !ok || n != 3 {
			t.Errorf("message %s, committed while its destination answered 500: dead=%v attempts=%d, want parked after 3 attempts", id, ok, n)
		}
	}
	p.mu.Unlock()
	if failing < 50 {
		t.Fatalf("only %d messages met the failing destination", failing)
	}
	fmt.Printf("%s: %d messages met the failing destination and were parked as dead after 3 attempts\n", t.Name(), failing)
	if strings.Contains(p.logs.String(), "destination down") {
		t.Errorf("a destination answering 500 was taken for one that is down")
	}
}

// TestPartialDestinationSlow: one destination takes 2 s per request for 8 s. It holds at most one claim at a
// time, so the healthy topic is unaffected, and its own messages are all delivered.
func TestPartialDestinationSlow(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), deadline())
	defer cancel()
	p := newPartial(ctx, t, "slow", false)
	p.faultyPerSecond = 5
	relay := p.start(ctx, nil)
	p.faulty.answer.Store(answerSlow)
	wait(ctx, 8*time.Second)
	st := relay.Stats()
	p.faulty.answer.Store(answerOK)
	p.phase.Store(2)
	p.stop()
	p.awaitAll(ctx, nil)
	p.compare("the warehouse destination taking 2 s per request")
	slow := false
	for _, d := range st.Destinations {
		slow = slow || (d.Name == "warehouse" && d.State == postbox.DestinationSlow)
	}
	if !slow {
		t.Errorf("RelayStats.Destinations = %+v during the slow phase, want warehouse slow", st.Destinations)
	}
}

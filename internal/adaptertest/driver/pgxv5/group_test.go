package pgxv5_test

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/postbox-go/postbox"
	"github.com/postbox-go/postbox/driver/drivertest"
	"github.com/postbox-go/postbox/driver/pgxv5"
	"github.com/postbox-go/postbox/internal/testenv"
	"github.com/postbox-go/postbox/internal/testenv/tcpproxy"
	"github.com/postbox-go/postbox/postboxtest"
)

// groupSource is one table set of a group test: its client, its publisher and the IDs its producer committed.
type groupSource struct {
	name   string
	client *postbox.Client[pgx.Tx]
	rec    *postboxtest.Recorder
	mu     sync.Mutex
	ids    []string
}

func newGroupSource(t *testing.T, pool *pgxpool.Pool, name string) *groupSource {
	t.Helper()
	c := drivertest.Client(t, pgxv5.New(pool), drivertest.Tables(nil))
	return &groupSource{name: name, client: c, rec: &postboxtest.Recorder{}}
}

func (s *groupSource) relay(t *testing.T, pub postbox.Publisher) *postbox.Relay {
	t.Helper()
	if pub == nil {
		pub = s.rec
	}
	r, err := postbox.NewRelay(s.client, pub, &postbox.RelayConfig{BatchSize: 50, ErrorBackoffBase: 10 * time.Millisecond,
		ErrorBackoffMax: 100 * time.Millisecond, PublishTimeout: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// produce enqueues one message at a time on s until ctx is done.
func (s *groupSource) produce(ctx context.Context, t *testing.T, every time.Duration) {
	for ctx.Err() == nil {
		var id string
		err := s.client.InTx(ctx, func(ctx context.Context, tx pgx.Tx) (err error) {
			id, err = s.client.Enqueue(ctx, tx, postbox.Message{Topic: "group." + s.name, Type: "group.test", Payload: []byte("{}")})
			return err
		})
		if err == nil {
			s.mu.Lock()
			s.ids = append(s.ids, id)
			s.mu.Unlock()
		} else if ctx.Err() == nil {
			t.Errorf("enqueue on %s: %v", s.name, err)
			return
		}
		select {
		case <-ctx.Done():
		case <-time.After(every):
		}
	}
}

func (s *groupSource) committed() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]string(nil), s.ids...)
}

// TestRelayGroupAddsAndRemovesSourcesUnderLoad: sources added to and removed from a running group while every
// source's producer enqueues. Every committed message of a source is published exactly once (a removed source's
// relay settles its in-flight batches before Remove returns, so re-adding it later publishes nothing twice), and
// a source added while the group runs starts publishing at once.
func TestRelayGroupAddsAndRemovesSourcesUnderLoad(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	pool, err := pgxpool.New(ctx, dbURL)
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Close()
	a, b, c := newGroupSource(t, pool, "a"), newGroupSource(t, pool, "b"), newGroupSource(t, pool, "c")

	group, err := postbox.NewRelayGroup(nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range []*groupSource{a, b} {
		if err := group.Add(s.name, s.relay(t, nil)); err != nil {
			t.Fatal(err)
		}
	}
	groupCtx, stopGroup := context.WithCancel(ctx)
	groupDone := make(chan error, 1)
	go func() { groupDone <- group.Run(groupCtx) }()

	prodCtx, stopProducers := context.WithCancel(ctx)
	var producers sync.WaitGroup
	for _, s := range []*groupSource{a, b, c} {
		producers.Go(func() { s.produce(prodCtx, t, 2*time.Millisecond) })
	}
	defer func() { stopProducers(); producers.Wait() }() // before the pool closes, also when the test fails
	for _, s := range []*groupSource{a, b} {
		if !s.rec.WaitDistinct(ctx, 1, 10*time.Second) {
			t.Fatalf("source %s: nothing published within 10s of the group's Run", s.name)
		}
	}
	// The group runs: a second Run must refuse at once. Were it to run instead, it would return only at ctx's end.
	second := make(chan error, 1)
	go func() { second <- group.Run(ctx) }()
	select {
	case err := <-second:
		if err == nil {
			t.Fatal("a second Run of a running group returned nil, want an error")
		}
	case <-time.After(10 * time.Second):
		t.Fatal("a second Run of a running group did not return within 10s, want an error at once")
	}
	if err := group.Add("b", c.relay(t, nil)); !errors.Is(err, postbox.ErrInvalidConfig) {
		t.Fatalf("Add of a name already in the group: %v, want ErrInvalidConfig", err)
	}
	if err := group.Add("c d", c.relay(t, nil)); !errors.Is(err, postbox.ErrInvalidConfig) {
		t.Fatalf("Add of a name with a space: %v, want ErrInvalidConfig", err)
	}
	if err := group.Add("c", c.relay(t, nil)); err != nil {
		t.Fatal(err)
	}
	if !c.rec.WaitDistinct(ctx, 1, 10*time.Second) {
		t.Fatal("source c, added while the group runs, published nothing within 10s")
	}
	if err := group.Remove(ctx, "a"); err != nil {
		t.Fatal(err)
	}
	removed, removedAt := a.rec.Distinct(), len(a.committed())
	if err := group.Remove(ctx, "a"); !errors.Is(err, postbox.ErrUnknownSource) {
		t.Fatalf("second Remove of a: %v, want ErrUnknownSource", err)
	}
	if got := fmt.Sprint(group.Names()); got != "[b c]" {
		t.Fatalf("sources after removing a: %s", got)
	}
	// a's messages enqueued since its removal wait in its table until it is added again. b's relay runs as a's did:
	// once b has published every message it committed after a's twentieth since the removal, a running relay of
	// a would have published those twenty too.
	testenv.Eventually(t, "20 messages committed on a since its removal", func() bool { return len(a.committed()) >= removedAt+20 })
	if n := len(b.committed()); !b.rec.WaitDistinct(ctx, n, 10*time.Second) {
		t.Fatalf("source b: %d of %d committed messages published within 10s", b.rec.Distinct(), n)
	}
	if n := a.rec.Distinct() - removed; n != 0 {
		t.Fatalf("source a: %d messages published after Remove returned, want none until it is added again", n)
	}
	if st, err := a.client.Stats(ctx); err != nil || st.Pending < 20 {
		t.Fatalf("source a: %d messages pending in its table after its removal (%v), want the 20 or more committed since", st.Pending, err)
	}
	if err := group.Add("a", a.relay(t, nil)); err != nil {
		t.Fatal(err)
	}
	if n := len(a.committed()); !a.rec.WaitDistinct(ctx, n, 10*time.Second) {
		t.Fatalf("source a, added again: %d of the %d messages committed so far published within 10s", a.rec.Distinct(), n)
	}
	stopProducers()
	producers.Wait()

	for _, s := range []*groupSource{a, b, c} {
		ids := s.committed()
		if !s.rec.WaitDistinct(ctx, len(ids), 30*time.Second) {
			t.Fatalf("source %s: %d of %d committed messages published", s.name, s.rec.Distinct(), len(ids))
		}
		counts := s.rec.Counts()
		for _, id := range ids {
			if counts[id] != 1 {
				t.Errorf("source %s: message %s published %d times, want once", s.name, id, counts[id])
			}
		}
		t.Logf("source %s: %d committed, %d published", s.name, len(ids), len(s.rec.Records()))
	}
	stats := group.Stats()
	if len(stats) != 3 || stats[0].Name != "a" || stats[2].Name != "c" {
		t.Fatalf("Stats: %+v, want a, b and c in order", stats)
	}
	stopGroup()
	waitGroupDone(t, groupDone)
}

// stuckPublisher fails every message as the broker being unavailable while failing is set.
type stuckPublisher struct {
	next    postbox.Publisher
	failing atomic.Bool
}

func (p *stuckPublisher) Publish(ctx context.Context, recs []postbox.Record) error {
	if p.failing.Load() {
		return postbox.Unavailable(errors.New("route down"))
	}
	return p.next.Publish(ctx, recs)
}

// TestRelayGroupIsolatesSources: one source's database cut off, another's broker route failing and a third's
// backlog draining through a slow broker delay no message of a healthy source, and once they are back the failing
// sources drain with nothing lost.
func TestRelayGroupIsolatesSources(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	pool, err := pgxpool.New(ctx, dbURL)
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Close()
	u, err := url.Parse(dbURL)
	if err != nil {
		t.Fatal(err)
	}
	proxy := tcpproxy.Start(t, u.Host)
	via := *u
	via.Host = proxy.Addr()
	cutPool, err := pgxpool.New(ctx, via.String())
	if err != nil {
		t.Fatal(err)
	}
	defer cutPool.Close()

	healthy, cut, routed := newGroupSource(t, pool, "healthy"), newGroupSource(t, pool, "cut"), newGroupSource(t, pool, "routed")
	// A source with a backlog and a slow broker: it drains for the whole test, on workers of its own.
	backlog := newGroupSource(t, pool, "backlog")
	if err := backlog.client.InTx(ctx, func(ctx context.Context, tx pgx.Tx) error {
		msgs := make([]postbox.Message, 5000)
		for i := range msgs {
			msgs[i] = postbox.Message{Topic: "group.backlog", Type: "group.test", Payload: []byte("{}")}
		}
		return backlog.client.EnqueueBatch(ctx, tx, msgs)
	}); err != nil {
		t.Fatal(err)
	}
	slow := postbox.PublisherFunc(func(ctx context.Context, recs []postbox.Record) error {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(100 * time.Millisecond):
		}
		return backlog.rec.Publish(ctx, recs)
	})
	// The cut source's relay reaches its tables through the proxy; its producer does not.
	cutRelayClient, err := postbox.NewClient(pgxv5.New(cutPool), cutConfig(cut))
	if err != nil {
		t.Fatal(err)
	}
	cutRelay, err := postbox.NewRelay(cutRelayClient, cut.rec, &postbox.RelayConfig{ErrorBackoffBase: 10 * time.Millisecond,
		ErrorBackoffMax: 100 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	route := &stuckPublisher{next: routed.rec}
	group, err := postbox.NewRelayGroup(nil)
	if err != nil {
		t.Fatal(err)
	}
	for name, r := range map[string]*postbox.Relay{"healthy": healthy.relay(t, nil), "cut": cutRelay, "routed": routed.relay(t, route),
		"backlog": backlog.relay(t, slow)} {
		if err := group.Add(name, r); err != nil {
			t.Fatal(err)
		}
	}
	groupCtx, stopGroup := context.WithCancel(ctx)
	groupDone := make(chan error, 1)
	go func() { groupDone <- group.Run(groupCtx) }()

	proxy.Refuse(true)
	proxy.Cut()
	route.failing.Store(true)
	prodCtx, stopProducers := context.WithTimeout(ctx, time.Second)
	var producers sync.WaitGroup
	for _, s := range []*groupSource{healthy, cut, routed} {
		producers.Go(func() { s.produce(prodCtx, t, 5*time.Millisecond) })
	}
	producers.Wait()
	stopProducers()
	if n := len(healthy.committed()); !healthy.rec.WaitDistinct(ctx, n, 5*time.Second) {
		t.Fatalf("healthy source: %d of %d published while the others failed", healthy.rec.Distinct(), n)
	}
	if got := cut.rec.Distinct() + routed.rec.Distinct(); got != 0 {
		t.Fatalf("%d messages of the failing sources published while they failed", got)
	}
	if n := backlog.rec.Distinct(); n >= 5000 {
		t.Fatalf("the backlog drained already (%d): the check above proves nothing about it", n)
	}
	proxy.Refuse(false)
	route.failing.Store(false)
	for _, s := range []*groupSource{cut, routed} {
		if n := len(s.committed()); !s.rec.WaitDistinct(ctx, n, 20*time.Second) {
			t.Fatalf("source %s: %d of %d published after it came back", s.name, s.rec.Distinct(), n)
		}
	}
	stopGroup()
	waitGroupDone(t, groupDone)
}

// cutConfig is the table set of s, for a second client on it.
func cutConfig(s *groupSource) *postbox.Config {
	cfg := s.client.Config()
	return &cfg
}

// waitGroupDone fails the test unless the group's Run returned nil within 30s of its context's end.
func waitGroupDone(t *testing.T, done <-chan error) {
	t.Helper()
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("the group's Run did not return within 30s of its context's end: a source's relay did not stop")
	}
}

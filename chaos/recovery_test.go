package chaos

import (
	"context"
	"fmt"
	"net"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/postbox-go/postbox"
)

// The recovery scenarios measure how soon relays work again after their database or broker comes back: for each
// of three relays (two workers each, default retry settings), the time from the server accepting connections
// again to the relay's first acknowledged publish, and the time to drain a backlog that became due during the
// outage, against the time the same backlog takes with no outage. They fail when the 99th percentile of the
// first is over a second, or the drain takes more than twice as long as without the outage.

const (
	recoveryRelays  = 3
	recoveryBacklog = 20000
	maxResume       = time.Second
)

// recoveryOutages are the outages each scenario runs, one after the other.
var recoveryOutages = []time.Duration{3 * time.Second, 15 * time.Second}

// TestRecoveryPostgres: the scenario's own PostgreSQL cluster is stopped at once (pg_ctl -m immediate: every
// server process ends as in a crash, and the next start replays the WAL) for 3 s and then 15 s.
func TestRecoveryPostgres(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), deadline())
	defer cancel()
	cluster := ownCluster(ctx, t)
	w := newWorld(t, "recoverpg", worldOptions{db: cluster.URL("chaos")})
	accepting := func(ctx context.Context) bool {
		conn, err := pgx.Connect(ctx, cluster.URL("chaos"))
		if err != nil {
			return false
		}
		_ = conn.Close(ctx)
		return true
	}
	runRecovery(ctx, t, w, "PostgreSQL stopped with pg_ctl -m immediate", func(down time.Duration) {
		if err := cluster.Stop(ctx, PGImmediate); err != nil {
			t.Fatal(err)
		}
		wait(ctx, down)
	}, func() {
		if err := cluster.Start(ctx); err != nil {
			t.Fatal(err)
		}
	}, accepting)
}

// TestRecoveryNATS: the scenario's own nats-server is killed (SIGKILL) for 3 s and then 15 s, and started again on
// the same port and store.
func TestRecoveryNATS(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), deadline())
	defer cancel()
	w := newWorld(t, "recovernats", worldOptions{})
	accepting := func(ctx context.Context) bool {
		var d net.Dialer
		c, err := d.DialContext(ctx, "tcp", w.nats.Addr())
		if err != nil {
			return false
		}
		_ = c.Close()
		return true
	}
	runRecovery(ctx, t, w, "nats-server killed with SIGKILL", func(down time.Duration) {
		w.nats.Stop(syscall.SIGKILL)
		wait(ctx, down)
	}, func() {
		if err := w.nats.Start(ctx); err != nil {
			t.Fatal(err)
		}
	}, accepting)
}

// runRecovery runs three relays, measures the drain of a backlog with no outage, then for each outage: enqueues a
// backlog that becomes due during the outage, stops the server (stop), starts it again (start), and measures from
// the moment accepting first reports it accepting connections.
func runRecovery(ctx context.Context, t *testing.T, w *world, fault string, stop func(down time.Duration), start func(),
	accepting func(ctx context.Context) bool) {
	t.Helper()
	acks := &ackTimes{}
	for i := range recoveryRelays {
		cfg := w.relayConfig()
		cfg.Workers, cfg.Backoff, cfg.PollInterval = 2, 0, postbox.DefaultPollInterval
		w.goRole(func(ctx context.Context) error {
			return runRelay(ctx, cfg, w.log, func(ids []string) {
				w.ledger.Published(ids...)
				acks.add(i, time.Now())
			}, &w.stats)
		})
	}

	due := time.Now().Add(2 * time.Second)
	w.backlog(ctx, recoveryBacklog, due)
	baseline := w.drained(ctx, due)
	fmt.Printf("%s: %d relays; a backlog of %d messages due at once drains in %v with no outage\n",
		t.Name(), recoveryRelays, recoveryBacklog, baseline.Round(time.Millisecond))

	var resumes []time.Duration
	for _, down := range recoveryOutages {
		w.backlog(ctx, recoveryBacklog, time.Now().Add(2*time.Second)) // due during the outage
		stop(down)
		up := make(chan time.Time, 1)
		go func() { up <- firstAccepted(ctx, accepting) }()
		start()
		tUp := <-up
		drain := w.drained(ctx, tUp)
		gaps := acks.firstAfter(tUp)
		resumes = append(resumes, gaps...)
		fmt.Printf("%s: %s, down %v: accepting again -> first publish per relay %v; backlog of %d drained %v after (no outage: %v)\n",
			t.Name(), fault, down, roundAll(gaps), recoveryBacklog, drain.Round(time.Millisecond), baseline.Round(time.Millisecond))
		if len(gaps) < recoveryRelays {
			t.Errorf("outage of %v: only %d of %d relays published again", down, len(gaps), recoveryRelays)
		}
		if drain > 2*baseline {
			t.Errorf("outage of %v: the backlog drained %v after the server came back, over twice the %v it takes with no outage",
				down, drain, baseline)
		}
	}
	w.shutdown()
	w.stats.mu.Lock()
	unavailable := w.stats.relay.Unavailable
	w.stats.mu.Unlock()
	p99 := percentile(resumes, 0.99)
	fmt.Printf("%s: resume after %s: p99 %v, max %v over %d relay restarts; relays unable to work %v in all; %s\n", t.Name(),
		fault, p99.Round(time.Millisecond), slices.Max(resumes).Round(time.Millisecond), len(resumes),
		unavailable.Round(time.Millisecond), &w.stats)
	if unavailable == 0 {
		t.Errorf("the relays never reported being unable to work: the outage was not felt")
	}
	if p99 > maxResume {
		t.Errorf("p99 time from the server accepting connections to a relay's first publish is %v, want at most %v", p99, maxResume)
	}
}

// backlog commits n messages of the scenario's topic, due at due, in transactions of 500.
func (w *world) backlog(ctx context.Context, n int, due time.Time) {
	w.t.Helper()
	for n > 0 {
		msgs := w.events(min(n, 500), 0, 0, 1)
		for i := range msgs {
			msgs[i].AvailableAt = due
		}
		if err := w.commit(ctx, msgs...); err != nil {
			w.t.Fatal(err)
		}
		n -= len(msgs)
	}
}

// drained waits until the outbox has nothing pending and returns the time since from.
func (w *world) drained(ctx context.Context, from time.Time) time.Duration {
	w.t.Helper()
	for {
		qctx, cancel := context.WithTimeout(ctx, 2*time.Second)
		s, err := w.client.Stats(qctx)
		cancel()
		if err == nil && s.Pending == 0 && s.Dead == 0 {
			return time.Since(from)
		}
		if ctx.Err() != nil {
			w.t.Fatalf("the backlog did not drain: %+v %v", s, err)
		}
		wait(ctx, 10*time.Millisecond)
	}
}

// firstAccepted polls accepting every 5 ms and returns when it first reports true.
func firstAccepted(ctx context.Context, accepting func(ctx context.Context) bool) time.Time {
	for ctx.Err() == nil {
		actx, cancel := context.WithTimeout(ctx, time.Second)
		ok := accepting(actx)
		cancel()
		if ok {
			return time.Now()
		}
		wait(ctx, 5*time.Millisecond)
	}
	return time.Now()
}

// ackTimes records when each relay had a batch acknowledged.
type ackTimes struct {
	mu    sync.Mutex
	times [recoveryRelays][]time.Time
}

func (a *ackTimes) add(relay int, at time.Time) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.times[relay] = append(a.times[relay], at)
}

// firstAfter returns, for each relay that published after t, how long after t it first did.
func (a *ackTimes) firstAfter(t time.Time) []time.Duration {
	a.mu.Lock()
	defer a.mu.Unlock()
	var gaps []time.Duration
	for _, times := range a.times {
		for _, at := range times {
			if at.After(t) {
				gaps = append(gaps, at.Sub(t))
				break
			}
		}
	}
	return gaps
}

// percentile returns the p-th percentile of ds (nearest rank).
func percentile(ds []time.Duration, p float64) time.Duration {
	if len(ds) == 0 {
		return 0
	}
	s := slices.Clone(ds)
	slices.Sort(s)
	i := int(float64(len(s))*p+0.999999) - 1
	return s[max(0, min(i, len(s)-1))]
}

func roundAll(ds []time.Duration) string {
	parts := make([]string, len(ds))
	for i, d := range ds {
		parts[i] = d.Round(time.Millisecond).String()
	}
	return "[" + strings.Join(parts, " ") + "]"
}

package bench

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/postbox-go/postbox"
)

// benchLatency commits o.Rate events per second, one per transaction, with a relay running with its defaults,
// and measures the time from each commit returning to the publisher acknowledging the event. Then it watches the
// idle relay and counts the statements it sends. The baseline is the offered rate: the ratio says whether the
// relay kept up.
func benchLatency[TTx any](ctx context.Context, t *target[TTx], o Options) (Result, error) {
	const table, producers = "bench_latency", 16
	c, err := t.open(ctx, producers+2+o.workers(false))
	if err != nil {
		return Result{}, err
	}
	defer c.close()
	client, err := newOutbox(ctx, t, c, table, o.clientConfig())
	if err != nil {
		return Result{}, err
	}
	defer dropOutbox(context.WithoutCancel(ctx), t, c, table)
	if err := settle(ctx, t, c, table); err != nil {
		return Result{}, err
	}

	warmup := min(time.Second, o.Duration/5)
	lat := newLatencies(time.Now().Add(warmup))
	var batches int64
	pub := postbox.PublisherFunc(func(_ context.Context, batch []postbox.Record) error {
		now := time.Now()
		atomic.AddInt64(&batches, 1)
		for _, r := range batch {
			lat.acked(r.ID, now)
		}
		return nil
	})
	var relay *backgroundRelay[TTx]
	if o.LocalRelay {
		relay, err = startLocalRelay(ctx, c, client, pub, o)
	} else {
		relay, err = startRelay(ctx, t, client, pub, o)
	}
	if err != nil {
		return Result{}, err
	}
	defer relay.close()

	o.Logger.Info("producing at a steady rate", "rate", o.Rate, "duration", o.Duration)
	sent, err := produceAtRate(ctx, o.Rate, o.Duration, producers, func(ctx context.Context, seq int) error {
		m := o.message(seq)
		var id string
		err := client.InTx(ctx, func(ctx context.Context, tx TTx) (err error) {
			id, err = client.Enqueue(ctx, tx, m)
			return err
		})
		if err == nil {
			lat.committed(id, time.Now())
		}
		return err
	})
	if err != nil {
		return Result{}, err
	}
	if !lat.waitDelivered(ctx, 30*time.Second) {
		return Result{}, fmt.Errorf("relay left %d of %d events unpublished after 30s", lat.pending(), sent)
	}

	// Let the relay fall idle (its follow-up claims end, and its looks slow down to one per poll interval), then
	// count what it asks the database.
	pause(ctx, time.Second+time.Duration(postbox.DefaultQuietDivisor)*postbox.DefaultPollInterval)
	q0 := relay.conns.queries()
	pause(ctx, o.IdleWindow)
	q1 := relay.conns.queries()
	if err := relay.stop(); err != nil {
		return Result{}, err
	}

	d := lat.sorted()
	if len(d) == 0 {
		return Result{}, fmt.Errorf("no events measured")
	}
	res := newResult(rate(sent, o.Duration), float64(o.Rate))
	res.Latency = &Latency{P50: quantile(d, 0.50), P99: quantile(d, 0.99), Max: d[len(d)-1], IdleQueriesPerS: -1}
	if q0 >= 0 {
		res.Latency.IdleQueriesPerS = float64(q1-q0) / o.IdleWindow.Seconds()
	}
	res.Extra["measured"] = float64(len(d))
	res.Extra["batches"] = float64(batches)
	res.Extra["wakeups"] = float64(relay.Stats().Wakeups)
	if o.LocalRelay {
		res.Extra["local_relay"] = 1
	}
	return res, nil
}

// produceAtRate calls fn rate times a second for d, spread over producers goroutines, and returns how many calls
// it made. A call the producers cannot start on time is started late, never skipped.
func produceAtRate(ctx context.Context, rate int, d time.Duration, producers int, fn func(ctx context.Context, seq int) error) (int64, error) {
	jobs := make(chan int, rate)
	errs := make(chan error, producers)
	var wg sync.WaitGroup
	for range producers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for seq := range jobs {
				if err := fn(ctx, seq); err != nil {
					errs <- err
					return
				}
			}
		}()
	}
	start := time.Now()
	tick := time.NewTicker(time.Millisecond)
	sent := 0
	var err error
loop:
	for {
		select {
		case <-ctx.Done():
			err = ctx.Err()
			break loop
		case err = <-errs:
			break loop
		case now := <-tick.C:
			elapsed := now.Sub(start)
			if elapsed >= d {
				break loop
			}
			for due := int(elapsed.Seconds() * float64(rate)); sent < due; sent++ {
				jobs <- sent
			}
		}
	}
	tick.Stop()
	close(jobs)
	wg.Wait()
	if err == nil {
		select {
		case err = <-errs:
		default:
		}
	}
	return int64(sent), err
}

// latencies pairs each event's commit with its ack, whichever is seen first.
type latencies struct {
	mu      sync.Mutex
	from    time.Time // commits before this are warm-up and not measured
	commits map[string]time.Time
	acks    map[string]time.Time
	d       []time.Duration
}

func newLatencies(from time.Time) *latencies {
	return &latencies{from: from, commits: map[string]time.Time{}, acks: map[string]time.Time{}}
}

func (l *latencies) committed(id string, at time.Time) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if ack, ok := l.acks[id]; ok {
		delete(l.acks, id) // the relay saw the commit before the producer did: zero latency
		l.record(at, ack)
		return
	}
	l.commits[id] = at
}

func (l *latencies) acked(id string, at time.Time) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if c, ok := l.commits[id]; ok {
		delete(l.commits, id)
		l.record(c, at)
		return
	}
	l.acks[id] = at
}

func (l *latencies) record(commit, ack time.Time) {
	if commit.Before(l.from) {
		return
	}
	l.d = append(l.d, max(0, ack.Sub(commit)))
}

func (l *latencies) pending() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.commits)
}

// waitDelivered waits until every committed event was acked.
func (l *latencies) waitDelivered(ctx context.Context, timeout time.Duration) bool {
	deadline := time.Now().Add(timeout)
	for l.pending() > 0 {
		if time.Now().After(deadline) || !pause(ctx, 5*time.Millisecond) {
			return false
		}
	}
	return true
}

// pause waits for d, or until ctx ends; it reports whether ctx is still live.
func pause(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-ctx.Done():
		return false
	}
}

func (l *latencies) sorted() []time.Duration {
	l.mu.Lock()
	defer l.mu.Unlock()
	d := slices.Clone(l.d)
	slices.Sort(d)
	return d
}

func quantile(sorted []time.Duration, q float64) time.Duration {
	i := int(q * float64(len(sorted)-1))
	return sorted[i]
}

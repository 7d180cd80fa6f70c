package bench

import (
	"bytes"
	"context"
	"fmt"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/postbox-go/postbox"
)

// The latency-load scenario's two loads: single events in transactions of their own, and batches.
const (
	loadSingleRate = 5000  // events/s, one Enqueue per transaction
	loadBatchRate  = 10000 // events/s, EnqueueBatch of loadBatchSize per transaction
	loadBatchSize  = 10
	loadProducers  = 16
	loadTurns      = 3 // per load: the bound, then Postbox, this many times, each for Duration/loadTurns
)

// loadRun is what the turns of one contestant at one load add up to.
type loadRun struct {
	sent    int
	elapsed time.Duration
	late    []time.Duration // how late each transaction's commit returned (see schedule.committed)
	lat     []time.Duration // each event's latency from its due time to the publish, with Postbox
	relay   []time.Duration // the relay's share of each latency
}

// add adds a turn: sent events in elapsed, the transactions' lateness and, with Postbox, the events' latencies.
func (r *loadRun) add(sent int, elapsed time.Duration, late []time.Duration, lat *dueLatencies) {
	r.sent += sent
	r.elapsed += elapsed
	r.late = append(r.late, late...)
	if lat != nil {
		lat.mu.Lock()
		r.lat = append(r.lat, lat.d...)
		r.relay = append(r.relay, lat.relay...)
		lat.mu.Unlock()
	}
}

func (r *loadRun) sort() {
	slices.Sort(r.late)
	slices.Sort(r.lat)
	slices.Sort(r.relay)
}

func (r *loadRun) rate() float64 { return rate(int64(r.sent), r.elapsed) }

// benchLatencyLoad feeds a relay running with its defaults at a sustained rate and measures each event's latency
// from the time it was scheduled to be sent to the publisher being called with it. The schedule is open-loop:
// event i is due at start + i/rate whatever happened to the events before it, so a producer stalled by the
// database makes the events behind it late, and their lateness counts. First 5,000 events/s, one per
// transaction, then 10,000 events/s in transactions of 10 (batch_* figures), each from 16 producers for
// Options.Duration. events_per_s is the rate the producers achieved and baseline_per_s the rate offered.
//
// Each load takes turns (loadTurns) with its bound: the same schedule and producers with the same transactions writing the same rows
// by a bare INSERT (COPY for a batch, where the client has it) into a table of the same shape that no relay reads
// (insert_* figures). How late those transactions return is the least latency any outbox could show at that
// load on this database: the relay can only add to it.
func benchLatencyLoad[TTx any](ctx context.Context, t *target[TTx], o Options) (Result, error) {
	const table, rawTable = "bench_latency_load", "bench_latency_load_raw"
	c, err := t.open(ctx, loadProducers+2)
	if err != nil {
		return Result{}, err
	}
	defer c.close()
	client, err := newOutbox(ctx, t, c, table, o.clientConfig())
	if err != nil {
		return Result{}, err
	}
	defer dropOutbox(context.WithoutCancel(ctx), t, c, table)
	if _, err := newOutbox(ctx, t, c, rawTable, o.clientConfig()); err != nil {
		return Result{}, err
	}
	defer dropOutbox(context.WithoutCancel(ctx), t, c, rawTable)
	if err := settle(ctx, t, c, table, rawTable); err != nil {
		return Result{}, err
	}
	var cur atomic.Pointer[dueLatencies]
	pub := postbox.PublisherFunc(func(_ context.Context, batch []postbox.Record) error {
		if l := cur.Load(); l != nil {
			l.published(batch, time.Now())
		}
		return nil
	})
	relay, err := startRelay(ctx, t, client, pub, o)
	if err != nil {
		return Result{}, err
	}
	defer relay.close()

	res := Result{Extra: map[string]float64{}}
	bare := t.insertRow(rawTable)
	withBare := func(ctx context.Context, first, n int) error {
		rows := rawRows(t, o.messages(first, n))
		return client.InTx(ctx, func(ctx context.Context, tx TTx) error {
			if n == 1 {
				return c.txExec(ctx, tx, bare, rows[0]...)
			}
			return rawInsert(ctx, t, c, tx, rawTable, rows)
		})
	}
	withPostbox := func(ctx context.Context, first, n int) error {
		return client.InTx(ctx, func(ctx context.Context, tx TTx) error {
			if n == 1 {
				_, err := client.Enqueue(ctx, tx, o.message(first))
				return err
			}
			return client.EnqueueBatch(ctx, tx, o.messages(first, n))
		})
	}
	for _, phase := range []struct {
		prefix string
		rate   int
		perTx  int
	}{{"", loadSingleRate, 1}, {"batch_", loadBatchRate, loadBatchSize}} {
		// The bound and Postbox take turns, so that both meet the machine's moods alike.
		var free, pb loadRun
		d := o.Duration / loadTurns
		for range loadTurns {
			o.Logger.Info("producing with bare INSERTs on an open-loop schedule", "rate", phase.rate, "per_tx", phase.perTx, "duration", d)
			s := newSchedule(phase.rate, phase.perTx, d)
			sent, elapsed, err := s.run(ctx, loadProducers, withBare)
			if err != nil {
				return Result{}, err
			}
			free.add(sent, elapsed, s.committed(), nil)

			o.Logger.Info("producing on an open-loop schedule", "rate", phase.rate, "per_tx", phase.perTx, "duration", d)
			s = newSchedule(phase.rate, phase.perTx, d)
			lat := newDueLatencies(s, 0)
			cur.Store(lat)
			if sent, elapsed, err = s.run(ctx, loadProducers, withPostbox); err != nil {
				return Result{}, err
			}
			if !lat.waitPublished(ctx, int64(sent), 30*time.Second) {
				return Result{}, fmt.Errorf("at %d events/s the relay left %d of %d events unpublished after 30s",
					phase.rate, int64(sent)-lat.count(), sent)
			}
			cur.Store(nil)
			pb.add(sent, elapsed, s.committed(), lat)
		}
		free.sort()
		pb.sort()
		if len(pb.lat) == 0 {
			return Result{}, fmt.Errorf("no events measured at %d events/s", phase.rate)
		}
		achieved := pb.rate()
		if phase.prefix == "" {
			res.EventsPerS, res.BaselinePerS, res.Ratio = achieved, float64(phase.rate), achieved/float64(phase.rate)
		} else {
			res.Extra["batch_events_per_s"] = achieved
			res.Extra["batch_baseline_per_s"] = float64(phase.rate)
			res.Extra["batch_ratio"] = achieved / float64(phase.rate)
		}
		for name, v := range latencyFigures(pb.lat) {
			res.Extra[phase.prefix+name] = v
		}
		res.Extra[phase.prefix+"measured"] = float64(len(pb.lat))
		res.Extra[phase.prefix+"insert_events_per_s"] = free.rate()
		for name, late := range map[string][]time.Duration{"commit": pb.late, "insert_commit": free.late} {
			if len(late) > 0 {
				res.Extra[phase.prefix+name+"_p99_ms"] = ms(quantile(late, 0.99))
				res.Extra[phase.prefix+name+"_p999_ms"] = ms(quantile(late, 0.999))
			}
		}
		if len(pb.relay) > 0 {
			res.Extra[phase.prefix+"relay_p99_ms"] = ms(quantile(pb.relay, 0.99))
		}
	}
	if err := relay.stop(); err != nil {
		return Result{}, err
	}
	res.Extra["producers"] = loadProducers
	return res, nil
}

// latencyFigures are the quantiles of sorted latencies in milliseconds, by JSON name.
func latencyFigures(sorted []time.Duration) map[string]float64 {
	return map[string]float64{"p50_ms": ms(quantile(sorted, 0.50)), "p99_ms": ms(quantile(sorted, 0.99)),
		"p999_ms": ms(quantile(sorted, 0.999)), "max_ms": ms(sorted[len(sorted)-1])}
}

// schedule is an open-loop send schedule: transactions of perTx events, the one carrying events first, first+1, ...
// due at start + first/rate, for d. Whether earlier transactions finished does not move a due time.
type schedule struct {
	rate, perTx int
	d           time.Duration
	start       time.Time // set by run before any transaction starts
	warmup      time.Duration
	total       int // events scheduled
	late        []time.Duration
	commits     []atomic.Int64 // by transaction: UnixNano of its commit's return, 0 until then
}

func newSchedule(rate, perTx int, d time.Duration) *schedule {
	return &schedule{rate: rate, perTx: perTx, d: d, warmup: min(time.Second, d/5),
		total: int(d.Seconds()*float64(rate)) / perTx * perTx}
}

// due is when the transaction carrying event seq was to be sent.
func (s *schedule) due(seq int) time.Time {
	first := seq - seq%s.perTx
	return s.start.Add(time.Duration(float64(first) / float64(s.rate) * float64(time.Second)))
}

// run sends the scheduled transactions from producers goroutines, each taking the next transaction in turn and
// starting it at its due time, or at once when it is already late. It returns the events sent and the time from
// the start to the last transaction's return, and keeps how late each transaction after the warm-up returned
// (see committed).
func (s *schedule) run(ctx context.Context, producers int, send func(ctx context.Context, first, n int) error) (int, time.Duration, error) {
	total := s.total
	var next atomic.Int64
	var last atomic.Int64 // nanoseconds from start to the latest return
	errs := make(chan error, producers)
	late := make([][]time.Duration, producers)
	s.commits = make([]atomic.Int64, total/s.perTx)
	s.start = time.Now()
	for p := range producers {
		go func() {
			for {
				first := int(next.Add(int64(s.perTx))) - s.perTx
				if first >= total {
					errs <- nil
					return
				}
				due := s.due(first)
				if wait := time.Until(due); wait > 0 && !pause(ctx, wait) {
					errs <- ctx.Err()
					return
				}
				if err := send(ctx, first, s.perTx); err != nil {
					errs <- err
					return
				}
				now := time.Now()
				s.commits[first/s.perTx].Store(now.UnixNano())
				if due.Sub(s.start) >= s.warmup {
					late[p] = append(late[p], now.Sub(due))
				}
				for took := int64(now.Sub(s.start)); ; {
					if prev := last.Load(); took <= prev || last.CompareAndSwap(prev, took) {
						break
					}
				}
			}
		}()
	}
	var first error
	for range producers {
		if err := <-errs; err != nil && first == nil {
			first = err
			next.Store(int64(total)) // the others stop after their transaction under way
		}
	}
	s.late = slices.Concat(late...)
	slices.Sort(s.late)
	return total, time.Duration(last.Load()), first
}

// committed is how late the transactions after the warm-up returned from their commit, sorted: the producers'
// share of the latency, the rest being the relay's.
func (s *schedule) committed() []time.Duration { return s.late }

// dueLatencies records, for each event the publisher is called with, the time from its due time to the call.
// Events due in the schedule's warm-up are counted but not measured.
type dueLatencies struct {
	s    *schedule
	base int // the sequence number of the schedule's first event; others are not the schedule's
	n    atomic.Int64
	last atomic.Int64 // UnixNano of the latest publish
	mu   sync.Mutex
	d    []time.Duration
	// relay is the relay's share of each latency, from the commit's return to the publish; 0 when the relay
	// published before the producer saw its commit return.
	relay []time.Duration
}

func newDueLatencies(s *schedule, base int) *dueLatencies { return &dueLatencies{s: s, base: base} }

func (l *dueLatencies) published(batch []postbox.Record, at time.Time) {
	mine := 0
	l.mu.Lock()
	for _, r := range batch {
		seq, ok := payloadSeq(r.Payload)
		seq -= l.base
		if !ok || seq < 0 || seq >= l.s.total {
			continue // not an event of this schedule
		}
		mine++
		due := l.s.due(seq)
		if due.Sub(l.s.start) < l.s.warmup {
			continue
		}
		l.d = append(l.d, max(0, at.Sub(due)))
		var relay time.Duration
		if tx := seq / l.s.perTx; tx < len(l.s.commits) {
			if c := l.s.commits[tx].Load(); c != 0 {
				relay = max(0, at.Sub(time.Unix(0, c)))
			}
		}
		l.relay = append(l.relay, relay)
	}
	l.mu.Unlock()
	if mine > 0 {
		l.last.Store(at.UnixNano())
		l.n.Add(int64(mine))
	}
}

func (l *dueLatencies) count() int64 { return l.n.Load() }

// waitPublished waits until n events were published, and reports whether they were within timeout.
func (l *dueLatencies) waitPublished(ctx context.Context, n int64, timeout time.Duration) bool {
	deadline := time.Now().Add(timeout)
	for l.count() < n {
		if time.Now().After(deadline) || !pause(ctx, time.Millisecond) {
			return false
		}
	}
	return true
}

// lastPublished is the time of the latest publish.
func (l *dueLatencies) lastPublished() time.Time { return time.Unix(0, l.last.Load()) }

func (l *dueLatencies) sorted() []time.Duration {
	l.mu.Lock()
	defer l.mu.Unlock()
	d := slices.Clone(l.d)
	slices.Sort(d)
	return d
}

// payloadSeq reads the sequence number Options.message wrote at the start of a payload.
func payloadSeq(p []byte) (int, bool) {
	rest, ok := bytes.CutPrefix(p, []byte(`{"seq":`))
	if !ok {
		return 0, false
	}
	end := bytes.IndexByte(rest, ',')
	if end < 0 {
		return 0, false
	}
	n, err := strconv.Atoi(string(rest[:end]))
	return n, err == nil
}

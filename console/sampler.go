package console

import (
	"context"
	"sync"
	"time"

	"github.com/postbox-go/postbox"
)

// sample is one database's figures at one moment.
type sample struct {
	At time.Time
	Ov postbox.Overview
	// Rate is messages published per second: what the relays that report to the console published since the
	// previous sample when some do, else the rate of the kept published messages over the last
	// postbox.RecentWindow (Overview.Recent); -1 when unknown (neither).
	Rate float64
	// Relays are the figures of the relays that report to the console (Console.Observer) since the previous
	// sample.
	Relays relayFigures
	// Heartbeats are the relays' own records in the table set (postbox.Client.Relays): which run, and their
	// destinations' health; nil when the table set keeps none.
	Heartbeats []postbox.RelayStatus
	Err        string
}

// history keeps each database's recent samples, oldest first, for the overview's chart.
type history struct {
	mu       sync.Mutex
	keep     time.Duration
	interval time.Duration
	byDB     map[string][]sample
}

func newHistory(keep, interval time.Duration) *history {
	return &history{keep: keep, interval: interval, byDB: map[string][]sample{}}
}

func (h *history) add(db string, s sample) {
	h.mu.Lock()
	defer h.mu.Unlock()
	ss := h.byDB[db]
	if len(ss) > 0 {
		s.Rate = rate(ss[len(ss)-1], s)
	}
	ss = append(ss, s)
	cut := 0
	for cut < len(ss) && s.At.Sub(ss[cut].At) > h.keep {
		cut++
	}
	h.byDB[db] = append([]sample(nil), ss[cut:]...)
}

// latest returns the database's newest sample when it is fresh enough to stand for now.
func (h *history) latest(db string) (sample, bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	ss := h.byDB[db]
	if len(ss) == 0 || time.Since(ss[len(ss)-1].At) > 2*h.interval {
		return sample{}, false
	}
	return ss[len(ss)-1], true
}

func (h *history) samples(db string) []sample {
	h.mu.Lock()
	defer h.mu.Unlock()
	return append([]sample(nil), h.byDB[db]...)
}

// Run samples every database each SampleInterval, for the overview's live figures and chart, until ctx is done.
// It returns ctx's error. Without Run the overview queries the databases on each load and draws no chart.
// Only one Run at a time samples; a second waits for the first to return.
func (c *Console) Run(ctx context.Context) error {
	c.running.Lock()
	defer c.running.Unlock()
	t := time.NewTicker(c.cfg.SampleInterval)
	defer t.Stop()
	for {
		c.sampleAll(ctx)
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-t.C:
		}
	}
}

func (c *Console) sampleAll(ctx context.Context) {
	var wg sync.WaitGroup
	for _, name := range c.names {
		wg.Add(1)
		go func() {
			defer wg.Done()
			c.sampleOne(ctx, name)
		}()
	}
	wg.Wait()
}

// minSampleTimeout bounds a sample's wait for its database, however short the interval: a slow answer delays
// the next sample rather than failing this one.
const minSampleTimeout = 5 * time.Second

// sampleOne measures one database now and records the result.
func (c *Console) sampleOne(ctx context.Context, name string) sample {
	ctx, cancel := context.WithTimeout(ctx, max(c.cfg.SampleInterval, minSampleTimeout))
	defer cancel()
	ov, err := c.dbs[name].Overview(ctx, c.cfg.CountLimit)
	s := sample{At: time.Now(), Ov: c.redact.overview(ov), Rate: -1}
	if err == nil && ov.Recent.Span > 0 {
		s.Rate = ov.Recent.PerSecond
	}
	s.Relays = c.relays.take(name, s.At, relayForget)
	if err == nil {
		if hb, herr := c.dbs[name].Relays(ctx); herr == nil {
			s.Heartbeats = hb // a table set without the relays table (migration 5) shows none
		}
	}
	if err != nil {
		if ctx.Err() != nil && context.Cause(ctx) == context.Canceled {
			return s
		}
		s.Err = c.redact.text(err.Error())
		c.cfg.Logger.Warn("console: sample", "db", name, "err", s.Err)
	}
	c.hist.add(name, s)
	return s
}

// relayForget is how long a relay that reported to the console stays listed after its last batch.
const relayForget = time.Minute

// rate returns the published-per-second figure between prev and s: what the observed relays reported when some
// do, else s's own figure from the kept published messages.
func rate(prev, s sample) float64 {
	if !s.Relays.Observed {
		return s.Rate
	}
	if dt := s.At.Sub(prev.At).Seconds(); dt > 0 {
		return float64(s.Relays.Published) / dt
	}
	return -1
}

// latency returns the enqueue-to-publish percentiles of the sample and where they come from: the relays that
// report to the console when some published in the last minute, else the kept published messages of the last
// postbox.RecentWindow. Zero when neither has any.
func (s sample) latency() (p50, p95 time.Duration, observed bool) {
	if s.Relays.P95 > 0 {
		return s.Relays.P50, s.Relays.P95, true
	}
	return s.Ov.Recent.LatencyP50, s.Ov.Recent.LatencyP95, false
}

// current returns the database's figures: the sampler's latest when fresh, else measured now.
func (c *Console) current(ctx context.Context, name string) sample {
	if s, ok := c.hist.latest(name); ok {
		return s
	}
	return c.sampleOne(ctx, name)
}

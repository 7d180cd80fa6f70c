package console

import (
	"context"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/postbox-go/postbox"
)

// Observer returns a postbox.RelayObserver that tells the console about the batches of a relay running in the
// same process, for the overview's messages published per second, enqueue-to-publish latency and relays seen,
// which the tables do not record. Set it as the relay's RelayConfig.Observer (with a small fan-out of your own
// when the relay has another). db names the console database the relay publishes from; relay names the relay
// on the page. A batch from a database the console does not know is ignored.
func (c *Console) Observer(db, relay string) postbox.RelayObserver {
	return relayObserver{c: c, db: db, relay: relay}
}

type relayObserver struct {
	c         *Console
	db, relay string
}

// maxLatencies bounds the latencies one batch contributes, so that a large batch costs the observer little.
const maxLatencies = 256

func (o relayObserver) ObserveBatch(_ context.Context, b postbox.BatchReport) {
	n := b.Published()
	var lat []time.Duration
	if n > 0 {
		step := max(1, len(b.Records)/maxLatencies)
		for i := 0; i < len(b.Records); i += step {
			if b.Errs[i] == nil {
				lat = append(lat, b.SettledAt.Sub(b.Records[i].CreatedAt))
			}
		}
	}
	o.c.relays.add(o.db, o.relay, b.SettledAt, n, lat)
}

// relayFeed gathers what observed relays reported since the sampler last looked.
type relayFeed struct {
	mu   sync.Mutex
	byDB map[string]*relayWindow
}

type relayWindow struct {
	published int64                // since the last take
	latencies []timedLatency       // over the last relayForget, oldest first
	seen      map[string]time.Time // relay name → its last batch
}

type timedLatency struct {
	at time.Time
	d  time.Duration
}

// maxWindowLatencies bounds the latencies a database keeps.
const maxWindowLatencies = 64 * maxLatencies

func (f *relayFeed) add(db, relay string, at time.Time, published int, lat []time.Duration) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.byDB == nil {
		f.byDB = map[string]*relayWindow{}
	}
	w := f.byDB[db]
	if w == nil {
		w = &relayWindow{seen: map[string]time.Time{}}
		f.byDB[db] = w
	}
	w.published += int64(published)
	for _, d := range lat {
		w.latencies = append(w.latencies, timedLatency{at, d})
	}
	if extra := len(w.latencies) - maxWindowLatencies; extra > 0 {
		w.latencies = append(w.latencies[:0], w.latencies[extra:]...)
	}
	w.seen[relay] = at
}

// relayFigures are the observed relays' figures.
type relayFigures struct {
	Observed  bool  // some relay reports to the console
	Published int64 // since the previous sample
	// P50 and P95 are the enqueue-to-publish latency over the last minute; zero when nothing was published.
	P50, P95 time.Duration
	Relays   []relaySeen
}

type relaySeen struct {
	Name string
	Last time.Time
}

// take returns the database's figures: the messages published since the last take, the latency over the last
// forget, and the relays seen within it.
func (f *relayFeed) take(db string, now time.Time, forget time.Duration) relayFigures {
	f.mu.Lock()
	defer f.mu.Unlock()
	w := f.byDB[db]
	if w == nil {
		return relayFigures{}
	}
	out := relayFigures{Observed: true, Published: w.published}
	cut := 0
	for cut < len(w.latencies) && now.Sub(w.latencies[cut].at) > forget {
		cut++
	}
	w.latencies = append(w.latencies[:0], w.latencies[cut:]...)
	if len(w.latencies) > 0 {
		ds := make([]time.Duration, len(w.latencies))
		for i, l := range w.latencies {
			ds[i] = l.d
		}
		slices.Sort(ds)
		q := func(p float64) time.Duration { return ds[min(len(ds)-1, int(p*float64(len(ds))))] }
		out.P50, out.P95 = q(0.5), q(0.95)
	}
	for name, at := range w.seen {
		if now.Sub(at) > forget {
			delete(w.seen, name)
			continue
		}
		out.Relays = append(out.Relays, relaySeen{name, at})
	}
	slices.SortFunc(out.Relays, func(a, b relaySeen) int { return strings.Compare(a.Name, b.Name) })
	w.published = 0
	return out
}

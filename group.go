package postbox

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"regexp"
	"slices"
	"sync"
	"time"
)

// Defaults for RelayGroupConfig.
const (
	// DefaultIdlePollInterval keeps an idle source that is polled to one statement every two seconds.
	DefaultIdlePollInterval = 2 * time.Second
	// DefaultListenPollInterval is the backstop poll of an idle source whose relay is listening for wake-ups.
	DefaultListenPollInterval = 10 * time.Second
)

// ErrUnknownSource is wrapped by the error RelayGroup.Remove returns for a name not in the group.
var ErrUnknownSource = errors.New("postbox: no such source")

// RelayGroupConfig configures a RelayGroup. The zero value is valid: every field has a default.
type RelayGroupConfig struct {
	// IdlePollInterval is the longest an idle source's relay waits between two looks for messages when it finds
	// them by polling (MySQL, SQLite, or PostgreSQL without LISTEN). A source looks at its relay's PollInterval
	// while messages flow, then ever less often, up to this, so that the idle cost of a group is about one
	// statement per IdlePollInterval per source, however many sources it has. It is the latency of the first
	// message after a long quiet spell on such a source. Default: DefaultIdlePollInterval (2s), or the relay's
	// PollInterval when that is longer.
	IdlePollInterval time.Duration
	// ListenPollInterval is the same for a relay that is listening for wake-ups (PostgreSQL LISTEN): there a look
	// is only the backstop for a wake-up lost. Default: DefaultListenPollInterval (10s).
	ListenPollInterval time.Duration
	// Logger receives the group's logs (sources started and stopped). Default: slog.Default().
	Logger *slog.Logger
}

// WithDefaults returns a copy of c with every zero field set to its default. A nil c gives the defaults.
func (c *RelayGroupConfig) WithDefaults() RelayGroupConfig {
	var out RelayGroupConfig
	if c != nil {
		out = *c
	}
	setDefault(&out.IdlePollInterval, DefaultIdlePollInterval)
	setDefault(&out.ListenPollInterval, DefaultListenPollInterval)
	if out.Logger == nil {
		out.Logger = slog.Default()
	}
	return out
}

// sourceName is what a source may be called: it appears in metric labels, logs and URLs.
var sourceName = regexp.MustCompile(`^[A-Za-z0-9_][A-Za-z0-9_.-]{0,127}$`)

// RelayGroup runs the relays of many sources in one process: a source is one database and table set, with its
// own Relay (made by NewRelay from a client on that database) and so its own workers, connections, wake-ups and
// publisher. Sources are isolated from each other: a source whose database is down or slow, or whose broker
// refuses its messages, delays no other source, since each relay waits and retries on its own. Sources can be
// added and removed while the group runs; a removed source's in-flight batches publish and settle before
// Remove returns.
//
// What a group adds to running the relays side by side is an idle cost that does not grow with the number of
// sources times the poll rate: see RelayGroupConfig.IdlePollInterval.
type RelayGroup struct {
	cfg RelayGroupConfig

	mu      sync.Mutex
	sources map[string]*groupSource
	ctx     context.Context // the context of Run; nil while not running
	wg      sync.WaitGroup  // the running sources
}

// groupSource is one source of a group.
type groupSource struct {
	name   string
	relay  *Relay
	cancel context.CancelFunc // nil until started
	done   chan struct{}      // closed when the relay's Run returned
}

// SourceStats are one source's running totals.
type SourceStats struct {
	Name string
	RelayStats
}

// NewRelayGroup returns an empty group. cfg may be nil for the defaults. It does no I/O; add sources and call Run.
func NewRelayGroup(cfg *RelayGroupConfig) (*RelayGroup, error) {
	c := cfg.WithDefaults()
	if c.IdlePollInterval < 0 || c.ListenPollInterval < 0 {
		return nil, fmt.Errorf("%w: RelayGroupConfig.IdlePollInterval and ListenPollInterval must not be negative; use 0 for the default",
			ErrInvalidConfig)
	}
	return &RelayGroup{cfg: c, sources: map[string]*groupSource{}}, nil
}

// Add adds a source: relay publishes its outbox. The name tells the source apart in Stats and logs; it is
// letters, digits, '_', '.' and '-', unique in the group. When the group is running the relay starts at once.
// A relay belongs to one group and must not be run otherwise.
func (g *RelayGroup) Add(name string, relay *Relay) error {
	if !sourceName.MatchString(name) {
		return fmt.Errorf("%w: source name %q: use 1 to 128 letters, digits, '_', '.' or '-'", ErrInvalidConfig, name)
	}
	if relay == nil {
		return fmt.Errorf("%w: source %q has no relay; make one with NewRelay", ErrInvalidConfig, name)
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	if _, ok := g.sources[name]; ok {
		return fmt.Errorf("%w: source %q is already in the group; remove it first", ErrInvalidConfig, name)
	}
	for _, s := range g.sources {
		if s.relay == relay {
			return fmt.Errorf("%w: source %q has the relay of source %q; make one relay per source", ErrInvalidConfig, name, s.name)
		}
	}
	relay.pace = &groupPace{idle: max(g.cfg.IdlePollInterval, relay.cfg.PollInterval),
		listening: max(g.cfg.ListenPollInterval, relay.cfg.PollInterval)}
	s := &groupSource{name: name, relay: relay}
	g.sources[name] = s
	if g.ctx != nil {
		g.start(s)
	}
	return nil
}

// Remove stops a source's relay and takes it out of the group. The relay stops claiming, and its in-flight
// batches publish and settle before Remove returns; ctx bounds the wait (the relay still settles after ctx is
// done, within its PublishTimeout and SettleTimeout). It returns an error wrapping ErrUnknownSource for a name not in the group.
func (g *RelayGroup) Remove(ctx context.Context, name string) error {
	g.mu.Lock()
	s, ok := g.sources[name]
	var cancel context.CancelFunc
	var done chan struct{}
	if ok {
		delete(g.sources, name)
		cancel, done = s.cancel, s.done
	}
	g.mu.Unlock()
	if !ok {
		return fmt.Errorf("%w: no source %q in the group", ErrUnknownSource, name)
	}
	if cancel == nil {
		return nil // never started
	}
	cancel()
	select {
	case <-done:
		return nil
	case <-ctx.Done():
		return fmt.Errorf("source %q removed; its in-flight batches are still settling: %w", name, ctx.Err())
	}
}

// Names returns the names of the group's sources, sorted.
func (g *RelayGroup) Names() []string {
	g.mu.Lock()
	defer g.mu.Unlock()
	names := make([]string, 0, len(g.sources))
	for n := range g.sources {
		names = append(names, n)
	}
	slices.Sort(names)
	return names
}

// Stats returns every source's running totals, sorted by name.
func (g *RelayGroup) Stats() []SourceStats {
	g.mu.Lock()
	out := make([]SourceStats, 0, len(g.sources))
	for _, s := range g.sources {
		out = append(out, SourceStats{Name: s.name, RelayStats: s.relay.Stats()})
	}
	g.mu.Unlock()
	slices.SortFunc(out, func(a, b SourceStats) int {
		switch {
		case a.Name < b.Name:
			return -1
		case a.Name > b.Name:
			return 1
		}
		return 0
	})
	return out
}

// Run runs every source's relay until ctx is cancelled, then lets every in-flight batch finish publishing and
// settle, and returns nil. Sources added while it runs start at once. It returns an error only if the group is
// already running.
func (g *RelayGroup) Run(ctx context.Context) error {
	g.mu.Lock()
	if g.ctx != nil {
		g.mu.Unlock()
		return errors.New("postbox: relay group is already running; call Run once")
	}
	g.ctx = ctx
	for _, s := range g.sources {
		g.start(s)
	}
	g.mu.Unlock()
	<-ctx.Done()
	g.mu.Lock()
	g.ctx = nil // sources added from now on wait for the next Run
	g.mu.Unlock()
	g.wg.Wait()
	g.mu.Lock()
	for _, s := range g.sources {
		s.cancel = nil
	}
	g.mu.Unlock()
	return nil
}

// start runs a source's relay on a context of its own under the group's; g.mu is held.
func (g *RelayGroup) start(s *groupSource) {
	ctx, cancel := context.WithCancel(g.ctx)
	s.cancel, s.done = cancel, make(chan struct{})
	g.wg.Add(1)
	log := g.cfg.Logger
	go func() {
		defer g.wg.Done()
		defer close(s.done)
		defer cancel()
		log.InfoContext(ctx, "source started", "source", s.name)
		if err := s.relay.Run(ctx); err != nil {
			log.ErrorContext(ctx, "source not started", "source", s.name, "err", err)
			return
		}
		log.InfoContext(context.WithoutCancel(ctx), "source stopped: in-flight batches settled", "source", s.name)
	}()
}

// groupPace is how long the idle relay of a grouped source may wait between two looks.
type groupPace struct {
	idle, listening time.Duration
}

// idleCeiling is the longest an idle worker waits between two looks: the relay's PollInterval, or in a group
// the group's idle poll interval, a tenth more at most, drawn at random so that the looks of many sources that
// fell idle together spread out instead of arriving at once.
func (r *Relay) idleCeiling() time.Duration {
	p := r.pace
	if p == nil {
		return r.cfg.PollInterval
	}
	d := p.idle
	if r.stats.listening.Load() {
		d = p.listening
	}
	return d + rand.N(d/10+1)
}

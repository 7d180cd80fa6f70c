package cli

import (
	"context"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"time"
)

// readyzTTL is how long /readyz answers from its last check, so that probes and scrapers, however many and
// however frequent, cost the database and the brokers at most one ping each per period.
const readyzTTL = 2 * time.Second

// readyzTimeout bounds one round of checks.
const readyzTimeout = 3 * time.Second

// check is one line of /readyz. It names a broker by its position and scheme, never by its URL, and carries no
// error text, which may name users and hosts: the log has the reasons.
type check struct {
	Name   string `json:"name"`
	Source string `json:"source,omitempty"` // the source whose database this checks, for a relay of many sources
	OK     bool   `json:"ok"`
	Error  string `json:"error,omitempty"`
}

type pinger struct {
	name, logName string // as /readyz shows it, and as the log does (redacted)
	source        string
	ping          func(context.Context) error
}

// readiness checks the database and every broker, at most once per ttl; concurrent requests share one check.
type readiness struct {
	pingers func() []pinger // the relay of many sources adds and removes some while it runs
	ttl     time.Duration
	now     func() time.Time
	// destinations, when set, gives the relay's health per destination, which /readyz shows beside the checks:
	// one destination down does not make the relay unready, since it goes on with the others.
	destinations func() []destinationState
	log          *slog.Logger

	mu     sync.Mutex // held through a check, so that requests arriving meanwhile wait for its result
	at     time.Time
	last   []check
	logged map[string]string // the error last logged for each pinger by name, so that a lasting failure is logged once
}

func newReadiness(db database, rtr *router, log *slog.Logger) *readiness {
	pingers := []pinger{{name: "database", logName: "database", ping: db.Ping}}
	pingers = append(pingers, brokerPingers(rtr.conns())...)
	return newReadinessOf(func() []pinger { return pingers }, log)
}

func newReadinessOf(pingers func() []pinger, log *slog.Logger) *readiness {
	return &readiness{pingers: pingers, ttl: readyzTTL, now: time.Now, log: log, logged: map[string]string{}}
}

// brokerPingers are the checks of the brokers, each named by its position and scheme.
func brokerPingers(conns []*brokerConn) []pinger {
	var out []pinger
	for i, c := range conns {
		scheme, _, _ := strings.Cut(c.name, ":")
		out = append(out, pinger{name: fmt.Sprintf("broker %d (%s)", i+1, scheme), logName: c.name, ping: c.ping})
	}
	return out
}

// isReady reports whether checks say the relay can work: every check passes or, for a relay of many sources,
// every shared broker answers and so does everything of at least one source (its database and its own brokers).
func isReady(checks []check) bool {
	ok := true
	sources := map[string]bool{}
	for _, c := range checks {
		if c.Source == "" {
			ok = ok && c.OK
			continue
		}
		if prev, seen := sources[c.Source]; seen {
			sources[c.Source] = prev && c.OK
		} else {
			sources[c.Source] = c.OK
		}
	}
	if len(sources) == 0 {
		return ok
	}
	someUp := false
	for _, up := range sources {
		someUp = someUp || up
	}
	return ok && someUp
}

// get returns the last checks when they are younger than ttl, and checks again otherwise.
func (r *readiness) get(ctx context.Context) []check {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.last != nil && r.now().Sub(r.at) < r.ttl {
		return r.last
	}
	// The check outlives a request that gives up, so that the next request finds its result.
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), readyzTimeout)
	defer cancel()
	pingers := r.pingers()
	checks := make([]check, len(pingers))
	errs := make([]string, len(pingers))
	var wg sync.WaitGroup
	for i, p := range pingers {
		checks[i] = check{Name: p.name, Source: p.source, OK: true}
		if p.ping == nil {
			continue
		}
		wg.Go(func() {
			if err := p.ping(ctx); err != nil {
				checks[i] = check{Name: p.name, Source: p.source, Error: "not ready; the reason is logged"}
				errs[i] = err.Error()
			}
		})
	}
	wg.Wait()
	logged := make(map[string]string, len(pingers))
	for i, p := range pingers {
		switch {
		case errs[i] != "" && errs[i] != r.logged[p.name]:
			r.log.Warn("readiness check failed", "check", p.logName, "err", errs[i])
		case errs[i] == "" && r.logged[p.name] != "":
			r.log.Info("readiness check passes again", "check", p.logName)
		}
		logged[p.name] = errs[i]
	}
	r.logged = logged
	r.last, r.at = checks, r.now()
	return checks
}

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
	Name  string `json:"name"`
	OK    bool   `json:"ok"`
	Error string `json:"error,omitempty"`
}

type pinger struct {
	name, logName string // as /readyz shows it, and as the log does (redacted)
	ping          func(context.Context) error
}

// readiness checks the database and every broker, at most once per ttl; concurrent requests share one check.
type readiness struct {
	pingers []pinger
	ttl     time.Duration
	now     func() time.Time
	log     *slog.Logger

	mu     sync.Mutex // held through a check, so that requests arriving meanwhile wait for its result
	at     time.Time
	last   []check
	logged []string // the error last logged for each pinger, so that a lasting failure is logged once
}

func newReadiness(db database, rtr *router, log *slog.Logger) *readiness {
	r := &readiness{ttl: readyzTTL, now: time.Now, log: log}
	r.pingers = append(r.pingers, pinger{name: "database", logName: "database", ping: db.Ping})
	for i, c := range rtr.conns() {
		scheme, _, _ := strings.Cut(c.name, ":")
		r.pingers = append(r.pingers, pinger{name: fmt.Sprintf("broker %d (%s)", i+1, scheme), logName: c.name, ping: c.ping})
	}
	r.logged = make([]string, len(r.pingers))
	return r
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
	checks := make([]check, len(r.pingers))
	errs := make([]string, len(r.pingers))
	var wg sync.WaitGroup
	for i, p := range r.pingers {
		checks[i] = check{Name: p.name, OK: true}
		if p.ping == nil {
			continue
		}
		wg.Go(func() {
			if err := p.ping(ctx); err != nil {
				checks[i] = check{Name: p.name, Error: "not ready; the reason is logged"}
				errs[i] = err.Error()
			}
		})
	}
	wg.Wait()
	for i, p := range r.pingers {
		switch {
		case errs[i] != "" && errs[i] != r.logged[i]:
			r.log.Warn("readiness check failed", "check", p.logName, "err", errs[i])
		case errs[i] == "" && r.logged[i] != "":
			r.log.Info("readiness check passes again", "check", p.logName)
		}
		r.logged[i] = errs[i]
	}
	r.last, r.at = checks, r.now()
	return checks
}

package console

import (
	"context"
	"errors"
	"net/http"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/postbox-go/postbox"
)

type findHit struct {
	DB  string
	Rec postbox.Record
}

type findData struct {
	Q    string
	Hits []findHit
	Errs []string
	Done bool
	// Cut names the databases whose search by key ran out of Config.KeySearchTimeout; Whole asked for no limit.
	Cut   []string
	Whole bool
	Limit time.Duration // how long a search of the whole table may take
}

// findLimit bounds the messages one key finds in one database.
const findLimit = 50

// find looks a message up by ID, and by key, in every database: pending, kept published and dead alike. A
// search of the whole table needs a login, runs one at a time, and stops at Config.WholeSearchTimeout.
func (c *Console) find(w http.ResponseWriter, r *http.Request) {
	d := findData{Q: strings.TrimSpace(r.FormValue("q")), Whole: r.FormValue("whole") != "", Limit: c.cfg.WholeSearchTimeout}
	if d.Q != "" && d.Whole {
		switch {
		case !c.canLogIn():
			c.refuse(w, r, http.StatusForbidden, "Searching the whole table needs a login, and this console has no credentials: "+
				"set Config.Token (POSTBOX_CONSOLE_TOKEN), or User and Password.")
			return
		case c.who(r) == "":
			c.refuse(w, r, http.StatusUnauthorized, "Log in to search the whole table.")
			return
		}
		select {
		case c.whole <- struct{}{}:
			defer func() { <-c.whole }()
		default:
			c.refuse(w, r, http.StatusTooManyRequests, "Another search of the whole table is running; try again when it is done.")
			return
		}
	}
	if d.Q != "" {
		d.Done = true
		var mu sync.Mutex
		var wg sync.WaitGroup
		for _, name := range c.names {
			wg.Add(1)
			go func() {
				defer wg.Done()
				hits, errs, cut := c.findIn(r, name, d.Q, d.Whole)
				mu.Lock()
				defer mu.Unlock()
				d.Hits = append(d.Hits, hits...)
				d.Errs = append(d.Errs, errs...)
				if cut {
					d.Cut = append(d.Cut, name)
				}
			}()
		}
		wg.Wait()
		// Keep the databases' order.
		order := map[string]int{}
		for i, n := range c.names {
			order[n] = i
		}
		slices.SortStableFunc(d.Hits, func(a, b findHit) int { return order[a.DB] - order[b.DB] })
		slices.Sort(d.Cut)
	}
	title := "Find a message"
	if d.Q != "" {
		title = "Find " + d.Q
	}
	c.render(w, r, "find", title, d)
}

// findIn looks q up in one database: as an ID through the primary key, then as a key. Outside ordered table
// sets no index covers keys, so the key search reads the table; it stops after KeySearchTimeout, or
// WholeSearchTimeout when whole is set, and cut reports that it did.
func (c *Console) findIn(r *http.Request, name, q string, whole bool) (hits []findHit, errs []string, cut bool) {
	src := c.dbs[name]
	seen := map[string]bool{}
	if looksLikeUUID(q) {
		rec, err := src.FindMessage(r.Context(), q)
		switch {
		case err == nil && !whole:
			// An ID names one message; keys are searched when the operator asks for the whole table.
			return []findHit{{name, c.redact.record(rec)}}, nil, false
		case err == nil:
			hits = append(hits, findHit{name, c.redact.record(rec)})
			seen[rec.ID] = true
		case !errors.Is(err, postbox.ErrNotFound):
			errs = append(errs, name+": "+c.errText(r, err))
		}
	}
	limit := c.cfg.KeySearchTimeout
	if whole {
		limit = c.cfg.WholeSearchTimeout
	}
	ctx, cancel := context.WithTimeout(r.Context(), limit)
	defer cancel()
	recs, err := src.FindByKey(ctx, q, findLimit)
	switch {
	case err != nil && ctx.Err() != nil && r.Context().Err() == nil:
		return hits, errs, true
	case err != nil:
		return hits, append(errs, name+": "+c.errText(r, err)), false
	}
	for _, rec := range recs {
		if !seen[rec.ID] {
			hits = append(hits, findHit{name, c.redact.record(rec)})
		}
	}
	return hits, errs, false
}

// looksLikeUUID reports whether s has a UUID's shape, so that it is worth looking up as an ID.
func looksLikeUUID(s string) bool {
	s = strings.Trim(s, "{}")
	s = strings.ReplaceAll(s, "-", "")
	if len(s) != 32 {
		return false
	}
	for _, r := range s {
		if !strings.ContainsRune("0123456789abcdefABCDEF", r) {
			return false
		}
	}
	return true
}

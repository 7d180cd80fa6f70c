package console

import (
	"net/http"
	"strings"

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
}

// find looks a message up by ID or key in every database.
func (c *Console) find(w http.ResponseWriter, r *http.Request) {
	d := findData{Q: strings.TrimSpace(r.FormValue("q"))}
	if d.Q != "" {
		d.Done = true
		for _, name := range c.names {
			recs, err := c.dbs[name].ListDead(r.Context(), postbox.DeadFilter{IDs: []string{d.Q}, Limit: 20})
			if err != nil {
				d.Errs = append(d.Errs, name+": "+err.Error())
				continue
			}
			for _, rec := range recs {
				d.Hits = append(d.Hits, findHit{DB: name, Rec: rec})
			}
		}
	}
	c.render(w, r, "find", "Find a message", d)
}

package console

import (
	"encoding/json"
	"html/template"
	"net/http"
	"sync"
	"time"

	"github.com/postbox-go/postbox"
)

// overviewDB is one database on the overview.
type overviewDB struct {
	Name   string
	Err    string
	At     time.Time
	Stats  postbox.Stats
	Charts []template.HTML
}

type overviewData struct {
	DBs      []overviewDB
	Interval int // milliseconds between the page's refreshes
}

func (c *Console) overviewData(r *http.Request) overviewData {
	dbs := make([]overviewDB, len(c.names))
	var wg sync.WaitGroup
	for i, name := range c.names {
		wg.Add(1)
		go func() {
			defer wg.Done()
			s := c.current(r.Context(), name)
			dbs[i] = overviewDB{Name: name, Err: s.Err, At: s.At, Stats: s.Stats, Charts: c.charts(name)}
		}()
	}
	wg.Wait()
	return overviewData{DBs: dbs, Interval: int(c.cfg.SampleInterval / time.Millisecond)}
}

// charts draws a database's recent history: messages waiting (ready and dead).
func (c *Console) charts(name string) []template.HTML {
	ss := c.hist.samples(name)
	if len(ss) < 2 {
		return nil
	}
	now := time.Now()
	ready := series{Name: "ready", Class: "s-ready"}
	scheduled := series{Name: "scheduled", Class: "s-scheduled"}
	dead := series{Name: "dead", Class: "s-dead"}
	for _, s := range ss {
		if s.Err != "" {
			continue
		}
		ready.Points = append(ready.Points, point{s.At, float64(s.Stats.Ready)})
		scheduled.Points = append(scheduled.Points, point{s.At, float64(s.Stats.Scheduled)})
		dead.Points = append(dead.Points, point{s.At, float64(s.Stats.Dead)})
	}
	return []template.HTML{chart("messages waiting", []series{ready, scheduled, dead}, now.Add(-c.cfg.History), now)}
}

func (c *Console) overview(w http.ResponseWriter, r *http.Request) {
	c.render(w, r, "overview", "Overview", c.overviewData(r))
}

// overviewLive is the overview's live part alone, which the page fetches again every SampleInterval.
func (c *Console) overviewLive(w http.ResponseWriter, r *http.Request) {
	c.renderTemplate(w, r, "overview", "live", "Overview", c.overviewData(r))
}

// overviewJSON is the overview's figures as JSON, for scripts and dashboards.
func (c *Console) overviewJSON(w http.ResponseWriter, r *http.Request) {
	type topic struct {
		Topic              string `json:"topic"`
		Ready              int64  `json:"ready"`
		Scheduled          int64  `json:"scheduled"`
		Dead               int64  `json:"dead"`
		OldestReadySeconds int64  `json:"oldest_ready_seconds"`
	}
	type db struct {
		Name   string    `json:"name"`
		At     time.Time `json:"at"`
		Error  string    `json:"error,omitempty"`
		Topics []topic   `json:"topics"`
	}
	d := c.overviewData(r)
	out := make([]db, len(d.DBs))
	for i, o := range d.DBs {
		out[i] = db{Name: o.Name, At: o.At, Error: o.Err, Topics: []topic{}}
		for _, t := range o.Stats.Topics {
			var oldest int64
			if !t.OldestPending.IsZero() {
				oldest = int64(time.Since(t.OldestPending) / time.Second)
			}
			out[i].Topics = append(out[i].Topics, topic{t.Topic, t.Ready, t.Scheduled, t.Dead, oldest})
		}
	}
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(map[string]any{"databases": out})
}

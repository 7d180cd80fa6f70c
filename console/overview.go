package console

import (
	"bytes"
	"encoding/json"
	"fmt"
	"html/template"
	"net/http"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/postbox-go/postbox"
)

// overviewDB is one database on the overview.
type overviewDB struct {
	Name   string
	Err    string
	At     time.Time
	Ov     postbox.Overview
	Rate   float64 // published per second at the last sample, -1 when unknown
	Relays relayFigures
	// P50 and P95 are the enqueue-to-publish latency, from the relays that report to the console when they do,
	// else from the kept published messages; zero when neither has any. FromRelays tells which.
	P50, P95   time.Duration
	FromRelays bool
	Charts     []template.HTML
	Paused     map[string]postbox.PausedTopic // by topic
	// Longest is the longest a ready message of a topic that is not paused has waited for a relay, and
	// LongestTopic that topic; zero when none waits.
	Longest      time.Duration
	LongestTopic string
	// Waits is each topic's longest wait, by topic.
	Waits map[string]time.Duration
	// Heartbeats are the relays' records of themselves (postbox.RelayStatus), nil when the table set has none.
	Heartbeats []postbox.RelayStatus
}

// Alert is one line of the overview's banner: a relay stalled or gone, a destination down or slow.
type Alert struct {
	Text  string
	Since time.Time
}

// Alerts are what the relays' heartbeats say is stuck, and since when: the banner above the figures.
func (o overviewDB) Alerts() []Alert {
	var out []Alert
	live := 0
	for _, r := range o.Heartbeats {
		if r.Gone {
			continue
		}
		live++
		if !r.StalledSince.IsZero() {
			out = append(out, Alert{Text: "Relay " + r.Instance + " is stalled: messages are ready and it has published none. Waiting: " +
				strings.Join(r.Waiting, "; "), Since: r.StalledSince})
		}
		for _, d := range r.Destinations {
			if d.State == postbox.DestinationOK {
				continue
			}
			name := d.Name
			if name == "" {
				name = "its broker"
			}
			out = append(out, Alert{Text: fmt.Sprintf("Relay %s: destination %s is %s; %d messages wait for it (topics %s).",
				r.Instance, name, d.State, d.Waiting, strings.Join(d.Topics, ", ")), Since: d.Since})
		}
	}
	if live == 0 && len(o.Heartbeats) > 0 && o.Ov.Ready.N > 0 {
		out = append(out, Alert{Text: "No relay is running: every relay that recorded a heartbeat is gone, and messages are ready."})
	}
	return out
}

// topicHeld returns the destination state holding topic back, per the relays' heartbeats, or "".
func (o overviewDB) topicHeld(topic string) string {
	for _, r := range o.Heartbeats {
		if r.Gone {
			continue
		}
		for _, d := range r.Destinations {
			if d.State != postbox.DestinationOK && slices.Contains(d.Topics, topic) {
				return "destination " + d.State
			}
		}
	}
	return ""
}

// Down reports that the database did not answer the last sample: its figures are unknown, not zero.
func (o overviewDB) Down() bool { return o.Err != "" }

// State is a topic's state on the overview: paused, waiting (a ready message has waited longer than
// ageingAfter), or flowing.
func (o overviewDB) State(t postbox.TopicOverview) string {
	switch {
	case t.Paused:
		return "paused"
	case o.topicHeld(t.Topic) != "":
		return o.topicHeld(t.Topic)
	case o.Waits[t.Topic] > ageingAfter:
		return "waiting"
	default:
		return "flowing"
	}
}

// ageingAfter is how long a ready message may wait before the overview says its topic is waiting: a relay
// polling every second or two takes a message well within it.
const ageingAfter = time.Minute

// waits measures how long each topic's oldest ready message has waited, and the longest among the topics that
// are not paused.
func waits(ov postbox.Overview, now time.Time) (by map[string]time.Duration, longest time.Duration, topic string) {
	by = map[string]time.Duration{}
	for _, t := range ov.Topics {
		if t.OldestWaiting.IsZero() {
			continue
		}
		w := max(0, now.Sub(t.OldestWaiting))
		by[t.Topic] = w
		if !t.Paused && w > longest {
			longest, topic = w, t.Topic
		}
	}
	return by, longest, topic
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
			dbs[i] = overviewDB{Name: name, Err: s.Err, At: s.At, Ov: s.Ov, Rate: s.Rate, Relays: s.Relays, Heartbeats: s.Heartbeats, Charts: c.charts(name),
				Paused: map[string]postbox.PausedTopic{}}
			dbs[i].P50, dbs[i].P95, dbs[i].FromRelays = s.latency()
			dbs[i].Waits, dbs[i].Longest, dbs[i].LongestTopic = waits(s.Ov, time.Now())
			for _, p := range s.Ov.Paused {
				dbs[i].Paused[p.Topic] = p
			}
		}()
	}
	wg.Wait()
	return overviewData{DBs: dbs, Interval: int(c.cfg.SampleInterval / time.Millisecond)}
}

// charts draws a database's recent history: messages waiting (pending and dead), and the publish rate and the
// enqueue-to-publish latency when relays report to the console or keep published messages.
func (c *Console) charts(name string) []template.HTML {
	ss := c.hist.samples(name)
	if len(ss) < 2 {
		return nil
	}
	now := time.Now()
	from := now.Add(-c.cfg.History)
	pending := series{Name: "pending", Class: "s-ready"}
	dead := series{Name: "dead", Class: "s-dead"}
	published := series{Name: "published / s", Class: "s-published"}
	p50 := series{Name: "latency p50 (ms)", Class: "s-published"}
	p95 := series{Name: "latency p95 (ms)", Class: "s-latency"}
	for _, s := range ss {
		if s.Err != "" {
			continue
		}
		pending.Points = append(pending.Points, point{s.At, float64(s.Ov.Pending.N)})
		dead.Points = append(dead.Points, point{s.At, float64(s.Ov.Dead.N)})
		if s.Rate >= 0 {
			published.Points = append(published.Points, point{s.At, s.Rate})
		}
		if l50, l95, _ := s.latency(); l95 > 0 {
			p50.Points = append(p50.Points, point{s.At, float64(l50) / float64(time.Millisecond)})
			p95.Points = append(p95.Points, point{s.At, float64(l95) / float64(time.Millisecond)})
		}
	}
	out := []template.HTML{chart("messages waiting", []series{pending, dead}, from, now)}
	if len(published.Points) > 1 {
		out = append(out, chart("published per second", []series{published}, from, now))
	}
	if len(p95.Points) > 0 {
		out = append(out, chart("enqueue-to-publish latency", []series{p50, p95}, from, now))
	}
	return out
}

func (c *Console) overview(w http.ResponseWriter, r *http.Request) {
	c.render(w, r, "overview", "Overview", c.overviewData(r))
}

// overviewLive is the overview's live part alone, which the page fetches again every SampleInterval.
func (c *Console) overviewLive(w http.ResponseWriter, r *http.Request) {
	c.renderTemplate(w, r, http.StatusOK, "overview", "live", "Overview", c.overviewData(r))
}

// overviewJSON is the overview's figures as JSON, for scripts and dashboards.
func (c *Console) overviewJSON(w http.ResponseWriter, r *http.Request) {
	type topic struct {
		Topic          string   `json:"topic"`
		Pending        int64    `json:"pending"`
		Dead           int64    `json:"dead"`
		Paused         bool     `json:"paused"`
		WaitingSeconds *float64 `json:"waiting_seconds,omitempty"`
	}
	type count struct {
		N    int64 `json:"n"`
		More bool  `json:"more,omitempty"`
	}
	type db struct {
		Name string    `json:"name"`
		At   time.Time `json:"at"`
		// Answered is false when the database did not answer the last sample: the figures are then left out,
		// for they are unknown, not zero.
		Answered           bool     `json:"answered"`
		Error              string   `json:"error,omitempty"`
		Pending            *count   `json:"pending,omitempty"`
		Ready              *count   `json:"ready,omitempty"`
		Scheduled          *count   `json:"scheduled,omitempty"`
		Dead               *count   `json:"dead,omitempty"`
		Published          *count   `json:"published,omitempty"`
		PublishedPerSecond *float64 `json:"published_per_second,omitempty"`
		OldestReadySeconds *float64 `json:"oldest_ready_seconds,omitempty"`
		LongestWaitSeconds *float64 `json:"longest_wait_seconds,omitempty"`
		LongestWaitTopic   string   `json:"longest_wait_topic,omitempty"`
		LatencyP50Seconds  *float64 `json:"latency_p50_seconds,omitempty"`
		LatencyP95Seconds  *float64 `json:"latency_p95_seconds,omitempty"`
		Relays             []string `json:"relays,omitempty"`
		Topics             []topic  `json:"topics"`
	}
	d := c.overviewData(r)
	out := make([]db, len(d.DBs))
	for i, o := range d.DBs {
		out[i] = db{Name: o.Name, At: o.At, Error: o.Err, Answered: !o.Down()}
		if o.Down() {
			continue
		}
		c := func(n postbox.Count) *count { v := count(n); return &v }
		out[i].Pending, out[i].Ready, out[i].Scheduled, out[i].Dead, out[i].Published = c(o.Ov.Pending), c(o.Ov.Ready),
			c(o.Ov.Scheduled), c(o.Ov.Dead), c(o.Ov.Published)
		out[i].Topics = []topic{}
		if o.Longest > 0 {
			s := o.Longest.Seconds()
			out[i].LongestWaitSeconds, out[i].LongestWaitTopic = &s, o.LongestTopic
		}
		if o.Rate >= 0 {
			out[i].PublishedPerSecond = &o.Rate
		}
		if !o.Ov.OldestReady.IsZero() {
			age := time.Since(o.Ov.OldestReady).Seconds()
			out[i].OldestReadySeconds = &age
		}
		if o.P95 > 0 {
			p50, p95 := o.P50.Seconds(), o.P95.Seconds()
			out[i].LatencyP50Seconds, out[i].LatencyP95Seconds = &p50, &p95
		}
		for _, r := range o.Relays.Relays {
			out[i].Relays = append(out[i].Relays, r.Name)
		}
		for _, t := range o.Ov.Topics {
			tp := topic{Topic: t.Topic, Pending: t.Pending, Dead: t.Dead, Paused: t.Paused}
			if w, ok := o.Waits[t.Topic]; ok {
				s := w.Seconds()
				tp.WaitingSeconds = &s
			}
			out[i].Topics = append(out[i].Topics, tp)
		}
	}
	var buf bytes.Buffer
	_ = json.NewEncoder(&buf).Encode(map[string]any{"databases": out})
	w.Header().Set("Content-Type", "application/json")
	_, _ = buf.WriteTo(w)
}

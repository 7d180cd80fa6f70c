package console

import (
	"fmt"
	"log/slog"
	"net/http"
	"strings"

	"github.com/postbox-go/postbox"
)

type replayData struct {
	DB, Topic, From, To string
	Count               *postbox.Count // set once the form asked how many
}

func readReplay(r *http.Request, db string) (replayData, postbox.ReplayFilter, error) {
	v := func(k string) string { return strings.TrimSpace(r.FormValue(k)) }
	d := replayData{DB: db, Topic: v("topic"), From: v("from"), To: v("to")}
	from, err := parseTime("from", d.From)
	if err != nil {
		return d, postbox.ReplayFilter{}, err
	}
	to, err := parseTime("to", d.To)
	if err != nil {
		return d, postbox.ReplayFilter{}, err
	}
	return d, postbox.ReplayFilter{Topic: d.Topic, From: from, To: to}, nil
}

// replay shows the replay form and, once a topic is given, how many kept published messages it would replay.
func (c *Console) replay(w http.ResponseWriter, r *http.Request) {
	name, src, err := c.source(r)
	if err != nil {
		c.refuse(w, r, http.StatusNotFound, c.errText(r, err))
		return
	}
	d, f, err := readReplay(r, name)
	if err == nil && d.Topic != "" {
		var n postbox.Count
		n, err = src.CountReplay(r.Context(), f, c.cfg.CountLimit)
		d.Count = &n
	}
	status, msg := http.StatusOK, ""
	if err != nil {
		status, msg = statusOf(err), c.errText(r, err)
	}
	title := "Replay · " + name
	if d.Topic != "" {
		title = "Replay " + d.Topic + " · " + name
	}
	c.renderStatus(w, r, status, "replay", title, struct {
		replayData
		Err string
	}{d, msg})
}

// replayDo makes the kept published messages of a topic and time range pending again, with their IDs.
func (c *Console) replayDo(w http.ResponseWriter, r *http.Request, log *slog.Logger, who string) {
	name, src, err := c.source(r)
	if err != nil {
		c.refuse(w, r, http.StatusNotFound, c.errText(r, err))
		return
	}
	_, f, err := readReplay(r, name)
	if err != nil {
		c.refuse(w, r, statusOf(err), c.errText(r, err))
		return
	}
	n, err := src.ReplayPublished(r.Context(), f, who)
	if err != nil {
		log.Warn("console: replay failed", "db", name, "topic", f.Topic, "from", f.From, "to", f.To, "err", err)
		c.refuse(w, r, statusOf(err), c.errText(r, err))
		return
	}
	log.Info("console: replay", "db", name, "topic", f.Topic, "from", f.From, "to", f.To, "count", n)
	c.flash(w, r, fmt.Sprintf("Replaying %d message(s) of topic %s in %s.", n, f.Topic, name))
	http.Redirect(w, r, basePath(r)+"/", http.StatusSeeOther)
}

package console

import (
	"fmt"
	"log/slog"
	"net/http"
	"strings"
)

// topicAct pauses or resumes a topic: relays hold its messages back while it is paused.
func (c *Console) topicAct(pause bool) func(w http.ResponseWriter, r *http.Request, log *slog.Logger, who string) {
	return func(w http.ResponseWriter, r *http.Request, log *slog.Logger, who string) {
		name, src, err := c.source(r)
		if err != nil {
			c.refuse(w, r, http.StatusNotFound, c.errText(r, err))
			return
		}
		topic := strings.TrimSpace(r.PostFormValue("topic"))
		if pause && topic != "" && r.PostFormValue("confirm") == "" && !c.knownTopic(r, name, topic) {
			// A mistyped name would pause a topic no message uses, and leave the one meant flowing.
			c.render(w, r, "pause", "Pause "+topic+"?", pauseData{DB: name, Topic: topic})
			return
		}
		verb, did := "resume", "Resumed"
		var changed bool
		if pause {
			verb, did = "pause", "Paused"
			changed, err = src.PauseTopic(r.Context(), topic, who)
		} else {
			changed, err = src.ResumeTopic(r.Context(), topic, who)
		}
		if err != nil {
			log.Warn("console: "+verb+" topic failed", "db", name, "topic", topic, "err", err)
			c.refuse(w, r, statusOf(err), c.errText(r, err))
			return
		}
		log.Info("console: "+verb+" topic", "db", name, "topic", topic, "changed", changed)
		msg := fmt.Sprintf("%s topic %s in %s.", did, topic, name)
		if !changed {
			msg = fmt.Sprintf("Topic %s in %s was already %sd.", topic, name, verb)
		}
		c.flash(w, r, msg)
		http.Redirect(w, r, basePath(r)+"/", http.StatusSeeOther)
	}
}

type pauseData struct{ DB, Topic string }

// knownTopic reports whether topic has pending or dead messages, or is paused, in the database's latest
// figures.
func (c *Console) knownTopic(r *http.Request, db, topic string) bool {
	s := c.current(r.Context(), db)
	for _, t := range s.Ov.Topics {
		if t.Topic == topic {
			return true
		}
	}
	return false
}

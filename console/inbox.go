package console

import (
	"fmt"
	"html/template"
	"log/slog"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/postbox-go/postbox"
)

type inboxData struct {
	DB        string
	Consumers []string
	Consumer  string
	View      postbox.InboxView
	Chart     template.HTML
	Processed int64
	Failed    int64
	Err       string
}

// inboxWindow is how far back the inbox page counts claims.
const inboxWindow = time.Hour

// inbox shows one consumer's inbox: claims per minute, messages failing toward MaxFailures, and those given up.
func (c *Console) inbox(w http.ResponseWriter, r *http.Request) {
	name, src, err := c.source(r)
	if err != nil {
		c.refuse(w, r, http.StatusNotFound, c.errText(r, err))
		return
	}
	d := inboxData{DB: name, Consumer: strings.TrimSpace(r.FormValue("consumer"))}
	d.Consumers, err = src.InboxConsumers(r.Context())
	if err == nil && d.Consumer == "" && len(d.Consumers) > 0 {
		d.Consumer = d.Consumers[0]
	}
	if err == nil && d.Consumer != "" {
		since := time.Now().Add(-inboxWindow)
		d.View, err = src.InboxView(r.Context(), d.Consumer, since, 0)
		d.View = c.redact.inbox(d.View)
		processed := series{Name: "processed / min", Class: "s-published"}
		failed := series{Name: "failed / min", Class: "s-dead"}
		for _, m := range d.View.Minutes {
			processed.Points = append(processed.Points, point{m.Minute, float64(m.Processed)})
			failed.Points = append(failed.Points, point{m.Minute, float64(m.Failed)})
			d.Processed += m.Processed
			d.Failed += m.Failed
		}
		d.Chart = chart("inbox claims per minute", []series{processed, failed}, since, time.Now())
	}
	status := http.StatusOK
	if err != nil {
		d.Err, status = c.errText(r, err), statusOf(err)
	}
	title := "Inbox · " + name
	if d.Consumer != "" {
		title = "Inbox of " + d.Consumer + " · " + name
	}
	c.renderStatus(w, r, status, "inbox", title, d)
}

// inboxRetry forgets a given-up message's failures, so that its next delivery runs the handler again.
func (c *Console) inboxRetry(w http.ResponseWriter, r *http.Request, log *slog.Logger, who string) {
	name, src, err := c.source(r)
	if err != nil {
		c.refuse(w, r, http.StatusNotFound, c.errText(r, err))
		return
	}
	consumer, id := r.PostFormValue("consumer"), r.PostFormValue("message")
	ok, err := src.RetryInbox(r.Context(), consumer, id, who)
	if err != nil {
		log.Warn("console: inbox retry failed", "db", name, "consumer", consumer, "message", id, "err", err)
		c.refuse(w, r, statusOf(err), c.errText(r, err))
		return
	}
	log.Info("console: inbox retry", "db", name, "consumer", consumer, "message", id, "changed", ok)
	msg := fmt.Sprintf("%s will run the handler for %s at its next delivery.", consumer, id)
	if !ok {
		msg = fmt.Sprintf("%s had no failure recorded for %s.", consumer, id)
	}
	c.flash(w, r, msg)
	http.Redirect(w, r, basePath(r)+"/inbox?"+url.Values{"db": {name}, "consumer": {consumer}}.Encode(), http.StatusSeeOther)
}

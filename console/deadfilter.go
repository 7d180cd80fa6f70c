package console

import (
	"fmt"
	"net/http"
	"time"

	"github.com/postbox-go/postbox"
)

// timeLayouts are the forms a time filter is typed in: YYYY-MM-DD HH:MM with or without seconds (or a T in
// between, as a browser's datetime-local field sends), as the pages show times, RFC 3339, or a date alone.
// Times without a zone are UTC, as the pages show them.
var timeLayouts = []string{"2006-01-02 15:04", "2006-01-02 15:04:05", "2006-01-02T15:04", "2006-01-02T15:04:05", time.RFC3339,
	"2006-01-02 15:04:05Z", "2006-01-02"}

func parseTime(field, s string) (time.Time, error) {
	if s == "" {
		return time.Time{}, nil
	}
	for _, l := range timeLayouts {
		if t, err := time.Parse(l, s); err == nil {
			return t, nil
		}
	}
	return time.Time{}, fmt.Errorf("%w: %s %q is not a time; write it as YYYY-MM-DD HH:MM, or with :SS, in UTC and 24-hour (%s)",
		errBadInput, field, s, time.Now().UTC().Format("2006-01-02 15:04"))
}

// deadFilter turns the page's query into the library's filter. A query that names nothing selects every dead
// message.
func deadFilter(q deadQuery, actor string) (postbox.DeadFilter, error) {
	from, err := parseTime("from", q.From)
	if err != nil {
		return postbox.DeadFilter{}, err
	}
	to, err := parseTime("to", q.To)
	if err != nil {
		return postbox.DeadFilter{}, err
	}
	f := postbox.DeadFilter{Topic: q.Topic, Type: q.Type, Key: q.Key, ErrorContains: q.Error, FailedFrom: from,
		FailedBefore: to, Actor: actor}
	if f.Empty() {
		f.All = true
	}
	return f, nil
}

// countDead counts the dead messages f selects, up to the console's cap, for the confirmation page. Every dead
// message of a database is the count the sampler took less than an interval ago, the same capped count.
func (c *Console) countDead(r *http.Request, q deadQuery, src Source, f postbox.DeadFilter) (postbox.Count, error) {
	if !q.Narrowed() {
		if s, ok := c.hist.latest(q.DB); ok && s.Err == "" {
			return s.Ov.Dead, nil
		}
	}
	return src.CountDead(r.Context(), f, c.cfg.CountLimit)
}

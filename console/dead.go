package console

import (
	"bytes"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"html/template"
	"log/slog"
	"maps"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/postbox-go/postbox"
)

// deadQuery is the dead-letter list's filter, as the form and the URL carry it.
type deadQuery struct {
	DB, Topic, Type, Key, Error, From, To, Cursor string
	Newest                                        bool // list newest first
}

func readDeadQuery(r *http.Request, db string) deadQuery {
	v := func(k string) string { return strings.TrimSpace(r.FormValue(k)) }
	return deadQuery{DB: db, Topic: v("topic"), Type: v("type"), Key: v("key"), Error: v("error"), From: v("from"),
		To: v("to"), Cursor: v("cursor"), Newest: v("order") == "newest"}
}

// Values returns the query as URL parameters, without the cursor.
func (q deadQuery) Values() url.Values {
	v := url.Values{}
	for k, s := range map[string]string{"db": q.DB, "topic": q.Topic, "type": q.Type, "key": q.Key, "error": q.Error,
		"from": q.From, "to": q.To} {
		if s != "" {
			v.Set(k, s)
		}
	}
	if q.Newest {
		v.Set("order", "newest")
	}
	return v
}

// Encode returns the query as a URL query string, without the cursor.
func (q deadQuery) Encode() string { return q.Values().Encode() }

// URL returns the list's path with the query and, when not empty, the cursor of a page.
func (q deadQuery) URL(cursor string) template.URL {
	v := q.Values()
	if cursor != "" {
		v.Set("cursor", cursor)
	}
	return template.URL("/dead?" + v.Encode()) //nolint:gosec // encoded by url.Values
}

// Narrowed reports whether the query selects fewer than every dead message.
func (q deadQuery) Narrowed() bool {
	return q.Topic != "" || q.Type != "" || q.Key != "" || q.Error != "" || q.From != "" || q.To != ""
}

type deadListData struct {
	Query deadQuery
	Recs  []postbox.Record
	More  bool
	Next  string // the cursor of the next page
	Err   string
}

func (c *Console) deadList(w http.ResponseWriter, r *http.Request) {
	name, src, err := c.source(r)
	if err != nil {
		c.refuse(w, r, http.StatusNotFound, c.errText(r, err))
		return
	}
	q := readDeadQuery(r, name)
	d := deadListData{Query: q}
	f, err := deadFilter(q, "")
	if err == nil {
		f.Limit, f.After, f.Newest = c.cfg.PageSize+1, q.Cursor, q.Newest
		d.Recs, err = src.ListDead(r.Context(), f)
		d.Recs = c.redact.records(d.Recs)
	}
	status := http.StatusOK
	if err != nil {
		d.Err, status = c.errText(r, err), statusOf(err)
	}
	if len(d.Recs) > c.cfg.PageSize {
		d.Recs, d.More = d.Recs[:c.cfg.PageSize], true
		d.Next = d.Recs[len(d.Recs)-1].ID
	}
	title := "Dead letters · " + name
	if q.Topic != "" {
		title += " · " + q.Topic
	}
	c.renderStatus(w, r, status, "dead", title, d)
}

// statusOf is the HTTP status of a database error: 400 for a refused filter, else 500.
func statusOf(err error) int {
	if errors.Is(err, postbox.ErrInvalidConfig) || errors.Is(err, postbox.ErrInvalidMessage) || errors.Is(err, errBadInput) {
		return http.StatusBadRequest
	}
	return http.StatusInternalServerError
}

var errBadInput = errors.New("console")

type deadShowData struct {
	DB      string
	Rec     postbox.Record
	Payload payloadView
	Headers []header
	// EditErr says why an edited copy was refused; the form then shows what was typed (Edit*).
	EditErr                      string
	EditTopic, EditType, EditKey string
}

type header struct{ Name, Value string }

// payloadView is a payload as the page shows it.
type payloadView struct {
	Kind string // "json", "text" or "binary"
	Text string // pretty JSON, the text, or a hex dump
	Edit string // what the edit box starts with: the text, or hex for binary
}

func viewPayload(p []byte) payloadView {
	if len(p) == 0 {
		return payloadView{Kind: "text"}
	}
	if json.Valid(p) {
		var buf bytes.Buffer
		if json.Indent(&buf, p, "", "  ") == nil {
			return payloadView{Kind: "json", Text: buf.String(), Edit: buf.String()}
		}
	}
	if utf8.Valid(p) && !strings.ContainsFunc(string(p), func(r rune) bool {
		return unicode.IsControl(r) && r != '\n' && r != '\r' && r != '\t'
	}) {
		return payloadView{Kind: "text", Text: string(p), Edit: string(p)}
	}
	return payloadView{Kind: "binary", Text: hex.Dump(p), Edit: hex.EncodeToString(p)}
}

// deadRecord returns one dead message by ID.
func deadRecord(r *http.Request, src Source, id string) (postbox.Record, error) {
	rec, err := src.FindMessage(r.Context(), id)
	if err == nil && rec.Status != postbox.StatusDead {
		err = postbox.ErrNotFound
	}
	return rec, err
}

func (c *Console) deadShow(w http.ResponseWriter, r *http.Request) { c.show(w, r, true) }

// messageShow shows a message in any state: pending, kept published or dead.
func (c *Console) messageShow(w http.ResponseWriter, r *http.Request) { c.show(w, r, false) }

func (c *Console) show(w http.ResponseWriter, r *http.Request, deadOnly bool) {
	name, src, err := c.source(r)
	if err != nil {
		c.refuse(w, r, http.StatusNotFound, c.errText(r, err))
		return
	}
	var rec postbox.Record
	if deadOnly {
		rec, err = deadRecord(r, src, r.PathValue("id"))
	} else {
		rec, err = src.FindMessage(r.Context(), r.PathValue("id"))
	}
	switch {
	case errors.Is(err, postbox.ErrNotFound) && deadOnly:
		c.refuse(w, r, http.StatusNotFound, "No dead message has that ID in "+name+". It may have been retried or purged.")
		return
	case errors.Is(err, postbox.ErrNotFound):
		c.refuse(w, r, http.StatusNotFound, "No message has that ID in the outbox of "+name+
			". Published messages stay there only when relays keep them (RelayConfig.KeepPublished), until cleanup.")
		return
	case err != nil:
		c.refuse(w, r, statusOf(err), c.errText(r, err))
		return
	}
	rec = c.redact.record(rec)
	d := deadShowData{DB: name, Rec: rec, Payload: viewPayload(rec.Payload), Headers: headersOf(rec),
		EditTopic: rec.Topic, EditType: rec.Type, EditKey: rec.Key}
	title := "Dead message " + rec.ID
	if rec.Status != postbox.StatusDead {
		title = "Message " + rec.ID
	}
	c.render(w, r, "deadshow", title, d)
}

type confirmData struct {
	Action string
	Query  deadQuery
	Count  postbox.Count
	IDs    []string // the selection confirmed, when the action is on selected messages
	Next   string   // where to go once done
	Grew   bool     // more messages match than the operator confirmed
}

// deadAct retries or purges dead messages: one or a selection by ID, or everything the posted filter matches.
// Every purge, and every action by filter, first answers with a page showing how many messages it takes and
// asks to confirm; an action by filter is refused when more messages match by then than were confirmed, and
// runs in batches of Config.ActionBatch.
func (c *Console) deadAct(w http.ResponseWriter, r *http.Request, log *slog.Logger, who string) {
	name, src, err := c.source(r)
	if err != nil {
		c.refuse(w, r, http.StatusNotFound, c.errText(r, err))
		return
	}
	action, scope := r.PostFormValue("action"), r.PostFormValue("scope")
	if do := r.PostFormValue("do"); do != "" {
		action, scope, _ = strings.Cut(do, ":")
	}
	if action != "retry" && action != "purge" {
		c.refuse(w, r, http.StatusBadRequest, "Unknown action; use retry or purge.")
		return
	}
	q := readDeadQuery(r, name)
	back := "/dead?" + q.Encode()
	if next := r.PostFormValue("next"); next != "" {
		back = safeNext(next)
	}
	confirm := r.PostFormValue("confirm")
	var f postbox.DeadFilter
	var n, batches int64
	switch scope {
	case "ids":
		ids := slices.Compact(slices.Sorted(slices.Values(r.PostForm["id"])))
		if len(ids) == 0 {
			c.flash(w, r, "Select at least one message first.")
			http.Redirect(w, r, basePath(r)+back, http.StatusSeeOther)
			return
		}
		if action == "purge" && confirm == "" {
			c.render(w, r, "confirm", "Confirm "+action, confirmData{Action: action, Query: q, IDs: ids, Next: back,
				Count: postbox.Count{N: int64(len(ids))}})
			return
		}
		f = postbox.DeadFilter{IDs: ids, Actor: who}
		if action == "retry" {
			n, err = src.RetryDead(r.Context(), f)
		} else {
			n, err = src.PurgeDead(r.Context(), f)
		}
		batches = 1
	case "filter":
		f, err = deadFilter(q, who)
		if err != nil {
			c.refuse(w, r, statusOf(err), c.errText(r, err))
			return
		}
		if confirm == "" {
			count, err := c.countDead(r, q, src, f)
			if err != nil {
				c.fail(w, r, err)
				return
			}
			c.render(w, r, "confirm", "Confirm "+action, confirmData{Action: action, Query: q, Count: count, Next: back})
			return
		}
		confirmed := postbox.Count{More: r.PostFormValue("confirm_more") != ""}
		confirmed.N, err = strconv.ParseInt(confirm, 10, 64)
		if err != nil || confirmed.N < 0 {
			c.refuse(w, r, http.StatusBadRequest, "The confirmation's count is not a number; start again from the list.")
			return
		}
		var now postbox.Count
		now, err = src.CountDead(r.Context(), f, c.cfg.CountLimit)
		if err != nil {
			c.fail(w, r, err)
			return
		}
		if now.N > confirmed.N || now.More && !confirmed.More {
			log.Warn("console: dead "+action+" refused: more match than confirmed", "db", name, "filter", describe(f, q),
				"confirmed", confirmed.N, "now", now.N)
			c.renderStatus(w, r, http.StatusConflict, "confirm", "Confirm "+action, confirmData{Action: action, Query: q, Count: now,
				Next: back, Grew: true})
			return
		}
		total := int64(-1) // every match, past the cap of a count
		if !confirmed.More {
			total = confirmed.N
		}
		n, batches, err = c.actInBatches(r, src, action, f, total)
	default:
		c.refuse(w, r, http.StatusBadRequest, "Say what to act on: scope=ids or scope=filter.")
		return
	}
	if err != nil {
		log.Error("console: dead "+action+" failed", "db", name, "filter", describe(f, q), "count", n, "err", err)
		c.refuse(w, r, statusOf(err), c.errText(r, err))
		return
	}
	log.Info("console: dead "+action, "db", name, "filter", describe(f, q), "count", n, "batches", batches)
	verb := map[string]string{"retry": "Retried", "purge": "Purged"}[action]
	c.flash(w, r, fmt.Sprintf("%s %d dead message(s) in %s.", verb, n, name))
	http.Redirect(w, r, basePath(r)+back, http.StatusSeeOther)
}

// actInBatches retries or purges what f matches, Config.ActionBatch messages per statement, oldest first, until
// total are done (every match when total is negative). It returns how many it changed and in how many batches.
func (c *Console) actInBatches(r *http.Request, src Source, action string, f postbox.DeadFilter, total int64) (n, batches int64, err error) {
	list := f
	list.Actor = ""
	for total < 0 || n < total {
		if err := r.Context().Err(); err != nil {
			return n, batches, err
		}
		size := int64(c.cfg.ActionBatch)
		if total >= 0 {
			size = min(size, total-n)
		}
		list.Limit = int(size)
		recs, err := src.ListDead(r.Context(), list)
		if err != nil || len(recs) == 0 {
			return n, batches, err
		}
		ids := make([]string, len(recs))
		for i, rec := range recs {
			ids[i] = rec.ID
		}
		list.After = ids[len(ids)-1]
		by := postbox.DeadFilter{IDs: ids, Actor: f.Actor}
		var done int64
		if action == "retry" {
			done, err = src.RetryDead(r.Context(), by)
		} else {
			done, err = src.PurgeDead(r.Context(), by)
		}
		n += done
		batches++
		if err != nil || int64(len(recs)) < size {
			return n, batches, err
		}
	}
	return n, batches, nil
}

// describe says what a change selected, for its log line.
func describe(f postbox.DeadFilter, q deadQuery) string {
	if len(f.IDs) > 0 {
		return "ids=" + strings.Join(f.IDs, ",")
	}
	if e := q.Encode(); e != "" {
		return e
	}
	return "all"
}

// deadSend enqueues an edited copy of a dead message as a new message whose header postbox.HeaderReplayOf names
// the original.
// The original stays dead until an operator purges it.
func (c *Console) deadSend(w http.ResponseWriter, r *http.Request, log *slog.Logger, who string) {
	name, src, err := c.source(r)
	if err != nil {
		c.refuse(w, r, http.StatusNotFound, c.errText(r, err))
		return
	}
	id := r.PathValue("id")
	rec, err := deadRecord(r, src, id)
	if err != nil {
		c.refuse(w, r, statusOf(err), c.errText(r, err))
		return
	}
	typed := strings.ReplaceAll(r.PostFormValue("payload"), "\r\n", "\n")
	payload := []byte(typed)
	m := postbox.Message{Topic: strings.TrimSpace(r.PostFormValue("topic")), Key: r.PostFormValue("key"),
		Type: r.PostFormValue("type"), Headers: maps.Clone(rec.Headers)}
	// again shows the message page with what was typed, and why it was not sent.
	again := func(status int, why string) {
		shown := c.redact.record(rec)
		d := deadShowData{DB: name, Rec: shown, Payload: viewPayload(shown.Payload), Headers: headersOf(shown),
			EditErr: why, EditTopic: m.Topic, EditType: m.Type, EditKey: m.Key}
		d.Payload.Edit = typed
		c.renderStatus(w, r, status, "deadshow", "Dead message "+rec.ID, d)
	}
	switch r.PostFormValue("encoding") {
	case "hex":
		payload, err = hex.DecodeString(strings.Join(strings.Fields(typed), ""))
		if err != nil {
			again(http.StatusBadRequest, "The payload is not valid hex: "+err.Error())
			return
		}
	case "json":
		var v any
		if err := json.Unmarshal(payload, &v); err != nil {
			again(http.StatusBadRequest, "The payload is not valid JSON: "+jsonError(typed, err)+
				". Nothing was sent: fix it and send again.")
			return
		}
	}
	m.Payload = payload
	newID, err := src.ResendEdited(r.Context(), rec.ID, m, who)
	if err != nil {
		log.Warn("console: send edited copy failed", "db", name, "original", rec.ID, "err", err)
		if statusOf(err) == http.StatusBadRequest {
			again(http.StatusBadRequest, c.errText(r, err))
			return
		}
		c.refuse(w, r, statusOf(err), c.errText(r, err))
		return
	}
	log.Info("console: sent edited copy of a dead message", "db", name, "original", rec.ID, "id", newID, "topic", m.Topic,
		"bytes", len(payload))
	c.flashLink(w, r, fmt.Sprintf("Sent %s as new message", rec.ID), newID, "/message/"+url.PathEscape(name)+"/"+url.PathEscape(newID),
		fmt.Sprintf("on topic %s.", m.Topic))
	http.Redirect(w, r, basePath(r)+"/dead/"+url.PathEscape(name)+"/"+url.PathEscape(rec.ID), http.StatusSeeOther)
}

func headersOf(rec postbox.Record) []header {
	var out []header
	for _, k := range slices.Sorted(maps.Keys(rec.Headers)) {
		out = append(out, header{k, rec.Headers[k]})
	}
	return out
}

// jsonError says where JSON stops being valid: the line and column, and the error.
func jsonError(text string, err error) string {
	var syn *json.SyntaxError
	if !errors.As(err, &syn) {
		return err.Error()
	}
	before := text[:min(int(syn.Offset), len(text))]
	line := strings.Count(before, "\n") + 1
	col := utf8.RuneCountInString(before[strings.LastIndex(before, "\n")+1:])
	return fmt.Sprintf("line %d, column %d: %s", line, col, err.Error())
}

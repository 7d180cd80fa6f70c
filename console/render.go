package console

import (
	"bytes"
	"fmt"
	"html/template"
	"net/http"
	"net/url"
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/postbox-go/postbox"
)

// page is what every template receives.
type page struct {
	Base      string // the prefix the console is mounted under, "" at the root
	Title     string
	Path      string // the request's path inside the console
	Nav       string // the navigation entry the page belongs to: the path's first element, "" for the overview
	Who       string // the logged-in operator, or ""
	CanLogIn  bool
	ReadOnly  bool
	CSRF      string
	Flash     *flashMsg
	Databases []string
	Data      any
}

// CanChange reports whether the page should offer the forms that change data.
func (p page) CanChange() bool { return !p.ReadOnly && p.Who != "" }

// basePath returns the prefix an http.StripPrefix in front of the console removed: the part of the request URI
// before the path the console sees.
func basePath(r *http.Request) string {
	u, err := url.ParseRequestURI(r.RequestURI)
	if err != nil {
		return ""
	}
	p := u.EscapedPath()
	inner := r.URL.EscapedPath()
	if inner == "" || !strings.HasSuffix(p, inner) {
		return ""
	}
	return strings.TrimSuffix(p[:len(p)-len(inner)], "/")
}

// pageFor gathers what a template needs. Only a whole page takes the flash message: a fragment the overview
// fetches in the background would consume it unseen.
func (c *Console) pageFor(w http.ResponseWriter, r *http.Request, title string, data any, whole bool) page {
	nav, _, _ := strings.Cut(strings.TrimPrefix(r.URL.Path, "/"), "/")
	if nav == "message" {
		nav = "find"
	}
	p := page{Base: basePath(r), Title: title, Path: r.URL.Path, Nav: nav, Who: c.who(r), CanLogIn: c.canLogIn(),
		ReadOnly: c.cfg.ReadOnly, CSRF: c.csrfToken(w, r), Databases: c.names, Data: data}
	if whole {
		p.Flash = c.takeFlash(w, r)
	}
	return p
}

// render writes a page through its template. It renders to a buffer first, so that a template error becomes a
// 500 rather than half a page.
func (c *Console) render(w http.ResponseWriter, r *http.Request, name, title string, data any) {
	c.renderTemplate(w, r, http.StatusOK, name, "layout", title, data)
}

// renderStatus is render with another status than 200.
func (c *Console) renderStatus(w http.ResponseWriter, r *http.Request, status int, name, title string, data any) {
	c.renderTemplate(w, r, status, name, "layout", title, data)
}

// renderTemplate writes the headers (and the cookies the page sets) before the status, which ends them.
func (c *Console) renderTemplate(w http.ResponseWriter, r *http.Request, status int, name, entry, title string, data any) {
	p := c.pageFor(w, r, title, data, entry == "layout")
	var buf bytes.Buffer
	if err := c.pages[name].ExecuteTemplate(&buf, entry, p); err != nil {
		c.cfg.Logger.Error("console: render", "page", name, "err", err)
		http.Error(w, "the page could not be rendered", http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.WriteHeader(status)
	_, _ = buf.WriteTo(w)
}

// refuse answers with a page explaining why a request was not carried out.
func (c *Console) refuse(w http.ResponseWriter, r *http.Request, status int, msg string) {
	c.renderStatus(w, r, status, "error", http.StatusText(status), errorData{Status: status, Message: msg})
}

type errorData struct {
	Status  int
	Message string
}

// fail answers with an error page for an error from a database.
func (c *Console) fail(w http.ResponseWriter, r *http.Request, err error) {
	c.cfg.Logger.Error("console: request failed", "path", r.URL.Path, "err", err)
	c.refuse(w, r, http.StatusInternalServerError, c.errText(r, err))
}

var funcs = template.FuncMap{
	"cause": cause,
	"num":   formatNum,
	"ago":   ago,
	"span":  age,
	"time":  formatTime,
	"short": func(s string, n int) string {
		s = strings.Join(strings.Fields(s), " ")
		if len(s) > n {
			return strings.ToValidUTF8(s[:n], "") + "…"
		}
		return s
	},
	"query": func(kv ...string) template.URL {
		v := url.Values{}
		for i := 0; i+1 < len(kv); i += 2 {
			if kv[i+1] != "" {
				v.Set(kv[i], kv[i+1])
			}
		}
		if len(v) == 0 {
			return ""
		}
		return template.URL("?" + v.Encode())
	},
	"pathEscape": url.PathEscape,
	"count": func(c postbox.Count) string {
		if c.More {
			return "> " + formatNum(c.N)
		}
		return formatNum(c.N)
	},
	"ms": func(d time.Duration) string {
		if d < 10*time.Millisecond {
			return strconv.FormatFloat(float64(d)/float64(time.Millisecond), 'f', 1, 64) + " ms"
		}
		if d < 10*time.Second {
			return strconv.FormatInt(d.Milliseconds(), 10) + " ms"
		}
		return age(d)
	},
	"rate": func(v float64) string {
		if v < 0 {
			return "—"
		}
		return strconv.FormatFloat(v, 'f', 1, 64)
	},
}

// formatNum writes n with thin groups of three digits: 1 234 567.
func formatNum(n int64) string {
	s := strconv.FormatInt(n, 10)
	neg := strings.HasPrefix(s, "-")
	s = strings.TrimPrefix(s, "-")
	var b strings.Builder
	for i, d := range s {
		if i > 0 && (len(s)-i)%3 == 0 {
			b.WriteString("\u202f")
		}
		b.WriteRune(d)
	}
	if neg {
		return "-" + b.String()
	}
	return b.String()
}

// ago says how long ago t was, in the largest unit that fits; "—" for the zero time.
func ago(t time.Time) string {
	if t.IsZero() {
		return "—"
	}
	return age(time.Since(t))
}

func age(d time.Duration) string {
	switch {
	case d < 0:
		return "0s"
	case d < time.Minute:
		return fmt.Sprintf("%ds", int(d.Seconds()))
	case d < time.Hour:
		return fmt.Sprintf("%dm %02ds", int(d.Minutes()), int(d.Seconds())%60)
	case d < 48*time.Hour:
		return fmt.Sprintf("%dh %02dm", int(d.Hours()), int(d.Minutes())%60)
	default:
		return fmt.Sprintf("%dd", int(d.Hours()/24))
	}
}

func formatTime(t time.Time) string {
	if t.IsZero() {
		return "—"
	}
	return t.UTC().Format("2006-01-02 15:04:05Z")
}

// messagePrefix matches what a publisher puts before the cause of an error: which message went where, as in
// "webhook: post message <id> to <url>: " or "amqpbroker: message <id> to "topic": ", and the "Post "<url>": " of
// Go's HTTP client.
var messagePrefix = regexp.MustCompile(`^(?:[\w.-]+: )*(?:(?:post|publish|send)(?:ing)? )?message [0-9a-fA-F-]{36}(?: (?:to|on) (?:"[^"]*"|\S+))?(?::| not published:) ?` +
	`|^(?:Post|Put|Get) "[^"]*": ?`)

// cause is the part of an error that says what went wrong: without the prefixes naming the message and where it
// went, which are the same for every message of a destination and hide the cause in a list cut at a width.
func cause(err string) string {
	out := strings.TrimSpace(err)
	for {
		loc := messagePrefix.FindStringIndex(out)
		if loc == nil || loc[1] == 0 || loc[1] >= len(out) {
			break
		}
		out = strings.TrimSpace(out[loc[1]:])
	}
	if out == "" {
		return err
	}
	return out
}

package console

import (
	"bytes"
	"encoding/json"
	"html/template"
	"net/http"
	"slices"
	"strconv"
	"strings"

	"github.com/postbox-go/postbox"
)

// redacted replaces every secret the console redacts.
const redacted = "xxxxx"

// redactor replaces the secrets of Config (Token, Password, Tokens, Secrets) in what the console reads from its
// databases, before a page or the JSON escapes it: database errors, the sampler's figures, and every field of a
// message (payload, headers, key, topic, type, last error). It never touches the page around them, nor what the
// request itself sent: redacting a request's own words would tell whoever sent them whether they guessed a
// secret.
type redactor struct {
	r     *strings.Replacer // nil when there is no secret
	forms []string          // what r replaces, longest first
}

// htmlForm is html/template's escaping of s (which writes + as &#43;).
var htmlForm = template.Must(template.New("").Parse("{{.}}"))

// newRedactor replaces each secret as written and in the escaped forms stored text may already hold it in
// (html/template's, JSON's, JavaScript's, Go's quoting), longest first so that a secret containing another is
// replaced whole.
func newRedactor(secrets []string) redactor {
	var forms []string
	for _, s := range secrets {
		if len(s) < 4 { // shorter strings would mangle the text; a secret that short protects nothing
			continue
		}
		var h bytes.Buffer
		_ = htmlForm.Execute(&h, s)
		j, _ := json.Marshal(s)
		forms = append(forms, s, h.String(), template.HTMLEscapeString(s), strings.Trim(string(j), `"`),
			template.JSEscapeString(s), strings.Trim(strconv.Quote(s), `"`))
	}
	if len(forms) == 0 {
		return redactor{}
	}
	slices.SortFunc(forms, func(a, b string) int {
		if len(a) != len(b) {
			return len(b) - len(a)
		}
		return strings.Compare(a, b)
	})
	forms = slices.Compact(forms)
	var pairs []string
	for _, f := range forms {
		pairs = append(pairs, f, redacted)
	}
	return redactor{strings.NewReplacer(pairs...), forms}
}

// text redacts s.
func (x redactor) text(s string) string {
	if x.r == nil {
		return s
	}
	return x.r.Replace(s)
}

// record redacts every text field of a message, its payload included.
func (x redactor) record(rec postbox.Record) postbox.Record {
	if x.r == nil {
		return rec
	}
	rec.Topic, rec.Type, rec.Key, rec.LastError = x.text(rec.Topic), x.text(rec.Type), x.text(rec.Key), x.text(rec.LastError)
	if len(rec.Payload) > 0 {
		rec.Payload = []byte(x.text(string(rec.Payload)))
	}
	if rec.Headers != nil {
		h := make(map[string]string, len(rec.Headers))
		for k, v := range rec.Headers {
			h[x.text(k)] = x.text(v)
		}
		rec.Headers = h
	}
	return rec
}

// records redacts each of recs.
func (x redactor) records(recs []postbox.Record) []postbox.Record {
	out := make([]postbox.Record, len(recs))
	for i, r := range recs {
		out[i] = x.record(r)
	}
	return out
}

// overview redacts the names an Overview holds: topics and who paused them.
func (x redactor) overview(o postbox.Overview) postbox.Overview {
	if x.r == nil {
		return o
	}
	o.Topics = slices.Clone(o.Topics)
	for i := range o.Topics {
		o.Topics[i].Topic = x.text(o.Topics[i].Topic)
	}
	o.Paused = slices.Clone(o.Paused)
	for i := range o.Paused {
		o.Paused[i].Topic, o.Paused[i].PausedBy = x.text(o.Paused[i].Topic), x.text(o.Paused[i].PausedBy)
	}
	return o
}

// inbox redacts an inbox view's entries.
func (x redactor) inbox(v postbox.InboxView) postbox.InboxView {
	if x.r == nil {
		return v
	}
	for _, list := range []*[]postbox.InboxEntry{&v.Failing, &v.GivenUp} {
		*list = slices.Clone(*list)
		for i := range *list {
			e := &(*list)[i]
			e.MessageID, e.LastError, e.Consumer = x.text(e.MessageID), x.text(e.LastError), x.text(e.Consumer)
		}
	}
	return v
}

// errText is an error as a page shows it: redacted, except where it quotes the request's own input. An error
// that quotes a parameter (a time that is not one, a database's syntax error) shows the parameter as it was
// sent whether or not it is a secret, so that the answer to a right guess is the answer to a wrong one. A secret
// is kept only where the input holds all of it. What remains: an error that quotes the input and also holds a
// secret equal to it elsewhere shows both, as no text tells a quote from the same characters.
func (c *Console) errText(r *http.Request, err error) string {
	if err == nil {
		return ""
	}
	return c.redactExceptInput(r, err.Error())
}

func (c *Console) redactExceptInput(r *http.Request, s string) string {
	if len(c.redact.forms) == 0 {
		return s
	}
	var inputs []string
	for _, vs := range r.Form {
		inputs = append(inputs, vs...)
	}
	inputs = append(inputs, strings.Split(r.URL.Path, "/")...)
	// Where the text quotes the input.
	quoted := make([]bool, len(s))
	for _, in := range inputs {
		if len(in) < 4 {
			continue // too short to hold a secret
		}
		for from := 0; ; {
			i := strings.Index(s[from:], in)
			if i < 0 {
				break
			}
			for j := from + i; j < from+i+len(in); j++ {
				quoted[j] = true
			}
			from += i + 1
		}
	}
	// Each secret found, longest first at each place as the Replacer would, is replaced unless the input
	// holds all of it.
	var b strings.Builder
	for i := 0; i < len(s); {
		n := 0
		for _, f := range c.redact.forms {
			if strings.HasPrefix(s[i:], f) {
				n = len(f)
				break
			}
		}
		if n == 0 {
			b.WriteByte(s[i])
			i++
			continue
		}
		if slices.Contains(quoted[i:i+n], false) {
			b.WriteString(redacted)
		} else {
			b.WriteString(s[i : i+n])
		}
		i += n
	}
	return b.String()
}

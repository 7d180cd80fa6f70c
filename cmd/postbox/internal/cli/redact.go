package cli

import (
	"io"
	"net/url"
	"regexp"
	"slices"
	"strings"
	"sync"
)

// redacted replaces every secret the CLI prints.
const redacted = "xxxxx"

// sensitiveParams are query parameters whose values are secrets in the URLs of the databases and brokers Postbox
// connects to.
var sensitiveParams = []string{"password", "pass", "passwd", "pwd", "secret", "token", "access_token", "auth_token",
	"api_key", "apikey", "sslpassword", "sasl_password", "client_secret", "credentials", "nkey", "jwt"}

func isSensitive(param string) bool {
	return slices.Contains(sensitiveParams, strings.ToLower(param))
}

// keywordSecret finds a secret in a keyword/value connection string, libpq's "host=db password='p w'" or
// "Server=db;Password=pw": the value of a sensitive keyword, quoted or up to the next space or semicolon.
var keywordSecret = regexp.MustCompile(`(?i)(?:^|[\s;])(?:` + strings.Join(sensitiveParams, "|") +
	`)\s*=\s*('(?:[^'\\]|\\.)*'?|[^\s;]*)`)

// keywordSecrets returns the bounds of every secret value in a keyword/value connection string.
func keywordSecrets(raw string) [][2]int {
	var out [][2]int
	for _, m := range keywordSecret.FindAllStringSubmatchIndex(raw, -1) {
		if m[3] > m[2] {
			out = append(out, [2]int{m[2], m[3]})
		}
	}
	return out
}

// redactKeywords replaces every secret value of a keyword/value connection string.
func redactKeywords(raw string) string {
	spans := keywordSecrets(raw)
	for i := len(spans) - 1; i >= 0; i-- {
		raw = raw[:spans[i][0]] + redacted + raw[spans[i][1]:]
	}
	return raw
}

// unparsedPassword finds the password of a URL or DSN that net/url cannot parse ("scheme://user:PASSWORD@host",
// or go-sql-driver's "user:PASSWORD@tcp(host)/db"): from the first ':' after the scheme to the last '@'. It errs
// towards hiding too much, since the string is malformed anyway. It returns the password's bounds in raw.
func unparsedPassword(raw string) (lo, hi int, ok bool) {
	start := 0
	if i := strings.Index(raw, "://"); i >= 0 {
		start = i + len("://")
	}
	at := strings.LastIndexByte(raw[start:], '@')
	if at < 0 {
		return 0, 0, false
	}
	colon := strings.IndexByte(raw[start:start+at], ':')
	if colon < 0 {
		return 0, 0, false
	}
	return start + colon + 1, start + at, true
}

// parseURL parses raw as a URL with an authority, or reports false for DSNs that net/url would misread, such as
// "user:pass@tcp(host)/db", whose "user" it would take for a scheme.
func parseURL(raw string) (*url.URL, bool) {
	u, err := url.Parse(raw)
	if err != nil || (u.Scheme == "" && u.Host == "") || strings.Contains(u.Opaque, "@") {
		return nil, false
	}
	return u, true
}

// RedactURL returns raw with its password and secret query parameters replaced by xxxxx, for logs, status and
// errors. A string that is not a URL comes back with anything that looks like a password redacted.
func RedactURL(raw string) string {
	u, ok := parseURL(raw)
	if !ok {
		raw = redactKeywords(raw)
		if lo, hi, ok := unparsedPassword(raw); ok {
			return raw[:lo] + redacted + raw[hi:]
		}
		return raw
	}
	if _, has := u.User.Password(); has {
		u.User = url.UserPassword(u.User.Username(), redacted)
	}
	if u.RawQuery != "" {
		q := u.Query()
		changed := false
		for k := range q {
			if isSensitive(k) {
				q[k] = []string{redacted}
				changed = true
			}
		}
		if changed {
			u.RawQuery = q.Encode()
		}
	}
	// url.URL.String escapes the placeholder's characters nowhere, so the result reads plainly.
	out := u.String()
	if odd(u) {
		if lo, hi, ok := unparsedPassword(out); ok {
			out = out[:lo] + redacted + out[hi:]
		}
	}
	return out
}

// odd reports whether u parsed without a host or with a fragment, where a userinfo net/url did not recognise
// ("a://#:PASSWORD@host") may hide in its path or fragment.
func odd(u *url.URL) bool { return u.Host == "" || u.Fragment != "" }

// urlSecrets returns the secrets in raw: its password and its sensitive query values, raw and escaped, so that
// an error message quoting them in either form is scrubbed.
func urlSecrets(raw string) []string {
	var out []string
	add := func(s string) {
		if s == "" {
			return
		}
		out = append(out, s, url.QueryEscape(s), url.PathEscape(s))
	}
	u, ok := parseURL(raw)
	if !ok {
		if lo, hi, ok := unparsedPassword(raw); ok {
			add(raw[lo:hi])
		}
		for _, sp := range keywordSecrets(raw) {
			v := raw[sp[0]:sp[1]]
			add(v)
			if unq := strings.Trim(v, "'"); unq != v {
				add(unq)
				add(strings.NewReplacer(`\'`, `'`, `\\`, `\`).Replace(unq))
			}
		}
		return out
	}
	if p, ok := u.User.Password(); ok {
		add(p)
	}
	if lo, hi, ok := unparsedPassword(raw); ok && odd(u) {
		add(raw[lo:hi])
	}
	for k, vs := range u.Query() {
		if isSensitive(k) {
			for _, v := range vs {
				add(v)
			}
		}
	}
	return out
}

// minScrubLen is the shortest secret scrubbed wherever it appears in free text. A shorter one is scrubbed where it
// stands as a word of its own (between characters that are not letters or digits), since replacing it inside
// words would mangle every line; URLs are redacted structurally whatever their password's length.
const minScrubLen = 4

// secrets collects the secrets of every URL a command was given and scrubs them from text written to stderr,
// where logs and errors go, so that a driver's error quoting a connection string cannot leak a password.
type secrets struct {
	mu   sync.RWMutex
	list []string // longest first, so that a secret containing another is replaced whole
}

func (s *secrets) addURL(raw string) {
	for _, v := range urlSecrets(raw) {
		s.add(v)
	}
}

// add records a secret value, such as a signing key.
func (s *secrets) add(v string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if v != "" && !slices.Contains(s.list, v) {
		s.list = append(s.list, v)
		slices.SortFunc(s.list, func(a, b string) int { return len(b) - len(a) })
	}
}

// scrub replaces every known secret in text.
func (s *secrets) scrub(text string) string {
	s.mu.RLock()
	defer s.mu.RUnlock()
	for _, v := range s.list {
		if len(v) >= minScrubLen {
			text = strings.ReplaceAll(text, v, redacted)
		} else {
			text = replaceWord(text, v)
		}
	}
	return text
}

// replaceWord replaces v in text where no letter or digit touches it on either side.
func replaceWord(text, v string) string {
	var b strings.Builder
	done := 0 // text[:done] is in b
	for from := 0; ; {
		i := strings.Index(text[from:], v)
		if i < 0 {
			b.WriteString(text[done:])
			return b.String()
		}
		i += from
		end := i + len(v)
		if (i == 0 || !isWordByte(text[i-1])) && (end == len(text) || !isWordByte(text[end])) {
			b.WriteString(text[done:i])
			b.WriteString(redacted)
			done, from = end, end
		} else {
			from = i + 1
		}
	}
}

func isWordByte(c byte) bool {
	return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c >= 0x80
}

// scrubWriter writes through s.scrub. Each Write is scrubbed on its own; the CLI's logger and error printer write
// whole lines.
type scrubWriter struct {
	w io.Writer
	s *secrets
}

func (w scrubWriter) Write(p []byte) (int, error) {
	if _, err := io.WriteString(w.w, w.s.scrub(string(p))); err != nil {
		return 0, err
	}
	return len(p), nil
}

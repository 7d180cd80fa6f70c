package console

import (
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"net/url"
	"path"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/postbox-go/postbox"
)

// Cookie names, before the prefix cookieName gives them. The session cookie holds the ID of a session the
// console keeps in memory; the CSRF cookie holds a random value whose signature, bound to the session, every
// form carries back.
const (
	sessionCookie = "postbox_console_session"
	csrfCookie    = "postbox_console_csrf"
	flashCookie   = "postbox_console_flash"
)

// Minimum strength of the console's credentials: a token is a random string, a password a phrase a person types.
const (
	MinTokenBytes      = 16
	MinPasswordLetters = 12
)

// checkCredentialStrength refuses credentials too short to resist guessing, without quoting them.
func (c Config) checkCredentialStrength() error {
	if c.Token != "" && len(c.Token) < MinTokenBytes {
		return fmt.Errorf("%w: console: Token is %d bytes, fewer than %d; make one with openssl rand -hex 24",
			postbox.ErrInvalidConfig, len(c.Token), MinTokenBytes)
	}
	if c.Password != "" && utf8.RuneCountInString(c.Password) < MinPasswordLetters {
		return fmt.Errorf("%w: console: Password is %d characters, fewer than %d; use a longer phrase",
			postbox.ErrInvalidConfig, utf8.RuneCountInString(c.Password), MinPasswordLetters)
	}
	for name, tok := range c.Tokens {
		switch {
		case name == "" || strings.ContainsAny(name, "\x00\r\n\t "):
			return fmt.Errorf("%w: console: a token's name %q is empty or holds blanks; name each token after who uses it",
				postbox.ErrInvalidConfig, name)
		case len(tok) < MinTokenBytes:
			return fmt.Errorf("%w: console: token %q is %d bytes, fewer than %d; make one with openssl rand -hex 24",
				postbox.ErrInvalidConfig, name, len(tok), MinTokenBytes)
		}
	}
	return nil
}

func (c *Console) sign(parts ...string) string {
	m := hmac.New(sha256.New, c.key)
	m.Write([]byte(strings.Join(parts, "\x00")))
	return base64.RawURLEncoding.EncodeToString(m.Sum(nil))
}

// cookieName prefixes a cookie's name as the browser's connection allows: __Host- over HTTPS at the root of the
// site (the browser then refuses the cookie from any other host or path, so a sibling site cannot plant one),
// __Secure- over HTTPS under a prefix, none over plain HTTP.
func (c *Console) cookieName(r *http.Request, name string) string {
	switch {
	case !c.secure(r):
		return name
	case basePath(r) == "":
		return "__Host-" + name
	default:
		return "__Secure-" + name
	}
}

func (c *Console) cookie(r *http.Request, name, value string, maxAge int) *http.Cookie {
	return &http.Cookie{Name: c.cookieName(r, name), Value: value, Path: basePath(r) + "/", MaxAge: maxAge, HttpOnly: true,
		Secure: c.secure(r), SameSite: http.SameSiteStrictMode}
}

func (c *Console) readCookie(r *http.Request, name string) (string, bool) {
	ck, err := r.Cookie(c.cookieName(r, name))
	if err != nil {
		return "", false
	}
	return ck.Value, true
}

// sessions are the console's logins, in memory: a logout, or a restart, ends them for good.
type sessions struct {
	mu   sync.Mutex
	byID map[string]session
}

type session struct {
	who   string
	until time.Time
}

// maxSessions bounds the sessions kept; past it the oldest is dropped. Logins are rate-limited, so only
// operators reach it.
const maxSessions = 10_000

func (s *sessions) start(who string, ttl time.Duration) string {
	b := make([]byte, 32)
	_, _ = rand.Read(b)
	id := base64.RawURLEncoding.EncodeToString(b)
	now := time.Now()
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.byID == nil {
		s.byID = map[string]session{}
	}
	var oldest string
	for k, v := range s.byID {
		if now.After(v.until) {
			delete(s.byID, k)
		} else if oldest == "" || v.until.Before(s.byID[oldest].until) {
			oldest = k
		}
	}
	if len(s.byID) >= maxSessions {
		delete(s.byID, oldest)
	}
	s.byID[id] = session{who: who, until: now.Add(ttl)}
	return id
}

func (s *sessions) lookup(id string) (string, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	v, ok := s.byID[id]
	if !ok || time.Now().After(v.until) {
		return "", false
	}
	return v.who, true
}

func (s *sessions) end(id string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.byID, id)
}

// sessionID returns the ID of the request's live session, or "".
func (c *Console) sessionID(r *http.Request) string {
	id, ok := c.readCookie(r, sessionCookie)
	if !ok {
		return ""
	}
	if _, ok := c.sessions.lookup(id); !ok {
		return ""
	}
	return id
}

// who returns the operator the request's session names, or "" when it has no live session.
func (c *Console) who(r *http.Request) string {
	id, ok := c.readCookie(r, sessionCookie)
	if !ok {
		return ""
	}
	who, _ := c.sessions.lookup(id)
	return who
}

// csrfToken returns the token the request's forms must carry, setting the CSRF cookie when the browser has none.
// It is bound to the session: a token taken from one session carries no change in another.
func (c *Console) csrfToken(w http.ResponseWriter, r *http.Request) string {
	if v, ok := c.readCookie(r, csrfCookie); ok && len(v) == 32 {
		return c.sign("csrf", v, c.sessionID(r))
	}
	b := make([]byte, 16)
	_, _ = rand.Read(b)
	v := hex.EncodeToString(b)
	http.SetCookie(w, c.cookie(r, csrfCookie, v, 0))
	return c.sign("csrf", v, c.sessionID(r))
}

// csrfOK reports whether the posted form carries the token of the request's CSRF cookie and session, and the
// request comes from this site when the browser says where it comes from.
func (c *Console) csrfOK(r *http.Request) bool {
	if site := r.Header.Get("Sec-Fetch-Site"); site != "" && site != "same-origin" && site != "none" {
		return false
	}
	v, ok := c.readCookie(r, csrfCookie)
	if !ok || len(v) != 32 {
		return false
	}
	return hmac.Equal([]byte(r.PostFormValue("csrf")), []byte(c.sign("csrf", v, c.sessionID(r))))
}

// canLogIn reports whether any credential is configured.
func (c *Console) canLogIn() bool {
	return c.cfg.Token != "" || c.cfg.User != "" || len(c.cfg.Tokens) > 0
}

// same compares two strings in a time that depends on neither.
func same(a, b string) int {
	ha, hb := sha256.Sum256([]byte(a)), sha256.Sum256([]byte(b))
	return subtle.ConstantTimeCompare(ha[:], hb[:])
}

// checkCredentials returns who logs in with the form's token, or user and password, or "". Every configured
// credential is compared, whichever matches, so that the time taken tells nothing.
func (c *Console) checkCredentials(tok, user, pass string) string {
	who := ""
	if tok != "" {
		if c.cfg.Token != "" && same(tok, c.cfg.Token) == 1 {
			who = "token"
		}
		for name, t := range c.cfg.Tokens {
			if same(tok, t) == 1 {
				who = name
			}
		}
		return who
	}
	if c.cfg.User != "" && user != "" && same(user, c.cfg.User)&same(pass, c.cfg.Password) == 1 {
		return c.cfg.User
	}
	return ""
}

func (c *Console) loginPage(w http.ResponseWriter, r *http.Request) {
	c.render(w, r, "login", "Log in", loginData{Next: safeNext(r.FormValue("next"))})
}

type loginData struct {
	Next  string
	Error string
}

func (c *Console) login(w http.ResponseWriter, r *http.Request) {
	next := safeNext(r.PostFormValue("next"))
	client := c.clientAddr(r)
	if !c.csrfOK(r) {
		c.refuse(w, r, http.StatusForbidden, "The form's security token is missing or stale. Reload the page and try again.")
		return
	}
	tok, user, pass := r.PostFormValue("token"), r.PostFormValue("user"), r.PostFormValue("password")
	keys := []string{"addr " + client}
	if tok == "" && user != "" {
		// Tokens are long random strings, out of reach of guessing from any number of addresses; a password is
		// not, so guesses at one user from many addresses hold that user back too.
		keys = append(keys, "user "+user)
	}
	if wait, ok := c.logins.take(keys, time.Now()); !ok {
		c.cfg.Logger.Warn("console login refused: too many failed logins", "remote", client, "user", user, "retry_in", wait)
		w.Header().Set("Retry-After", fmt.Sprint(int(wait.Seconds()+1)))
		c.refuse(w, r, http.StatusTooManyRequests, fmt.Sprintf("Too many failed logins. Wait %s and try again.", age(wait+time.Second)))
		return
	}
	who := c.checkCredentials(tok, user, pass)
	if who == "" {
		c.cfg.Logger.Warn("console login refused", "remote", client, "user", user)
		c.renderStatus(w, r, http.StatusUnauthorized, "login", "Log in", loginData{Next: next, Error: "Those credentials are not valid."})
		return
	}
	c.logins.succeed(keys)
	if old, ok := c.readCookie(r, sessionCookie); ok {
		c.sessions.end(old)
	}
	id := c.sessions.start(who, c.cfg.SessionTTL)
	http.SetCookie(w, c.cookie(r, sessionCookie, id, int(c.cfg.SessionTTL/time.Second)))
	c.cfg.Logger.Info("console login", "who", who, "remote", client)
	http.Redirect(w, r, basePath(r)+next, http.StatusSeeOther)
}

func (c *Console) logout(w http.ResponseWriter, r *http.Request) {
	if !c.csrfOK(r) {
		c.refuse(w, r, http.StatusForbidden, "The form's security token is missing or stale. Reload the page and try again.")
		return
	}
	if id, ok := c.readCookie(r, sessionCookie); ok {
		if who, ok := c.sessions.lookup(id); ok {
			c.cfg.Logger.Info("console logout", "who", who, "remote", c.clientAddr(r))
		}
		c.sessions.end(id)
	}
	http.SetCookie(w, c.cookie(r, sessionCookie, "", -1))
	http.Redirect(w, r, basePath(r)+"/", http.StatusSeeOther)
}

// safeNext keeps a post-login destination inside the console: a path alone, with no byte a browser would drop
// or read as a slash (control bytes, backslash), and which no cleaning turns into a host (//host).
func safeNext(next string) string {
	if next == "" || next[0] != '/' || strings.ContainsFunc(next, func(r rune) bool { return r < 0x20 || r == 0x7f || r == '\\' }) {
		return "/"
	}
	u, err := url.Parse(next)
	if err != nil || u.Scheme != "" || u.Host != "" || u.User != nil || u.Opaque != "" {
		return "/"
	}
	p := path.Clean(u.Path)
	if !strings.HasPrefix(p, "/") || strings.HasPrefix(p, "//") || strings.ContainsFunc(p, func(r rune) bool { return r < 0x20 || r == '\\' }) {
		return "/"
	}
	if strings.HasSuffix(u.Path, "/") && p != "/" {
		p += "/"
	}
	out := (&url.URL{Path: p, RawQuery: u.RawQuery}).String()
	if !strings.HasPrefix(out, "/") || strings.HasPrefix(out, "//") {
		return "/"
	}
	return out
}

// change wraps a handler that changes data: it runs only for a logged-in operator whose form carries the CSRF
// token, never when the console is read-only, and it is handed a logger naming who acts.
func (c *Console) change(h func(w http.ResponseWriter, r *http.Request, log *slog.Logger, who string)) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		if c.cfg.ReadOnly {
			c.refuse(w, r, http.StatusForbidden, "This console is read-only.")
			return
		}
		who := c.who(r)
		if who == "" {
			c.cfg.Logger.Warn("console change refused: not logged in", "path", r.URL.Path, "remote", c.clientAddr(r))
			c.refuse(w, r, http.StatusUnauthorized, "Log in to make changes.")
			return
		}
		if !c.csrfOK(r) {
			c.cfg.Logger.Warn("console change refused: no valid CSRF token", "who", who, "path", r.URL.Path, "remote", c.clientAddr(r))
			c.refuse(w, r, http.StatusForbidden, "The form's security token is missing or stale. Reload the page and try again.")
			return
		}
		h(w, r, c.cfg.Logger.With("who", who, "remote", c.clientAddr(r)), who)
	}
}

// flashMsg is a message left for the next page: text, and optionally a link inside the console and the text
// after it.
type flashMsg struct {
	Text  string `json:"t"`
	Link  string `json:"l,omitempty"` // a path inside the console
	Label string `json:"b,omitempty"`
	After string `json:"a,omitempty"`
}

// flash leaves a message for the next page the browser loads.
func (c *Console) flash(w http.ResponseWriter, r *http.Request, msg string) {
	c.setFlash(w, r, flashMsg{Text: msg})
}

// flashLink leaves a message with a link: text, then label linking to link, then after.
func (c *Console) flashLink(w http.ResponseWriter, r *http.Request, text, label, link, after string) {
	c.setFlash(w, r, flashMsg{Text: text, Link: link, Label: label, After: after})
}

func (c *Console) setFlash(w http.ResponseWriter, r *http.Request, m flashMsg) {
	b, _ := json.Marshal(m)
	v := base64.RawURLEncoding.EncodeToString(b)
	http.SetCookie(w, c.cookie(r, flashCookie, v+"."+c.sign("flash", v), 60))
}

// takeFlash returns the message left for this page, and clears it.
func (c *Console) takeFlash(w http.ResponseWriter, r *http.Request) *flashMsg {
	raw, ok := c.readCookie(r, flashCookie)
	if !ok {
		return nil
	}
	http.SetCookie(w, c.cookie(r, flashCookie, "", -1))
	v, sig, ok := strings.Cut(raw, ".")
	if !ok || !hmac.Equal([]byte(sig), []byte(c.sign("flash", v))) {
		return nil
	}
	b, err := base64.RawURLEncoding.DecodeString(v)
	var m flashMsg
	if err != nil || json.Unmarshal(b, &m) != nil || m.Link != "" && safeNext(m.Link) != m.Link {
		return nil
	}
	return &m
}

package console

import (
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"encoding/hex"
	"log/slog"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"
)

// Cookie names. The session cookie holds who logged in and until when, signed with the console's key; the CSRF
// cookie holds a random value whose signature every form carries back.
const (
	sessionCookie = "postbox_console_session"
	csrfCookie    = "postbox_console_csrf"
	flashCookie   = "postbox_console_flash"
)

func (c *Console) sign(parts ...string) string {
	m := hmac.New(sha256.New, c.key)
	m.Write([]byte(strings.Join(parts, "\x00")))
	return base64.RawURLEncoding.EncodeToString(m.Sum(nil))
}

func (c *Console) cookie(r *http.Request, name, value string, maxAge int) *http.Cookie {
	return &http.Cookie{Name: name, Value: value, Path: basePath(r) + "/", MaxAge: maxAge, HttpOnly: true,
		Secure: r.TLS != nil, SameSite: http.SameSiteStrictMode}
}

// who returns the operator the request's session names, or "" when it has no valid session.
func (c *Console) who(r *http.Request) string {
	ck, err := r.Cookie(sessionCookie)
	if err != nil {
		return ""
	}
	raw, sig, ok := strings.Cut(ck.Value, ".")
	if !ok || !hmac.Equal([]byte(sig), []byte(c.sign("session", raw))) {
		return ""
	}
	b, err := base64.RawURLEncoding.DecodeString(raw)
	if err != nil {
		return ""
	}
	who, exp, ok := strings.Cut(string(b), "\x00")
	if !ok {
		return ""
	}
	until, err := strconv.ParseInt(exp, 10, 64)
	if err != nil || time.Now().Unix() > until {
		return ""
	}
	return who
}

// csrfToken returns the token the request's forms must carry, setting the CSRF cookie when the browser has none.
func (c *Console) csrfToken(w http.ResponseWriter, r *http.Request) string {
	if ck, err := r.Cookie(csrfCookie); err == nil && len(ck.Value) == 32 {
		return c.sign("csrf", ck.Value)
	}
	b := make([]byte, 16)
	_, _ = rand.Read(b)
	v := hex.EncodeToString(b)
	http.SetCookie(w, c.cookie(r, csrfCookie, v, 0))
	return c.sign("csrf", v)
}

// csrfOK reports whether the posted form carries the token of the request's CSRF cookie, and the request comes
// from this site when the browser says where it comes from.
func (c *Console) csrfOK(r *http.Request) bool {
	if site := r.Header.Get("Sec-Fetch-Site"); site != "" && site != "same-origin" && site != "none" {
		return false
	}
	ck, err := r.Cookie(csrfCookie)
	if err != nil || len(ck.Value) != 32 {
		return false
	}
	return hmac.Equal([]byte(r.PostFormValue("csrf")), []byte(c.sign("csrf", ck.Value)))
}

// canLogIn reports whether any credential is configured.
func (c *Console) canLogIn() bool { return c.cfg.Token != "" || c.cfg.User != "" }

// checkCredentials returns who logs in with the form's token or user and password, or "".
func (c *Console) checkCredentials(r *http.Request) string {
	same := func(a, b string) bool {
		ha, hb := sha256.Sum256([]byte(a)), sha256.Sum256([]byte(b))
		return subtle.ConstantTimeCompare(ha[:], hb[:]) == 1
	}
	if tok := r.PostFormValue("token"); c.cfg.Token != "" && tok != "" && same(tok, c.cfg.Token) {
		return "token"
	}
	user, pass := r.PostFormValue("user"), r.PostFormValue("password")
	if c.cfg.User != "" && user != "" && same(user, c.cfg.User) && same(pass, c.cfg.Password) {
		return user
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
	if !c.csrfOK(r) {
		c.refuse(w, r, http.StatusForbidden, "The form's security token is missing or stale. Reload the page and try again.")
		return
	}
	if !c.logins.allow(time.Now()) {
		c.cfg.Logger.Warn("console login refused: too many failed logins", "remote", r.RemoteAddr)
		c.refuse(w, r, http.StatusTooManyRequests, "Too many failed logins in the last minute. Wait a minute and try again.")
		return
	}
	who := c.checkCredentials(r)
	if who == "" {
		c.logins.fail(time.Now())
		c.cfg.Logger.Warn("console login refused", "remote", r.RemoteAddr)
		c.renderStatus(w, r, http.StatusUnauthorized, "login", "Log in", loginData{Next: next, Error: "Those credentials are not valid."})
		return
	}
	exp := time.Now().Add(c.cfg.SessionTTL).Unix()
	raw := base64.RawURLEncoding.EncodeToString([]byte(who + "\x00" + strconv.FormatInt(exp, 10)))
	http.SetCookie(w, c.cookie(r, sessionCookie, raw+"."+c.sign("session", raw), int(c.cfg.SessionTTL/time.Second)))
	c.cfg.Logger.Info("console login", "who", who, "remote", r.RemoteAddr)
	http.Redirect(w, r, basePath(r)+next, http.StatusSeeOther)
}

func (c *Console) logout(w http.ResponseWriter, r *http.Request) {
	if !c.csrfOK(r) {
		c.refuse(w, r, http.StatusForbidden, "The form's security token is missing or stale. Reload the page and try again.")
		return
	}
	http.SetCookie(w, c.cookie(r, sessionCookie, "", -1))
	http.Redirect(w, r, basePath(r)+"/", http.StatusSeeOther)
}

// safeNext keeps a post-login destination inside the console.
func safeNext(next string) string {
	if !strings.HasPrefix(next, "/") || strings.HasPrefix(next, "//") || strings.ContainsAny(next, "\\\r\n") {
		return "/"
	}
	return next
}

// change wraps a handler that changes data: it runs only for a logged-in operator whose form carries the CSRF
// token, never when the console is read-only, and it is handed a logger naming who acts.
func (c *Console) change(h func(w http.ResponseWriter, r *http.Request, log *slog.Logger, who string)) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		r.Body = http.MaxBytesReader(w, r.Body, 4<<20)
		if err := r.ParseForm(); err != nil {
			c.refuse(w, r, http.StatusBadRequest, "The form could not be read: "+err.Error())
			return
		}
		if c.cfg.ReadOnly {
			c.refuse(w, r, http.StatusForbidden, "This console is read-only.")
			return
		}
		who := c.who(r)
		if who == "" {
			c.cfg.Logger.Warn("console change refused: not logged in", "path", r.URL.Path, "remote", r.RemoteAddr)
			c.refuse(w, r, http.StatusUnauthorized, "Log in to make changes.")
			return
		}
		if !c.csrfOK(r) {
			c.cfg.Logger.Warn("console change refused: no valid CSRF token", "who", who, "path", r.URL.Path, "remote", r.RemoteAddr)
			c.refuse(w, r, http.StatusForbidden, "The form's security token is missing or stale. Reload the page and try again.")
			return
		}
		h(w, r, c.cfg.Logger.With("who", who, "remote", r.RemoteAddr), who)
	}
}

// flash leaves a message for the next page the browser loads.
func (c *Console) flash(w http.ResponseWriter, r *http.Request, msg string) {
	v := base64.RawURLEncoding.EncodeToString([]byte(msg))
	http.SetCookie(w, c.cookie(r, flashCookie, v+"."+c.sign("flash", v), 60))
}

// takeFlash returns the message left for this page, and clears it.
func (c *Console) takeFlash(w http.ResponseWriter, r *http.Request) string {
	ck, err := r.Cookie(flashCookie)
	if err != nil {
		return ""
	}
	http.SetCookie(w, c.cookie(r, flashCookie, "", -1))
	v, sig, ok := strings.Cut(ck.Value, ".")
	if !ok || !hmac.Equal([]byte(sig), []byte(c.sign("flash", v))) {
		return ""
	}
	b, err := base64.RawURLEncoding.DecodeString(v)
	if err != nil {
		return ""
	}
	return string(b)
}

// maxFailedLogins is how many failed logins a console takes in a minute, from anyone, before it refuses every
// login until the oldest of them is a minute old: a token or password cannot be guessed at the speed of the
// network.
const maxFailedLogins = 20

// loginLimiter keeps the times of the last maxFailedLogins failed logins.
type loginLimiter struct {
	mu     sync.Mutex
	failed []time.Time
}

func (l *loginLimiter) allow(now time.Time) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.failed) < maxFailedLogins || now.Sub(l.failed[0]) > time.Minute
}

func (l *loginLimiter) fail(now time.Time) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.failed = append(l.failed, now)
	if len(l.failed) > maxFailedLogins {
		l.failed = l.failed[1:]
	}
}

package console

import (
	"crypto/rand"
	"embed"
	"errors"
	"fmt"
	"html/template"
	"io/fs"
	"log/slog"
	"net/http"
	"net/netip"
	"strings"
	"sync"
	"time"

	"github.com/postbox-go/postbox"
)

// Defaults of Config.
const (
	DefaultSampleInterval = 5 * time.Second
	DefaultHistory        = 15 * time.Minute
	DefaultPageSize       = 50
	DefaultSessionTTL     = 12 * time.Hour
	// DefaultCountLimit caps the counts the console shows: each reads at most this many index entries, a few
	// milliseconds, where counting a million pending messages would take a second.
	DefaultCountLimit = 10_000
	// DefaultKeySearchTimeout bounds Find's search by key, which reads the whole outbox where no index covers
	// keys.
	DefaultKeySearchTimeout = 150 * time.Millisecond
	// DefaultWholeSearchTimeout bounds a search by key over the whole table, below the 30s timeouts of the
	// server postbox console runs.
	DefaultWholeSearchTimeout = 20 * time.Second
	// DefaultActionBatch is how many dead messages one statement of a retry or purge by filter changes.
	DefaultActionBatch = 1000
)

// Config configures a Console.
type Config struct {
	// Databases are the sources the console shows, in this order. At least one is required.
	Databases []Database
	// ReadOnly refuses every change, logged in or not, and hides the forms that make them.
	ReadOnly bool
	// Token, when set, lets an operator log in by typing it. Read it from the environment or a secret store,
	// never from a command line.
	Token string
	// User and Password, when both set, let an operator log in with them. Without Token, User and Password the
	// console shows everything and changes nothing.
	User, Password string
	// Secrets are strings no page may show, such as the passwords of the databases' URLs: each is replaced by
	// xxxxx wherever it would appear, in an error from a database as in a payload (and so is the same text
	// anywhere else: a secret of four characters or more that is also a common word hides that word). Token and
	// Password are always among them.
	Secrets []string
	// Logger receives one line per change (who, what, where, how many) and the sampler's errors. Default:
	// slog.Default().
	Logger *slog.Logger
	// SampleInterval is how often Run samples each database for the overview's live figures and chart.
	// Default: DefaultSampleInterval.
	SampleInterval time.Duration
	// History is how far back the overview's chart reaches. Default: DefaultHistory.
	History time.Duration
	// CountLimit caps the counts the overview and the confirmation pages show: past it they say "more than",
	// with the database's estimate beside where it keeps one. The overview's topics are counted over the oldest
	// CountLimit pending and dead messages. Default: DefaultCountLimit.
	CountLimit int64
	// KeySearchTimeout bounds how long Find searches by key before it shows what it found by ID and offers to
	// search the whole table. Default: DefaultKeySearchTimeout.
	KeySearchTimeout time.Duration
	// PageSize is how many dead letters one page lists. Default: DefaultPageSize.
	PageSize int
	// SessionTTL is how long a login lasts. Default: DefaultSessionTTL.
	SessionTTL time.Duration
	// Tokens are further tokens an operator may log in with, by the name the pages and the log lines show for
	// whoever logs in with it: one per person or tool, so that the log tells them apart (Token logs in as
	// "token"). Each is at least MinTokenBytes long.
	Tokens map[string]string
	// PublicReads lets anyone read the pages without logging in when credentials are configured; changes still
	// need a login. By default every page but the login page needs a login once a credential is configured.
	PublicReads bool
	// Hosts, when set, are the host names (with or without a port) requests may name in their Host header: the
	// address the console listens on and the public name a proxy serves it under. A request naming another host
	// gets 421 Misdirected Request, so that a page of another site whose name resolves to the console's address
	// (DNS rebinding) cannot read it from an operator's browser. Default: any host.
	Hosts []string
	// TrustedProxies are the addresses (IP or CIDR) of the reverse proxies in front of the console. From them
	// alone the console believes X-Forwarded-For, for the client address the login limiter and the logs use,
	// and X-Forwarded-Proto: https, which makes its cookies Secure. Default: none.
	TrustedProxies []string
	// WholeSearchTimeout bounds a search by key over the whole table, which only a logged-in operator may start,
	// one at a time. Default: DefaultWholeSearchTimeout.
	WholeSearchTimeout time.Duration
	// ActionBatch is how many dead messages one statement of a retry or purge by filter changes; the action
	// runs batch after batch until it has done what the operator confirmed. Default: DefaultActionBatch.
	ActionBatch int
}

// WithDefaults returns a copy of c with every unset field at its default.
func (c *Config) WithDefaults() Config {
	var out Config
	if c != nil {
		out = *c
	}
	if out.Logger == nil {
		out.Logger = slog.Default()
	}
	if out.SampleInterval <= 0 {
		out.SampleInterval = DefaultSampleInterval
	}
	if out.History <= 0 {
		out.History = DefaultHistory
	}
	if out.CountLimit <= 0 {
		out.CountLimit = DefaultCountLimit
	}
	if out.KeySearchTimeout <= 0 {
		out.KeySearchTimeout = DefaultKeySearchTimeout
	}
	if out.PageSize <= 0 {
		out.PageSize = DefaultPageSize
	}
	if out.SessionTTL <= 0 {
		out.SessionTTL = DefaultSessionTTL
	}
	if out.WholeSearchTimeout <= 0 {
		out.WholeSearchTimeout = DefaultWholeSearchTimeout
	}
	if out.ActionBatch <= 0 {
		out.ActionBatch = DefaultActionBatch
	}
	return out
}

func (c Config) validate() error {
	if len(c.Databases) == 0 {
		return fmt.Errorf("%w: console: no database; set Config.Databases", postbox.ErrInvalidConfig)
	}
	seen := map[string]bool{}
	for i, d := range c.Databases {
		switch {
		case d.Name == "":
			return fmt.Errorf("%w: console: database %d has no name", postbox.ErrInvalidConfig, i)
		case seen[d.Name]:
			return fmt.Errorf("%w: console: two databases are named %q", postbox.ErrInvalidConfig, d.Name)
		case d.Source == nil:
			return fmt.Errorf("%w: console: database %q has no Source; use console.FromClient(client)", postbox.ErrInvalidConfig, d.Name)
		}
		seen[d.Name] = true
	}
	if (c.User == "") != (c.Password == "") {
		return fmt.Errorf("%w: console: set both User and Password, or neither", postbox.ErrInvalidConfig)
	}
	return c.checkCredentialStrength()
}

// Console is the operator console: an http.Handler serving the pages, and a sampler (Run) feeding the overview's
// live figures. Mount it at the root of a server or under a prefix with http.StripPrefix; its links follow the
// prefix.
type Console struct {
	cfg      Config
	dbs      map[string]Source
	names    []string
	mux      *http.ServeMux
	pages    map[string]*template.Template
	key      []byte // signs CSRF tokens and flash messages; new on every start
	hist     *history
	logins   loginLimiter
	sessions sessions // in memory: a restart logs everyone out
	redact   redactor
	relays   relayFeed
	proxies  []netip.Prefix
	// whole is the slot of the one search of a whole table that may run at a time.
	whole chan struct{}

	running sync.Mutex // held by Run
}

//go:embed templates/*.html
var templateFS embed.FS

//go:embed assets
var assetFS embed.FS

// New returns a console over cfg's databases. It does no I/O.
func New(cfg *Config) (*Console, error) {
	c := cfg.WithDefaults()
	if err := c.validate(); err != nil {
		return nil, err
	}
	key := make([]byte, 32)
	if _, err := rand.Read(key); err != nil {
		return nil, fmt.Errorf("console: random key: %w", err)
	}
	proxies, err := parseProxies(c.TrustedProxies)
	if err != nil {
		return nil, err
	}
	con := &Console{cfg: c, dbs: map[string]Source{}, key: key, hist: newHistory(c.History, c.SampleInterval),
		proxies: proxies, whole: make(chan struct{}, 1)}
	for _, d := range c.Databases {
		con.dbs[d.Name] = d.Source
		con.names = append(con.names, d.Name)
	}
	pages, err := parsePages()
	if err != nil {
		return nil, err
	}
	con.pages = pages
	secrets := append([]string{c.Token, c.Password}, c.Secrets...)
	for _, t := range c.Tokens {
		secrets = append(secrets, t)
	}
	con.redact = newRedactor(secrets)
	con.routes()
	return con, nil
}

func parsePages() (map[string]*template.Template, error) {
	layout, err := template.New("layout.html").Funcs(funcs).ParseFS(templateFS, "templates/layout.html")
	if err != nil {
		return nil, err
	}
	names, err := fs.Glob(templateFS, "templates/*.html")
	if err != nil {
		return nil, err
	}
	pages := map[string]*template.Template{}
	for _, n := range names {
		base := strings.TrimSuffix(strings.TrimPrefix(n, "templates/"), ".html")
		if base == "layout" {
			continue
		}
		t, err := template.Must(layout.Clone()).ParseFS(templateFS, n)
		if err != nil {
			return nil, err
		}
		pages[base] = t
	}
	return pages, nil
}

func (c *Console) routes() {
	m := http.NewServeMux()
	assets, _ := fs.Sub(assetFS, "assets")
	m.Handle("GET /assets/", http.StripPrefix("/assets/", http.FileServerFS(assets)))
	m.HandleFunc("GET /{$}", c.overview)
	m.HandleFunc("GET /live", c.overviewLive)
	m.HandleFunc("GET /api/overview", c.overviewJSON)
	m.HandleFunc("GET /dead", c.deadList)
	m.HandleFunc("GET /dead/{db}/{id}", c.deadShow)
	m.HandleFunc("POST /dead/{db}/act", c.change(c.deadAct))
	m.HandleFunc("POST /dead/{db}/{id}/send", c.change(c.deadSend))
	m.HandleFunc("GET /find", c.find)
	m.HandleFunc("GET /message/{db}/{id}", c.messageShow)
	m.HandleFunc("GET /schema", c.schema)
	m.HandleFunc("GET /login", c.loginPage)
	m.HandleFunc("POST /login", c.login)
	m.HandleFunc("POST /logout", c.logout)
	m.HandleFunc("POST /topics/{db}/pause", c.change(c.topicAct(true)))
	m.HandleFunc("POST /topics/{db}/resume", c.change(c.topicAct(false)))
	m.HandleFunc("GET /replay", c.replay)
	m.HandleFunc("POST /replay", c.change(c.replayDo))
	m.HandleFunc("GET /inbox", c.inbox)
	m.HandleFunc("POST /inbox/{db}/retry", c.change(c.inboxRetry))
	c.mux = m
}

// ServeHTTP serves the console's pages.
func (c *Console) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	h := w.Header()
	h.Set("Content-Security-Policy", "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; "+
		"connect-src 'self'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'")
	h.Set("X-Frame-Options", "DENY")
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("Referrer-Policy", "no-referrer")
	h.Set("Cross-Origin-Opener-Policy", "same-origin")
	if !strings.HasPrefix(r.URL.Path, "/assets/") {
		// Pages hold payloads and change with every action: never cache them, nor keep them in history.
		h.Set("Cache-Control", "no-store")
	}
	if !c.admit(w, r) {
		return
	}
	c.mux.ServeHTTP(w, r)
}

// source returns the database the request names by its "db" path value or query parameter.
func (c *Console) source(r *http.Request) (string, Source, error) {
	name := r.PathValue("db")
	if name == "" {
		name = r.FormValue("db")
	}
	if name == "" {
		name = c.names[0]
	}
	s, ok := c.dbs[name]
	if !ok {
		return "", nil, errUnknownDB
	}
	return name, s, nil
}

var errUnknownDB = errors.New("no database of that name")

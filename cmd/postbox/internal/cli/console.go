package cli

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"path"
	"strings"
	"time"

	"github.com/postbox-go/postbox"
	"github.com/postbox-go/postbox/console"
)

// The console's credentials come from the environment only: a command line is visible to every user of the
// machine, and a config file is often committed.
const (
	envConsoleToken    = "POSTBOX_CONSOLE_TOKEN"
	envConsoleTokens   = "POSTBOX_CONSOLE_TOKENS"
	envConsoleUser     = "POSTBOX_CONSOLE_USER"
	envConsolePassword = "POSTBOX_CONSOLE_PASSWORD"
)

var consoleCommand = &command{
	name:     "console",
	synopsis: "--db URL [--db URL]... [--http ADDR] [--read-only] [flags]",
	summary:  "serve the operator console: backlog, dead letters, replay, pause, inbox",
	help: `
The console is a web page over one or more databases' outbox tables: pending and dead messages per topic with a
live chart, dead letters to filter, inspect, retry, purge or edit and send again, a message found by ID or key,
kept published messages replayed, topics paused and resumed, each consumer's inbox, and the migrations.

It listens on 127.0.0.1 unless --http says otherwise, and answers only requests naming its listen address, an
IP address, localhost or a --public-host (421 otherwise). Logins come from the environment, never the command
line: ` + envConsoleToken + `, named tokens in ` + envConsoleTokens + ` ("alice=TOKEN bob=TOKEN", each name shown
in the log for whoever logs in with it), or ` + envConsoleUser + ` and ` + envConsolePassword + `. Tokens are at
least 16 bytes, passwords 12 characters. With a credential set, reading needs a login too, unless --public-reads;
without one, or with --read-only, the console changes nothing. Every change is logged with who made it. A --db
that does not answer at start is shown as down, and tried again at each sample.`,
	examples: []string{
		envConsoleToken + "=$(cat /run/secrets/console) postbox console --db postgres://localhost/app",
		"postbox console --db postgres://localhost/orders --db postgres://localhost/billing --http 127.0.0.1:8080",
		"postbox console --db sqlite:app.db --read-only",
	},
	setup: func(f *flagSet) func(ctx context.Context, rt *runtime, args []string) error {
		var o dbOptions
		var urls []string
		var addr string
		var readOnly bool
		var sample time.Duration
		var publicHosts, proxies []string
		var publicReads bool
		f.List(&urls, "db", "", "URL", "database URL, repeatable: "+dbURLForms+" (required)").secret = true
		f.String(&o.schema, "schema", "", "", "NAME", "PostgreSQL schema or MySQL database holding the tables (default: the search path, or the URL's database)")
		f.String(&o.table, "table", "", postbox.DefaultTable, "NAME", "outbox table")
		f.String(&o.inboxTable, "inbox-table", "", postbox.DefaultInboxTable, "NAME", "inbox table")
		addPoolerFlag(f, &o.pg)
		f.String(&addr, "http", "", "127.0.0.1:8080", "ADDR", "address to serve the console on")
		f.Bool(&readOnly, "read-only", "", "show everything, change nothing")
		f.List(&publicHosts, "public-host", "", "NAME", "host name a proxy serves the console under, repeatable: requests naming another get 421")
		f.List(&proxies, "trusted-proxy", "", "ADDR", "IP or CIDR of a reverse proxy whose X-Forwarded-For and X-Forwarded-Proto to believe, repeatable")
		f.Bool(&publicReads, "public-reads", "", "let anyone read the pages without logging in (changes still need a login)")
		f.Duration(&sample, "sample-interval", console.DefaultSampleInterval, "how often the overview samples each database")
		return func(ctx context.Context, rt *runtime, args []string) error {
			if len(args) != 0 {
				return usageErrorf("console takes no arguments; got %q", args[0])
			}
			if len(urls) == 0 {
				return usageErrorf("--db is required: a database URL such as %s (repeat --db for several)", dbURLForms)
			}
			cfg := &console.Config{ReadOnly: readOnly, Logger: rt.log, SampleInterval: sample,
				Token: rt.env(envConsoleToken), User: rt.env(envConsoleUser), Password: rt.env(envConsolePassword),
				PublicReads: publicReads, TrustedProxies: proxies}
			tokens, err := parseNamedTokens(rt.env(envConsoleTokens))
			if err != nil {
				return err
			}
			cfg.Tokens = tokens
			for _, s := range []string{cfg.Token, cfg.Password} {
				rt.secrets.add(s)
			}
			for _, s := range tokens {
				rt.secrets.add(s)
			}
			if (cfg.User == "") != (cfg.Password == "") {
				return usageErrorf("set both %s and %s, or neither", envConsoleUser, envConsolePassword)
			}
			// The config file's event registry checks what an operator edits and sends, as it checks what
			// the relay publishes.
			reg, err := rt.file.registry()
			if err != nil {
				return err
			}
			names := map[string]int{}
			for _, u := range urls {
				cfg.Secrets = append(cfg.Secrets, urlSecrets(u)...)
				o.url = u
				db, err := o.open(ctx, rt, reg)
				if err != nil {
					return err
				}
				defer db.Close()
				if err := o.checkMigrated(ctx, db); err != nil {
					if db.Ping(ctx) == nil {
						return err // it answers: the tables are missing, or their migrations
					}
					// Down at start: the console shows it as down and the sampler tries again at each sample.
					rt.log.Warn("a database does not answer; the console shows it as down until it does", "db", RedactURL(u), "err", err)
				}
				src, ok := db.(consoleSource)
				if !ok {
					return fmt.Errorf("--db %s: this database cannot be shown in the console", RedactURL(u))
				}
				name := consoleName(u)
				if names[name]++; names[name] > 1 {
					name = fmt.Sprintf("%s (%d)", name, names[name])
				}
				cfg.Databases = append(cfg.Databases, console.Database{Name: name, Source: src.consoleSource()})
			}
			ln, err := net.Listen("tcp", addr)
			if err != nil {
				return fmt.Errorf("--http %s: %w", addr, err)
			}
			cfg.Hosts = consoleHosts(addr, ln.Addr().String(), publicHosts)
			con, err := console.New(cfg)
			if err != nil {
				ln.Close()
				return usageErrorf("%v", err)
			}
			if host, _, _ := net.SplitHostPort(ln.Addr().String()); !isLoopbackHost(host) {
				rt.log.Warn("the console listens beyond this machine without TLS; put it behind a TLS proxy", "addr", ln.Addr().String())
			}
			switch {
			case readOnly:
				rt.log.Info("console is read-only (--read-only)")
			case cfg.Token == "" && cfg.User == "" && len(cfg.Tokens) == 0:
				rt.log.Warn("console makes no changes: set " + envConsoleToken + ", or " + envConsoleUser + " and " +
					envConsolePassword + ", to allow them")
			}
			srv := newHTTPServer(con)
			runCtx, stop := context.WithCancel(ctx)
			defer stop()
			sampled := make(chan struct{})
			go func() {
				defer close(sampled)
				_ = con.Run(runCtx) // returns when runCtx is done
			}()
			serveErr := make(chan error, 1)
			go func() { serveErr <- srv.Serve(ln) }()
			rt.log.Info("console serving", "url", "http://"+ln.Addr().String()+"/", "databases", len(cfg.Databases))
			var runErr error
			select {
			case <-ctx.Done():
			case err := <-serveErr:
				runErr = fmt.Errorf("http server: %w", err)
			}
			stop()
			<-sampled
			sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
			defer cancel()
			if err := srv.Shutdown(sctx); err != nil && !errors.Is(err, http.ErrServerClosed) {
				rt.log.Warn("http shutdown", "err", err)
			}
			return runErr
		}
	},
}

// consoleSource is what a database the CLI opened gives the console.
type consoleSource interface{ consoleSource() console.Source }

func (d *clientDB[TTx]) consoleSource() console.Source { return console.FromClient(d.Client) }

// consoleName names a database on the console's pages: its host and database name, never its credentials or
// query, or a SQLite file's name.
func consoleName(raw string) string {
	if dbScheme(raw) == "sqlite" {
		p, _, err := sqlitePath(raw)
		if err == nil {
			return path.Base(p)
		}
	}
	u, err := url.Parse(raw)
	if err != nil || u.Host == "" {
		return dbScheme(raw)
	}
	if db := strings.Trim(u.Path, "/"); db != "" {
		return u.Host + "/" + db
	}
	return u.Host
}

func isLoopbackHost(host string) bool {
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// parseNamedTokens reads POSTBOX_CONSOLE_TOKENS: name=token pairs separated by blanks or commas. Errors never
// quote a token.
func parseNamedTokens(s string) (map[string]string, error) {
	if strings.TrimSpace(s) == "" {
		return nil, nil
	}
	out := map[string]string{}
	for i, pair := range strings.FieldsFunc(s, func(r rune) bool { return r == ',' || r == ' ' || r == '\n' || r == '\t' }) {
		name, tok, ok := strings.Cut(pair, "=")
		switch {
		case !ok || name == "" || tok == "":
			return nil, usageErrorf("%s: entry %d is not name=token", envConsoleTokens, i+1)
		case out[name] != "":
			return nil, usageErrorf("%s: the name %q is given twice", envConsoleTokens, name)
		}
		out[name] = tok
	}
	return out, nil
}

// consoleHosts are the Host names the console answers for: the name in --http when it is one (addresses always
// pass, as does localhost) and the --public-host names.
func consoleHosts(flag, listen string, public []string) []string {
	hosts := append([]string{listen}, public...)
	if h, _, err := net.SplitHostPort(flag); err == nil && h != "" && net.ParseIP(h) == nil {
		hosts = append(hosts, h)
	}
	return hosts
}

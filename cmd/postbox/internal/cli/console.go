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

It listens on 127.0.0.1 unless --http says otherwise. Reading needs no login. Changes need one: set
` + envConsoleToken + `, or ` + envConsoleUser + ` and ` + envConsolePassword + `, in the environment (never on the
command line); without them, or with --read-only, the console changes nothing. Every change is logged with who
made it.`,
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
		f.List(&urls, "db", "", "URL", "database URL, repeatable: "+dbURLForms+" (required)").secret = true
		f.String(&o.schema, "schema", "", "", "NAME", "PostgreSQL schema or MySQL database holding the tables (default: the search path, or the URL's database)")
		f.String(&o.table, "table", "", postbox.DefaultTable, "NAME", "outbox table")
		f.String(&o.inboxTable, "inbox-table", "", postbox.DefaultInboxTable, "NAME", "inbox table")
		addPoolerFlag(f, &o.pg)
		f.String(&addr, "http", "", "127.0.0.1:8080", "ADDR", "address to serve the console on")
		f.Bool(&readOnly, "read-only", "", "show everything, change nothing")
		f.Duration(&sample, "sample-interval", console.DefaultSampleInterval, "how often the overview samples each database")
		return func(ctx context.Context, rt *runtime, args []string) error {
			if len(args) != 0 {
				return usageErrorf("console takes no arguments; got %q", args[0])
			}
			if len(urls) == 0 {
				return usageErrorf("--db is required: a database URL such as %s (repeat --db for several)", dbURLForms)
			}
			cfg := &console.Config{ReadOnly: readOnly, Logger: rt.log, SampleInterval: sample,
				Token: rt.env(envConsoleToken), User: rt.env(envConsoleUser), Password: rt.env(envConsolePassword)}
			for _, s := range []string{cfg.Token, cfg.Password} {
				rt.secrets.add(s)
			}
			if (cfg.User == "") != (cfg.Password == "") {
				return usageErrorf("set both %s and %s, or neither", envConsoleUser, envConsolePassword)
			}
			names := map[string]int{}
			for _, u := range urls {
				cfg.Secrets = append(cfg.Secrets, urlSecrets(u)...)
				o.url = u
				db, err := o.openMigrated(ctx, rt, nil)
				if err != nil {
					return err
				}
				defer db.Close()
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
			con, err := console.New(cfg)
			if err != nil {
				return usageErrorf("%v", err)
			}
			ln, err := net.Listen("tcp", addr)
			if err != nil {
				return fmt.Errorf("--http %s: %w", addr, err)
			}
			if host, _, _ := net.SplitHostPort(ln.Addr().String()); !isLoopbackHost(host) {
				rt.log.Warn("the console listens beyond this machine without TLS; put it behind a TLS proxy", "addr", ln.Addr().String())
			}
			switch {
			case readOnly:
				rt.log.Info("console is read-only (--read-only)")
			case cfg.Token == "" && cfg.User == "":
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

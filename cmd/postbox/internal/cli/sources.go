package cli

import (
	"context"
	"fmt"
	"net/url"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"time"

	"go.yaml.in/yaml/v3"

	"github.com/postbox-go/postbox"
)

// sourcesKey is the config file's list of sources: the databases one relay serves.
//
//	sources:
//	  - name: tenant-a
//	    db: postgres://relay@db-1/tenant_a
//	  - name: tenant-b
//	    db: mysql://relay:secret@db-2:3306/tenant_b
//	    table: outbox
//	    route: ["audit.*=stdout:"]
const sourcesKey = "sources"

// sourceConfig is one source: a database and a table set, with its own routes where it needs them. Empty fields
// take the value of the flag of the same name.
type sourceConfig struct {
	Name       string   `yaml:"name"`
	DB         string   `yaml:"db"`
	Schema     string   `yaml:"schema"`
	Table      string   `yaml:"table"`
	InboxTable string   `yaml:"inbox-table"`
	Broker     string   `yaml:"broker"`
	Route      []string `yaml:"route"`
	ListenDB   string   `yaml:"listen-db"`
	MaxConns   int      `yaml:"db-max-conns"`
}

// sourceKeys are the keys a source of the config file may have.
var sourceKeys = []string{"name", "db", "schema", "table", "inbox-table", "broker", "route", "listen-db", "db-max-conns"}

// validSourceName is the form of a source's name: it is a metric label and a log field.
var validSourceName = regexp.MustCompile(`^[A-Za-z0-9_][A-Za-z0-9_.-]{0,127}$`)

// decodeSources reads the config file's sources list, refusing unknown keys.
func decodeSources(path string, node yaml.Node) ([]sourceConfig, error) {
	if node.Kind != yaml.SequenceNode {
		return nil, usageErrorf("config file %s, sources (line %d): want a list of sources, each with a name and a db", path, node.Line)
	}
	out := make([]sourceConfig, 0, len(node.Content))
	for i, n := range node.Content {
		if n.Kind != yaml.MappingNode {
			return nil, usageErrorf("config file %s, sources[%d] (line %d): want a mapping such as {name: tenant-a, db: postgres://...}",
				path, i, n.Line)
		}
		for j := 0; j+1 < len(n.Content); j += 2 {
			if k := n.Content[j].Value; !slices.Contains(sourceKeys, k) {
				return nil, usageErrorf("config file %s, sources[%d]: unknown key %q; a source has %s", path, i, k,
					strings.Join(sourceKeys, ", "))
			}
		}
		var s sourceConfig
		if err := n.Decode(&s); err != nil {
			return nil, usageErrorf("config file %s, sources[%d]: %v", path, i, err)
		}
		out = append(out, s)
	}
	return out, nil
}

// sourceSpecs returns the sources a relay serves: the config file's sources list when it has one, else one source
// per --db. Each --db source is named after its database; fields a file source leaves empty come from the flags.
func sourceSpecs(o dbOptions, dbs []string, maxConns int, file *fileConfig) ([]sourceConfig, error) {
	var specs []sourceConfig
	where := "--db"
	if file != nil && file.sources != nil {
		if len(dbs) > 0 {
			return nil, usageErrorf("--db and the config file's sources list both name databases; keep one (the list can hold every database)")
		}
		if len(file.sources) == 0 {
			return nil, usageErrorf("config file %s: sources is empty; list at least one, or leave the key out and give --db", file.path)
		}
		specs = slices.Clone(file.sources)
		where = "config file " + file.path + ", sources"
	} else {
		for _, db := range dbs {
			specs = append(specs, sourceConfig{Name: sourceNameOf(db), DB: db})
		}
	}
	seen := map[string]bool{}
	for i := range specs {
		s := &specs[i]
		if s.DB == "" {
			return nil, usageErrorf("%s[%d] (%s): db is required: a database URL such as %s", where, i, s.Name, dbURLForms)
		}
		if s.Name == "" {
			s.Name = sourceNameOf(s.DB)
		}
		if !validSourceName.MatchString(s.Name) {
			return nil, usageErrorf("%s[%d]: source name %q: use 1 to 128 letters, digits, '_', '.' or '-'", where, i, s.Name)
		}
		if seen[s.Name] {
			return nil, usageErrorf("%s: two sources are named %q; give each a name of its own (the config file's sources list takes a name per source)",
				where, s.Name)
		}
		seen[s.Name] = true
		s.Schema = orDefault(s.Schema, o.schema)
		s.Table = orDefault(s.Table, o.table)
		s.InboxTable = orDefault(s.InboxTable, o.inboxTable)
		if s.MaxConns == 0 {
			s.MaxConns = maxConns
		}
		if s.MaxConns < 0 {
			return nil, usageErrorf("%s[%d] (%s): db-max-conns %d: give a positive number of connections", where, i, s.Name, s.MaxConns)
		}
		if s.ListenDB == "" && len(specs) == 1 {
			s.ListenDB = o.pg.listenURL
		}
	}
	if o.pg.listenURL != "" && len(specs) > 1 {
		return nil, usageErrorf("--listen-db names one database and the relay serves %d; give each source its own listen-db in the config file's sources list",
			len(specs))
	}
	return specs, nil
}

// orDefault returns a, or b when a is empty.
func orDefault(a, b string) string {
	if a != "" {
		return a
	}
	return b
}

// sourceNameOf names a source after its database: the URL's path for PostgreSQL and MySQL, the file's name
// without its extension for SQLite.
func sourceNameOf(raw string) string {
	if dbScheme(raw) == "sqlite" {
		path, _, err := sqlitePath(raw)
		if err != nil {
			return "sqlite"
		}
		return strings.TrimSuffix(filepath.Base(path), filepath.Ext(path))
	}
	u, err := url.Parse(raw)
	if err != nil || strings.Trim(u.Path, "/") == "" {
		return dbScheme(raw)
	}
	return strings.Trim(u.Path, "/")
}

// options returns the dbOptions of one source: its URL and tables, the pooler mode of the flags.
func (s sourceConfig) options(o dbOptions) dbOptions {
	o.url, o.schema, o.table, o.inboxTable = s.DB, s.Schema, s.Table, s.InboxTable
	o.pg.listenURL, o.pg.maxConns = s.ListenDB, s.MaxConns
	return o
}

// same reports whether two specs describe the same source, so that a reload leaves it running.
func (s sourceConfig) same(t sourceConfig) bool {
	return s.Name == t.Name && s.DB == t.DB && s.Schema == t.Schema && s.Table == t.Table && s.InboxTable == t.InboxTable &&
		s.Broker == t.Broker && slices.Equal(s.Route, t.Route) && s.ListenDB == t.ListenDB && s.MaxConns == t.MaxConns
}

// defaultMaxConns bounds each source's connection pool when --db-max-conns is not given: one per worker, which
// holds it while its batch publishes, and one for pings, stats and readiness checks.
func defaultMaxConns(cfg postbox.RelayConfig, ordered bool) int {
	workers := cfg.Workers
	if workers == 0 {
		workers = postbox.DefaultWorkers
		if ordered {
			workers = 1
		}
	}
	return workers + 1
}

// sourceStatus is one source's line in status --json.
type sourceStatus struct {
	Source string `json:"source"`
	status
	Error string `json:"error,omitempty"`
}

// runStatusSources prints the status of every source of the config file, one after the other; a source that
// cannot be read is shown with its error, and makes the command fail once every source is shown.
func runStatusSources(ctx context.Context, rt *runtime, o dbOptions, specs []sourceConfig, asJSON bool) error {
	now := time.Now()
	out := make([]sourceStatus, 0, len(specs))
	failed := 0
	for _, s := range specs {
		line := sourceStatus{Source: s.Name, status: status{Topics: []topicStatus{}}}
		st, err := func() (postbox.Stats, error) {
			sctx, cancel := context.WithTimeout(ctx, 10*time.Second)
			defer cancel()
			so := s.options(o)
			db, err := so.openMigrated(sctx, rt, nil)
			if err != nil {
				return postbox.Stats{}, err
			}
			defer db.Close()
			return db.Stats(sctx)
		}()
		if err != nil {
			failed++
			line.Error = err.Error()
		} else {
			line.status = statusJSON(st, now)
		}
		out = append(out, line)
	}
	if asJSON {
		if err := writeJSON(rt.stdout, map[string]any{"sources": out}); err != nil {
			return err
		}
	} else {
		for _, l := range out {
			if l.Error != "" {
				fmt.Fprintf(rt.stdout, "%s: %s\n", printable(l.Source), printableLines(l.Error))
				continue
			}
			fmt.Fprintf(rt.stdout, "%s: pending %d (ready %d, scheduled %d), dead %d, oldest pending %.3fs\n", printable(l.Source),
				l.Pending, l.Ready, l.Scheduled, l.Dead, l.OldestPendingAgeSeconds)
		}
	}
	if failed > 0 {
		return fmt.Errorf("%d of %d sources could not be read", failed, len(specs))
	}
	return nil
}

// addRelayDBFlags adds the relay's database flags: --db repeatable, one source per database, and the bound on
// each source's connections.
func addRelayDBFlags(f *flagSet, o *dbOptions, ro *relayOptions) {
	f.List(&ro.dbs, "db", "", "URL", "database URL: "+dbURLForms+" (required); repeat it to serve many databases, "+
		"or list them under sources in the config file").secret = true
	addTableFlags(f, o)
	f.add(&option{name: "db-max-conns", usage: "most connections each database's pool opens", placeholder: "N",
		def: "--workers + 1 with many sources, else the driver's default", value: (*intValue)(&ro.maxConns)})
}

// sourcesHelp is the relay help's paragraph on serving many databases.
const sourcesHelp = `One relay serves many databases: repeat --db (each source is named after its database), or list them under
sources in the config file, each with a name, a db, and where it needs them its own schema, table, inbox-table,
broker, route, listen-db and db-max-conns. Each source has its own workers, pool (at most --db-max-conns
connections) and wake-ups: one that is down or slow delays no other. SIGHUP reloads the file's sources list: a
removed source's in-flight batches settle before it stops. /readyz has a line per source and is ready while any
source is; /metrics labels every series with source; status --config FILE shows each source. See docs/MULTI.md.`

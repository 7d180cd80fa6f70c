package sqlstore

import (
	"context"
	"embed"
	"fmt"
	"io/fs"
	"path"
	"sort"
	"strconv"
	"strings"
	"text/template"
	"time"

	"github.com/postbox-go/postbox/driver"
)

//go:embed migrations
var migrationFS embed.FS

type migrationFile struct {
	version int
	name    string
	tmpl    *template.Template
}

// migrationFiles are the parsed migrations of each dialect, by Capabilities().Dialect.
var migrationFiles = map[string][]migrationFile{
	"postgres": loadMigrations("postgres"),
	"sqlite":   loadMigrations("sqlite"),
	"mysql":    loadMigrations("mysql"),
}

// loadMigrations parses the embedded files named NNNN_name.sql of one dialect, in version order.
func loadMigrations(dir string) []migrationFile {
	entries, err := fs.ReadDir(migrationFS, path.Join("migrations", dir))
	if err != nil {
		panic(err)
	}
	var out []migrationFile
	for _, e := range entries {
		base := strings.TrimSuffix(e.Name(), ".sql")
		num, name, ok := strings.Cut(base, "_")
		v, err := strconv.Atoi(num)
		if !ok || err != nil {
			panic("sqlstore: migration file " + e.Name() + " is not named NNNN_name.sql")
		}
		body, err := fs.ReadFile(migrationFS, path.Join("migrations", dir, e.Name()))
		if err != nil {
			panic(err)
		}
		t := template.Must(template.New(e.Name()).Option("missingkey=error").Parse(string(body)))
		out = append(out, migrationFile{version: v, name: name, tmpl: t})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].version < out[j].version })
	return out
}

// templateData is what migration templates see: quoted identifiers, and names as string literals for the
// migrations that look in the catalogue before changing it (MySQL has no CREATE INDEX IF NOT EXISTS).
type templateData struct {
	d                     Dialect
	n                     driver.Names
	Outbox, Inbox, Schema string
	// Partitioned selects the time-partitioned layout (driver.Names.Partitioned).
	Partitioned bool
	// Ordered adds the index of ordered relays (driver.Names.Ordered).
	Ordered bool
	// SQLAPI adds the SQL enqueue API (driver.Names.SQLAPI; sqlapi.go).
	SQLAPI bool
}

// Index returns the quoted name of an index on the outbox table with the given suffix.
func (t templateData) Index(suffix string) string {
	return t.d.QuoteIdent(driver.Derived(t.n.Outbox, suffix))
}

// InboxIndex returns the quoted name of an index on the inbox table with the given suffix.
func (t templateData) InboxIndex(suffix string) string {
	return t.d.QuoteIdent(driver.Derived(t.n.Inbox, suffix))
}

// InboxTable returns the quoted, qualified name of a table derived from the inbox table's name with suffix.
func (t templateData) InboxTable(suffix string) string {
	return table(t.d, t.n, driver.Derived(t.n.Inbox, suffix))
}

// Partition returns the quoted, qualified name of the PostgreSQL partition of the outbox with the given suffix.
func (t templateData) Partition(suffix string) string {
	return table(t.d, t.n, driver.Derived(t.n.Outbox, suffix))
}

// OutboxTable returns the quoted, qualified name of a table derived from the outbox table's name with suffix.
func (t templateData) OutboxTable(suffix string) string {
	return table(t.d, t.n, driver.Derived(t.n.Outbox, suffix))
}

// InboxName is the inbox table's name as a string literal.
func (t templateData) InboxName() string { return t.d.stringLiteral(t.n.Inbox) }

// OutboxName is the outbox table's name as a string literal.
func (t templateData) OutboxName() string { return t.d.stringLiteral(t.n.Outbox) }

// IndexName is the name Index gives the outbox's index with the given suffix, as a string literal.
func (t templateData) IndexName(suffix string) string {
	return t.d.stringLiteral(driver.Derived(t.n.Outbox, suffix))
}

// SchemaName is the schema's name as a string literal, or DATABASE() when there is none (MySQL).
func (t templateData) SchemaName() string {
	if t.n.Schema == "" {
		return "DATABASE()"
	}
	return t.d.stringLiteral(t.n.Schema)
}

// migrations renders the dialect's migrations for n.
func migrations(d Dialect, n driver.Names) []driver.Migration {
	data := templateData{d: d, n: n, Outbox: table(d, n, n.Outbox), Inbox: table(d, n, n.Inbox), Partitioned: n.Partitioned,
		Ordered: n.Ordered, SQLAPI: n.SQLAPI}
	if n.Schema != "" {
		data.Schema = d.QuoteIdent(n.Schema)
	}
	var out []driver.Migration
	for _, f := range migrationFiles[d.Capabilities().Dialect] {
		var b strings.Builder
		if err := f.tmpl.Execute(&b, data); err != nil {
			panic(err) // the embedded templates are fixed; a failure here is a bug caught by every test
		}
		if strings.TrimSpace(b.String()) == "" {
			continue // an optional migration this table set did not ask for (Ordered): not listed, so not applied
		}
		out = append(out, driver.Migration{Version: f.version, Name: f.name, SQL: b.String()})
	}
	return out
}

func versionTable(d Dialect, n driver.Names) string {
	return table(d, n, driver.Derived(n.Outbox, "_migrations"))
}

func createVersionTable(d Dialect, n driver.Names) string {
	return "CREATE TABLE IF NOT EXISTS " + versionTable(d, n) +
		" (version INTEGER PRIMARY KEY, name TEXT NOT NULL, applied_at " + d.timeColumn() + " NOT NULL)"
}

func appliedVersions(ctx context.Context, d Dialect, c Conn, n driver.Names) (map[int]time.Time, error) {
	applied := map[int]time.Time{}
	err := c.Query(ctx, "SELECT version, applied_at FROM "+versionTable(d, n), nil, func(scan func(...any) error) error {
		var v int
		at, dest := d.timeDest()
		if err := scan(&v, dest); err != nil {
			return err
		}
		applied[v] = at()
		return nil
	})
	return applied, err
}

// applyMigrations creates the migrations table on c, then runs each migration not yet applied, statement by
// statement as split returns them, and records it.
func applyMigrations(ctx context.Context, d Dialect, c Conn, n driver.Names, split func(string) []string) ([]int, error) {
	if _, err := c.Exec(ctx, createVersionTable(d, n)); err != nil {
		return nil, fmt.Errorf("postbox: create migrations table: %w", err)
	}
	applied, err := appliedVersions(ctx, d, c, n)
	if err != nil {
		return nil, fmt.Errorf("postbox: read applied migrations: %w", err)
	}
	var done []int
	for _, m := range migrations(d, n) {
		if _, ok := applied[m.Version]; ok {
			continue
		}
		for _, stmt := range split(m.SQL) {
			if _, err := c.Exec(ctx, stmt); err != nil {
				return done, fmt.Errorf("postbox: migration %d (%s): %w", m.Version, m.Name, err)
			}
		}
		if _, err := c.Exec(ctx, "INSERT INTO "+versionTable(d, n)+" (version, name, applied_at) VALUES ("+
			d.ph(1)+", "+d.ph(2)+", "+d.ph(3)+")", m.Version, m.Name, d.timeArg(time.Now())); err != nil {
			return done, fmt.Errorf("postbox: record migration %d: %w", m.Version, err)
		}
		done = append(done, m.Version)
	}
	return done, nil
}

// wholeStatement runs a migration as one statement.
func wholeStatement(sql string) []string { return []string{sql} }

// migrateInTx applies the migrations in one transaction, after prelude when there is one.
func migrateInTx(ctx context.Context, db DB, d Dialect, n driver.Names, prelude func(tx Conn) error) ([]int, error) {
	var done []int
	err := inTx(ctx, db, func(tx Conn) error {
		if prelude != nil {
			if err := prelude(tx); err != nil {
				return err
			}
		}
		var err error
		done, err = applyMigrations(ctx, d, tx, n, wholeStatement)
		return err
	})
	if err != nil {
		return nil, err
	}
	return done, nil
}

func (s *store[TTx]) Migrate(ctx context.Context) ([]int, error) { return s.d.migrate(ctx, s.b, s.n) }

func (s *store[TTx]) MigrationStatus(ctx context.Context) ([]driver.MigrationState, error) {
	var applied map[int]time.Time
	q, args := s.d.tableExists(s.n, driver.Derived(s.n.Outbox, "_migrations"))
	var count int
	if err := s.b.Pool().Query(ctx, q, args, func(scan func(...any) error) error { return scan(&count) }); err != nil {
		return nil, err
	}
	if count > 0 {
		var err error
		if applied, err = appliedVersions(ctx, s.d, s.b.Pool(), s.n); err != nil {
			return nil, fmt.Errorf("postbox: read applied migrations: %w", err)
		}
	}
	var out []driver.MigrationState
	for _, m := range migrations(s.d, s.n) {
		at, ok := applied[m.Version]
		out = append(out, driver.MigrationState{Migration: m, Applied: ok, AppliedAt: at})
	}
	return out, nil
}

func (s *store[TTx]) Migrations() []driver.Migration { return migrations(s.d, s.n) }

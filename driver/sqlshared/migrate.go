package sqlshared

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

var migrationFiles = map[Dialect][]migrationFile{
	Postgres: loadMigrations("postgres"),
	SQLite:   loadMigrations("sqlite"),
	MySQL:    loadMigrations("mysql"),
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
			panic("sqlshared: migration file " + e.Name() + " is not named NNNN_name.sql")
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

// templateData is what migration templates see. Every value is a validated, quoted identifier.
type templateData struct {
	d                     Dialect
	n                     driver.Names
	Outbox, Inbox, Schema string
	// Partitioned selects the time-partitioned layout (driver.Names.Partitioned).
	Partitioned bool
	// Ordered adds the index of ordered relays (driver.Names.Ordered).
	Ordered bool
}

// Index returns the quoted name of an index on the outbox table with the given suffix.
func (t templateData) Index(suffix string) string {
	return t.d.QuoteIdent(driver.Derived(t.n.Outbox, suffix))
}

// InboxIndex returns the quoted name of an index on the inbox table with the given suffix.
func (t templateData) InboxIndex(suffix string) string {
	return t.d.QuoteIdent(driver.Derived(t.n.Inbox, suffix))
}

// Partition returns the quoted, qualified name of the PostgreSQL partition of the outbox with the given suffix.
func (t templateData) Partition(suffix string) string {
	return t.d.table(t.n, driver.Derived(t.n.Outbox, suffix))
}

// Migrations renders the dialect's migrations for n.
func (d Dialect) Migrations(n driver.Names) []driver.Migration {
	data := templateData{d: d, n: n, Outbox: d.table(n, n.Outbox), Inbox: d.table(n, n.Inbox), Partitioned: n.Partitioned,
		Ordered: n.Ordered}
	if n.Schema != "" {
		data.Schema = d.QuoteIdent(n.Schema)
	}
	var out []driver.Migration
	for _, f := range migrationFiles[d] {
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

func (d Dialect) versionTable(n driver.Names) string {
	return d.table(n, driver.Derived(n.Outbox, "_migrations"))
}

func (d Dialect) createVersionTable(n driver.Names) string {
	ts := "timestamptz"
	switch {
	case d.my():
		ts = "BIGINT" // MySQL's INTEGER has 32 bits, too few for microseconds
	case !d.pg():
		ts = "INTEGER"
	}
	return "CREATE TABLE IF NOT EXISTS " + d.versionTable(n) +
		" (version INTEGER PRIMARY KEY, name TEXT NOT NULL, applied_at " + ts + " NOT NULL)"
}

func (d Dialect) appliedVersions(ctx context.Context, c Conn, n driver.Names) (map[int]time.Time, error) {
	applied := map[int]time.Time{}
	err := c.Query(ctx, "SELECT version, applied_at FROM "+d.versionTable(n), nil, func(scan func(...any) error) error {
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

func (s *store[TTx]) Migrate(ctx context.Context) ([]int, error) {
	if s.d.my() {
		return s.migrateMySQL(ctx)
	}
	var done []int
	err := s.inTx(ctx, func(tx Conn) error {
		d, n := s.d, s.n
		if d.pg() {
			// Serialise concurrent migrators before anything else, CREATE SCHEMA IF NOT EXISTS included:
			// concurrent IF NOT EXISTS statements can still collide in PostgreSQL's catalogs.
			if _, err := tx.Exec(ctx, "SELECT pg_advisory_xact_lock($1)", lockKey(n, "migrate")); err != nil {
				return fmt.Errorf("postbox: take migration lock: %w", err)
			}
			if n.Schema != "" {
				if _, err := tx.Exec(ctx, "CREATE SCHEMA IF NOT EXISTS "+driver.QuoteIdent(n.Schema)); err != nil {
					return fmt.Errorf("postbox: create schema %s: %w", n.Schema, err)
				}
			}
		}
		if _, err := tx.Exec(ctx, d.createVersionTable(n)); err != nil {
			return fmt.Errorf("postbox: create migrations table: %w", err)
		}
		applied, err := d.appliedVersions(ctx, tx, n)
		if err != nil {
			return fmt.Errorf("postbox: read applied migrations: %w", err)
		}
		for _, m := range d.Migrations(n) {
			if _, ok := applied[m.Version]; ok {
				continue
			}
			if _, err := tx.Exec(ctx, m.SQL); err != nil {
				return fmt.Errorf("postbox: migration %d (%s): %w", m.Version, m.Name, err)
			}
			if _, err := tx.Exec(ctx, "INSERT INTO "+d.versionTable(n)+" (version, name, applied_at) VALUES ("+
				d.ph(1)+", "+d.ph(2)+", "+d.ph(3)+")", m.Version, m.Name, d.Time(time.Now())); err != nil {
				return fmt.Errorf("postbox: record migration %d: %w", m.Version, err)
			}
			done = append(done, m.Version)
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return done, nil
}

func (s *store[TTx]) MigrationStatus(ctx context.Context) ([]driver.MigrationState, error) {
	var applied map[int]time.Time
	exists, err := s.tableExists(ctx, driver.Derived(s.n.Outbox, "_migrations"))
	if err != nil {
		return nil, err
	}
	if exists {
		if applied, err = s.d.appliedVersions(ctx, s.b.Pool(), s.n); err != nil {
			return nil, fmt.Errorf("postbox: read applied migrations: %w", err)
		}
	}
	var out []driver.MigrationState
	for _, m := range s.d.Migrations(s.n) {
		at, ok := applied[m.Version]
		out = append(out, driver.MigrationState{Migration: m, Applied: ok, AppliedAt: at})
	}
	return out, nil
}

func (s *store[TTx]) Migrations() []driver.Migration { return s.d.Migrations(s.n) }

func (s *store[TTx]) tableExists(ctx context.Context, table string) (bool, error) {
	var q string
	var args []any
	if s.d.pg() {
		schema := s.n.Schema
		q = "SELECT count(*) FROM information_schema.tables WHERE table_name = $1 AND table_schema = "
		args = []any{table}
		if schema == "" {
			q += "current_schema()"
		} else {
			q += "$2"
			args = append(args, schema)
		}
	} else if s.d.my() {
		q = "SELECT count(*) FROM information_schema.tables WHERE table_name = ? AND table_schema = " + mysqlSchema
		args = []any{table, s.n.Schema}
	} else {
		q, args = "SELECT count(*) FROM sqlite_master WHERE type = 'table' AND name = ?", []any{table}
	}
	var count int
	err := s.b.Pool().Query(ctx, q, args, func(scan func(...any) error) error { return scan(&count) })
	return count > 0, err
}

package cli

import (
	"context"
	"fmt"
	"strings"

	"github.com/postbox-go/postbox"
)

// openMigrated opens the database like open, then checks that every migration the command's tables need is
// applied, so that a command on a database never migrated says what to run instead of failing on a missing
// table. The check reads the migrations table only: it is cheap enough for every command.
func (o dbOptions) openMigrated(ctx context.Context, rt *runtime, reg *postbox.Registry) (database, error) {
	db, err := o.open(ctx, rt, reg)
	if err != nil {
		return nil, err
	}
	if err := o.checkMigrated(ctx, db); err != nil {
		db.Close()
		return nil, err
	}
	return db, nil
}

func (o dbOptions) checkMigrated(ctx context.Context, db database) error {
	if err := o.sqliteMissing(); err != nil {
		return err
	}
	states, err := db.MigrationStatus(ctx)
	if err != nil {
		return fmt.Errorf("reading the migrations of %s: %w", RedactURL(o.url), err)
	}
	var missing []string
	for _, s := range states {
		if !s.Applied {
			missing = append(missing, fmt.Sprintf("%04d %s", s.Version, s.Name))
		}
	}
	switch {
	case len(missing) == 0:
		return nil
	case len(missing) == len(states):
		// No migration applied, or a migrations table this user may not see (a least-privilege role, for which
		// information_schema hides it): the outbox itself tells them apart.
		if _, err := db.ListDead(ctx, postbox.DeadFilter{All: true, Limit: 1}); err == nil || !isMissingTable(err) {
			return nil // there, or not readable by this role: the command finds out with its own rights
		}
		return fmt.Errorf("the outbox tables do not exist in this database yet: run `%s`", o.migrateCommand())
	default:
		return fmt.Errorf("the outbox tables lack migration(s) %s: run `%s`", strings.Join(missing, ", "), o.migrateCommand())
	}
}

// isMissingTable reports whether err says a table does not exist: PostgreSQL's undefined_table (42P01), MySQL's
// ER_NO_SUCH_TABLE (1146), SQLite's "no such table".
func isMissingTable(err error) bool {
	msg := err.Error()
	return strings.Contains(msg, "42P01") || strings.Contains(msg, "Error 1146") || strings.Contains(msg, "no such table")
}

// migrateCommand is the migrate up command line that creates the tables o names.
func (o dbOptions) migrateCommand() string {
	cmd := "postbox migrate up --db " + shellQuote(RedactURL(o.url))
	if o.schema != "" {
		cmd += " --schema " + shellQuote(o.schema)
	}
	if o.table != postbox.DefaultTable {
		cmd += " --table " + shellQuote(o.table)
	}
	if o.inboxTable != postbox.DefaultInboxTable {
		cmd += " --inbox-table " + shellQuote(o.inboxTable)
	}
	if o.ordered {
		cmd += " --ordered"
	}
	if o.sqlAPI {
		cmd += " --sql-api"
	}
	return cmd
}

// shellQuote quotes s for a POSIX shell when it holds anything but plain URL characters.
func shellQuote(s string) string {
	if s != "" && strings.Trim(s, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-_./:@%+=,") == "" {
		return s
	}
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}

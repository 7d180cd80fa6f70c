package databasesql_test

import (
	"context"
	"database/sql"
	"errors"
	"log/slog"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/go-sql-driver/mysql"

	"github.com/postbox-go/postbox"
	"github.com/postbox-go/postbox/driver/databasesql"
	"github.com/postbox-go/postbox/driver/drivertest"
	"github.com/postbox-go/postbox/internal/testenv"
)

// securityDoc holds the grants this test runs, so that the documented grants are the tested ones.
const securityDoc = "../../../../docs/SECURITY.md"

// sqlStatements returns the statements of the SQL code block that follows the marker comment in securityDoc.
func sqlStatements(t *testing.T, marker string) []string {
	t.Helper()
	body, err := testenv.DocSQL(securityDoc, marker)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, s := range strings.Split(body, ";\n") {
		if s = strings.TrimSpace(s); s != "" {
			out = append(out, s)
		}
	}
	return out
}

// TestMySQLLeastPrivilegeGrants runs the MySQL grants of docs/SECURITY.md on MariaDB, with user and database
// names of this run, then does each job as its user (drivertest.ExerciseLeastPrivilege).
func TestMySQLLeastPrivilegeGrants(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cfg, err := mysql.ParseDSN(myDSN)
	if err != nil {
		t.Fatal(err)
	}
	suffix := strings.TrimPrefix(testenv.Unique(""), "_")
	user := func(job string) string { return testenv.GrantRole(job, suffix) }
	rename := func(stmts []string) []string {
		for i, s := range stmts {
			s = testenv.RenameGrantRoles(s, suffix)
			stmts[i] = regexp.MustCompile(`\bapp\.`).ReplaceAllString(s, "`"+cfg.DBName+"`.")
		}
		return stmts
	}
	setup := rename(sqlStatements(t, "mysql-grants: setup"))
	tables := rename(sqlStatements(t, "mysql-grants: tables"))

	admin := open(t, "mysql", myDSN)
	jobs := []string{"migrator", "app", "relay", "maintainer"}
	dropAll := func() {
		for _, j := range jobs {
			_, _ = admin.ExecContext(context.Background(), "DROP USER IF EXISTS '"+user(j)+"'@'%'")
		}
	}
	dropAll() // a run that died half-way left them behind
	t.Cleanup(dropAll)
	for _, s := range setup {
		if _, err := admin.ExecContext(ctx, s); err != nil {
			t.Fatalf("the documented setup failed: %v\n%s", err, s)
		}
	}

	clients := map[string]*postbox.Client[*sql.Tx]{}
	for _, j := range jobs {
		c := cfg.Clone()
		c.User, c.Passwd = user(j), "change-me"
		// Tables of this test's own, so that the conformance suite's tables in the same database stay out of it.
		pc := &postbox.Config{Table: "grants_outbox", InboxTable: "grants_inbox", Logger: slog.New(slog.DiscardHandler)}
		if clients[j], err = postbox.NewClient(databasesql.New(open(t, "mysql", c.FormatDSN()), databasesql.MySQL), pc); err != nil {
			t.Fatal(err)
		}
		if j == "migrator" {
			if _, err := clients[j].Migrate(ctx); err != nil {
				t.Fatalf("Migrate as the migrator: %v", err)
			}
			for _, s := range tables {
				s = strings.ReplaceAll(s, ".postbox_", ".grants_")
				if _, err := admin.ExecContext(ctx, s); err != nil {
					t.Fatalf("the documented table grants failed: %v\n%s", err, s)
				}
			}
		}
	}
	drivertest.ExerciseLeastPrivilege(t, drivertest.Roles[*sql.Tx]{
		Migrator: clients["migrator"], App: clients["app"], Relay: clients["relay"], Maintainer: clients["maintainer"],
		Denied: func(err error) bool {
			var me *mysql.MySQLError
			// 1142: command denied on a table; 1143: on a column; 1044: access denied to the database.
			return errors.As(err, &me) && (me.Number == 1142 || me.Number == 1143 || me.Number == 1044)
		},
	})
}

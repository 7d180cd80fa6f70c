package pgxv5_test

import (
	"context"
	"errors"
	"log/slog"
	"net/url"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/postbox-go/postbox"
	"github.com/postbox-go/postbox/driver/drivertest"
	"github.com/postbox-go/postbox/driver/pgxv5"
	"github.com/postbox-go/postbox/internal/testenv"
)

// securityDoc holds the grants this test runs, so that the documented grants are the tested ones.
const securityDoc = "../../../../docs/SECURITY.md"

// sqlBlock returns the SQL code block that follows the marker comment in securityDoc.
func sqlBlock(t *testing.T, marker string) string {
	t.Helper()
	body, err := testenv.DocSQL(securityDoc, marker)
	if err != nil {
		t.Fatal(err)
	}
	return body
}

// TestLeastPrivilegeGrants runs the PostgreSQL grants of docs/SECURITY.md, with role and schema names of this
// run, then does each job as its role (drivertest.ExerciseLeastPrivilege): every job works with its grants, and
// each role is refused what it should not be able to do.
func TestLeastPrivilegeGrants(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	suffix := strings.TrimPrefix(testenv.Unique(""), "_")
	schema := "pbt_grants_" + suffix
	role := func(job string) string { return testenv.GrantRole(job, suffix) }
	rename := func(sql string) string {
		sql = testenv.RenameGrantRoles(sql, suffix)
		// The schema is the word postbox standing alone: in postbox_outbox no word boundary follows it.
		return regexp.MustCompile(`\bpostbox\b`).ReplaceAllString(sql, schema)
	}
	setup := rename(sqlBlock(t, "postgres-grants: setup"))
	tables := rename(sqlBlock(t, "postgres-grants: tables"))

	admin, err := pgx.Connect(ctx, dbURL)
	if err != nil {
		t.Fatal(err)
	}
	defer admin.Close(context.Background())
	jobs := []string{"migrator", "app", "relay", "maintainer"}
	dropAll := func() {
		_, _ = admin.Exec(context.Background(), "DROP SCHEMA IF EXISTS "+schema+" CASCADE")
		for _, j := range jobs {
			_, _ = admin.Exec(context.Background(), "DROP OWNED BY "+role(j))
			_, _ = admin.Exec(context.Background(), "DROP ROLE IF EXISTS "+role(j))
		}
	}
	dropAll() // a run that died half-way left them behind
	t.Cleanup(dropAll)
	if _, err := admin.Exec(ctx, setup); err != nil {
		t.Fatalf("the documented setup failed: %v\n%s", err, setup)
	}

	clients := map[string]*postbox.Client[pgx.Tx]{}
	for _, j := range jobs {
		u, err := url.Parse(dbURL)
		if err != nil {
			t.Fatal(err)
		}
		u.User = url.User(role(j))
		pool, err := pgxpool.New(ctx, u.String())
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(pool.Close)
		// No Config.Schema: the role's search path finds the schema.
		if clients[j], err = postbox.NewClient(pgxv5.New(pool), &postbox.Config{Logger: slog.New(slog.DiscardHandler)}); err != nil {
			t.Fatal(err)
		}
		if j == "migrator" {
			if _, err := clients[j].Migrate(ctx); err != nil {
				t.Fatalf("Migrate as the migrator: %v", err)
			}
			if _, err := pool.Exec(ctx, tables); err != nil {
				t.Fatalf("the documented table grants failed: %v\n%s", err, tables)
			}
		}
	}
	drivertest.ExerciseLeastPrivilege(t, drivertest.Roles[pgx.Tx]{
		Migrator: clients["migrator"], App: clients["app"], Relay: clients["relay"], Maintainer: clients["maintainer"],
		Denied: func(err error) bool {
			var pe *pgconn.PgError
			return errors.As(err, &pe) && pe.Code == "42501" // insufficient_privilege
		},
	})
}

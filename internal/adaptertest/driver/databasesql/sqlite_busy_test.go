package databasesql_test

import (
	"context"
	"database/sql"
	"path/filepath"
	"strings"
	"testing"

	"github.com/postbox-go/postbox"
	"github.com/postbox-go/postbox/driver/databasesql"
)

// TestSQLiteBusyNamesTheFix opens SQLite with the DSN a new user writes, file:shop.db, which sets no busy timeout:
// while another connection holds the write lock, Enqueue through InTx fails at once with SQLITE_BUSY (issue 35:
// "committed 49 of 200 … SQLITE_BUSY", and no hint). The error must keep SQLite's words and name the DSN that
// makes writers wait.
func TestSQLiteBusyNamesTheFix(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "shop.db")
	db := open(t, "sqlite", "file:"+path)
	client, err := postbox.NewClient(databasesql.New(db, databasesql.SQLite), nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := client.Migrate(ctx); err != nil {
		t.Fatal(err)
	}

	// Another writer: a second handle on the file, in the middle of a write transaction.
	other := open(t, "sqlite", "file:"+path)
	holder, err := other.Conn(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer holder.Close()
	if _, err := holder.ExecContext(ctx, "BEGIN IMMEDIATE"); err != nil {
		t.Fatal(err)
	}
	defer holder.ExecContext(ctx, "ROLLBACK")

	err = client.InTx(ctx, func(ctx context.Context, tx *sql.Tx) error {
		_, err := client.Enqueue(ctx, tx, postbox.Message{Topic: "orders", Type: "order.created", Payload: []byte(`{}`)})
		return err
	})
	if err == nil {
		t.Fatal("Enqueue committed while another connection held SQLite's write lock; want SQLITE_BUSY")
	}
	for _, want := range []string{"SQLITE_BUSY", "busy_timeout(10000)", "journal_mode(WAL)", "_txlock=immediate"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("the error of a busy SQLite says no %q:\n%v", want, err)
		}
	}
	if strings.Count(err.Error(), databasesql.SQLiteBusyFix) != 1 {
		t.Errorf("the fix should be named once:\n%v", err)
	}
}

// Command console mounts the operator console in a program's own HTTP server, under /postbox/, over a SQLite
// outbox, fetches its overview once and stops.
//
//	go run ./examples/console
package main

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	_ "modernc.org/sqlite"

	"github.com/postbox-go/postbox"
	"github.com/postbox-go/postbox/console"
	"github.com/postbox-go/postbox/driver/databasesql"
)

func main() {
	if err := run(context.Background()); err != nil {
		log.Fatal(err)
	}
}

func run(ctx context.Context) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	dir, err := os.MkdirTemp("", "postbox-console")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	db, err := sql.Open("sqlite", "file:"+filepath.Join(dir, "shop.db")+
		"?_pragma=journal_mode(WAL)&_pragma=busy_timeout(10000)&_txlock=immediate")
	if err != nil {
		return err
	}
	defer db.Close()
	client, err := postbox.NewClient(databasesql.New(db, databasesql.SQLite), nil)
	if err != nil {
		return err
	}
	if _, err := client.Migrate(ctx); err != nil {
		return err
	}

	// docs: console
	con, err := console.New(&console.Config{
		Databases: []console.Database{{Name: "shop", Source: console.FromClient(client)}},
		// With a token (or a user and password) reading and changes need a login; without one the console
		// only reads.
		Token: os.Getenv("POSTBOX_CONSOLE_TOKEN"),
		// The names the console is served under: a request naming another host gets 421 (DNS rebinding).
		Hosts: []string{"ops.example.com"},
	})
	if err != nil {
		return err
	}
	var wg sync.WaitGroup
	defer wg.Wait()
	wg.Go(func() { _ = con.Run(ctx) }) // samples the overview's live figures until ctx is done

	mux := http.NewServeMux()
	mux.Handle("/postbox/", http.StripPrefix("/postbox", con))
	// docs: end

	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return err
	}
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	served := make(chan error, 1)
	go func() { served <- srv.Serve(ln) }()
	defer func() {
		_ = srv.Shutdown(context.WithoutCancel(ctx))
		<-served
		cancel()
	}()

	resp, err := http.Get("http://" + ln.Addr().String() + "/postbox/")
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return err
	}
	if resp.StatusCode != http.StatusOK || !strings.Contains(string(body), `href="/postbox/dead"`) {
		return errors.New("the console did not answer under /postbox/: " + resp.Status)
	}
	fmt.Println("console overview under /postbox/:", resp.Status)
	return nil
}

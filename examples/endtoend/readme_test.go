package main

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/postbox-go/postbox/internal/testenv"
)

// TestREADMECommandRunsTheProgram takes the README's `go run ./examples/endtoend` line, the command its quick
// start tells a new user to paste, and runs it from the repository's root as a user would: the program must
// build, create its tables, and charge its order once, against the real PostgreSQL and NATS. Only the database
// is a fresh one of the test's own rather than the README's `shop`.
func TestREADMECommandRunsTheProgram(t *testing.T) {
	root, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	env, args := readmeCommand(t, filepath.Join(root, "README.md"), "go run ./examples/endtoend")
	for _, name := range []string{"DATABASE_URL", "NATS_URL"} {
		if _, ok := env[name]; !ok {
			t.Fatalf("the README's command sets no %s: a user pasting it runs against whatever the default is", name)
		}
	}
	dbURL, err := testenv.FreshPostgres("postbox_examples_readme")
	if err != nil {
		t.Fatal(err)
	}
	env["DATABASE_URL"] = dbURL
	if u := os.Getenv("POSTBOX_TEST_NATS"); u != "" {
		env["NATS_URL"] = u
	}

	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	// The program's stream and consumer, from a run before, would hold deliveries this database never saw.
	nc, err := nats.Connect(env["NATS_URL"])
	if err != nil {
		t.Fatalf("NATS is not reachable at %s (start nats-server -js, or set POSTBOX_TEST_NATS): %v", env["NATS_URL"], err)
	}
	defer nc.Close()
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	if err := js.DeleteStream(ctx, "SHOP"); err != nil && !errors.Is(err, jetstream.ErrStreamNotFound) {
		t.Fatal(err)
	}

	cmd := exec.CommandContext(ctx, args[0], args[1:]...)
	cmd.Dir = root
	cmd.Env = os.Environ()
	for k, v := range env {
		cmd.Env = append(cmd.Env, k+"="+v)
	}
	out, err := cmd.CombinedOutput()
	if ctx.Err() != nil {
		t.Fatalf("the README's command did not finish within 5 minutes; output so far:\n%s", out)
	}
	if err != nil {
		t.Fatalf("the README's command %q failed (%v):\n%s", strings.Join(args, " "), err, out)
	}
	if !strings.Contains(string(out), "charged once, payment event published") {
		t.Fatalf("the README's command exited 0 but did not report the order charged:\n%s", out)
	}

	conn, err := pgx.Connect(ctx, dbURL)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	var orders, charges int
	if err := conn.QueryRow(ctx, "SELECT (SELECT count(*) FROM orders), (SELECT count(*) FROM charges)").Scan(&orders, &charges); err != nil {
		t.Fatalf("the program's tables are not in the database: %v", err)
	}
	if orders != 1 || charges != 1 {
		t.Fatalf("after the README's command: %d orders and %d charges; want one of each", orders, charges)
	}
}

// readmeCommand finds the line of a ```sh block in the Markdown file that contains command, and splits it into
// its leading NAME=value assignments and the command's words.
func readmeCommand(t *testing.T, path, command string) (map[string]string, []string) {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	inSh := false
	for _, line := range strings.Split(string(b), "\n") {
		trimmed := strings.TrimSpace(line)
		switch {
		case strings.HasPrefix(trimmed, "```"):
			inSh = trimmed == "```sh"
			continue
		case !inSh || !strings.Contains(trimmed, command):
			continue
		}
		if i := strings.Index(trimmed, " #"); i >= 0 {
			trimmed = trimmed[:i]
		}
		env := map[string]string{}
		words := strings.Fields(trimmed)
		for len(words) > 0 && strings.Contains(words[0], "=") {
			name, value, _ := strings.Cut(words[0], "=")
			env[name] = value
			words = words[1:]
		}
		return env, words
	}
	t.Fatalf("%s has no ```sh line running %q: the quick start must say how to run the whole program", path, command)
	return nil, nil
}

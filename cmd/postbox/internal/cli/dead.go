package cli

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os/user"
	"runtime/debug"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"
	"unicode/utf8"

	"github.com/postbox-go/postbox"
)

var deadCommand = &command{
	name:     "dead",
	synopsis: "list|count|retry|purge --db URL [--topic T] [--type T] [--key K] [--error TEXT] [--id ID]... [--all] [flags]",
	summary:  "list, retry or purge messages parked as dead",
	help: `
A message is parked as dead after its last allowed publish attempt, on a permanent error, or when it breaks the
event registry. 'dead list' shows dead messages with their attempts and last error (all of them when no filter is
given), oldest first (--newest for newest first); --after ID continues a listing after its last ID. 'dead count'
counts them, up to --limit (100000 by default). 'dead retry' makes the selected messages pending again, at once,
with their attempts reset. 'dead purge' deletes them. A message is selected when it matches every filter given:
--topic, --type, --key, --error (a literal, case-sensitive part of the last error), --failed-from and
--failed-before (RFC 3339 times bounding the last failure), --id (repeatable). retry and purge need a filter, or
--all, so that nothing is changed by accident; they are logged with --actor (default: $USER, else the account
running postbox).`,
	examples: []string{
		"postbox dead list --db postgres://localhost/app --topic orders",
		"postbox dead retry --db postgres://localhost/app --id 0190f6e4-3b7a-7c3d-8e4f-123456789abc",
		"postbox dead purge --db sqlite:app.db --all",
		"postbox dead list --db sqlite:app.db --json --limit 10",
		"postbox dead count --db postgres://localhost/app --error timeout --failed-from 2026-01-02T15:00:00Z",
		"postbox dead retry --db postgres://localhost/app --type order.created --error timeout --actor alice",
	},
	setup: func(f *flagSet) func(ctx context.Context, rt *runtime, args []string) error {
		var o dbOptions
		var topic, typ, key, errText, from, before, after, actor string
		var ids []string
		var all, asJSON, newest bool
		var limit int
		addDBFlags(f, &o)
		f.String(&topic, "topic", "t", "", "TOPIC", "only dead messages of this topic")
		f.String(&typ, "type", "", "", "TYPE", "only dead messages of this event type")
		f.String(&key, "key", "k", "", "KEY", "only dead messages with this key")
		f.String(&errText, "error", "", "", "TEXT", "only dead messages whose last error contains this text")
		f.String(&from, "failed-from", "", "", "TIME", "only dead messages that last failed at or after this RFC 3339 time")
		f.String(&before, "failed-before", "", "", "TIME", "only dead messages that last failed before this RFC 3339 time")
		f.String(&after, "after", "", "", "UUID", "list the messages after this one (the last ID of the previous listing)")
		f.Bool(&newest, "newest", "", "list newest first")
		f.String(&actor, "actor", "", "", "NAME", "who retries or purges, for the log (default: $USER, else the account running postbox)")
		f.List(&ids, "id", "", "UUID", "only this dead message")
		f.Bool(&all, "all", "", "every dead message")
		f.Int(&limit, "limit", 0, "list at most this many (0: no limit), or count up to this many (0: 100000)")
		f.Bool(&asJSON, "json", "", "print JSON")
		return func(ctx context.Context, rt *runtime, args []string) error {
			if len(args) != 1 {
				return usageErrorf("say what to do: dead list, dead retry or dead purge")
			}
			action := args[0]
			if action != "list" && action != "count" && action != "retry" && action != "purge" {
				return usageErrorf("unknown dead action %q: use list, count, retry or purge", action)
			}
			for _, fl := range []struct{ name, v string }{{"--topic", topic}, {"--type", typ}, {"--key", key}, {"--error", errText},
				{"--after", after}, {"--actor", actor}} {
				if err := checkFlagText(fl.name, fl.v); err != nil {
					return err
				}
			}
			var failedFrom, failedBefore time.Time
			for _, fl := range []struct {
				name, v string
				t       *time.Time
			}{{"--failed-from", from, &failedFrom}, {"--failed-before", before, &failedBefore}} {
				if fl.v == "" {
					continue
				}
				t, err := time.Parse(time.RFC3339, fl.v)
				if err != nil {
					return usageErrorf("%s %s: not an RFC 3339 time such as 2026-01-02T15:04:05Z", fl.name, printable(fl.v))
				}
				*fl.t = t
			}
			if actor == "" {
				actor = defaultActor(rt)
			}
			for _, id := range ids {
				if err := checkFlagText("--id", id); err != nil {
					return err
				}
			}
			filter := postbox.DeadFilter{Topic: topic, IDs: ids, All: all, Limit: limit, Type: typ, Key: key, ErrorContains: errText,
				FailedFrom: failedFrom, FailedBefore: failedBefore, After: after, Newest: newest, Actor: actor}
			if filter.Empty() {
				if action == "retry" || action == "purge" {
					return usageErrorf("dead %s needs a filter: --topic, --type, --key, --error, --failed-from, --failed-before, --id, or --all", action)
				}
				filter.All = true
			}
			db, err := o.openMigrated(ctx, rt, nil)
			if err != nil {
				return err
			}
			defer db.Close()
			// refused names the flag of a refused filter.
			refused := func(err error) error {
				for _, id := range ids {
					if i := strings.Index(err.Error(), strconv.Quote(id)); errors.Is(err, postbox.ErrInvalidConfig) && i >= 0 {
						// The flag and what is wrong with it, not the library's "invalid config: dead-letter filter".
						return usageErrorf("--id %s: %s", printable(id), err.Error()[i:])
					}
				}
				return invalidAsUsage(err)
			}
			switch action {
			case "list":
				recs, err := db.ListDead(ctx, filter)
				if err != nil {
					return refused(err)
				}
				if asJSON {
					out := make([]deadJSON, len(recs))
					for i, r := range recs {
						out[i] = toDeadJSON(r)
					}
					return writeJSON(rt.stdout, out)
				}
				if len(recs) == 0 {
					fmt.Fprintln(rt.stdout, "no dead messages")
					return nil
				}
				tw := tabwriter.NewWriter(rt.stdout, 0, 4, 2, ' ', 0)
				fmt.Fprintln(tw, "ID\tTOPIC\tTYPE\tKEY\tATTEMPTS\tCREATED\tLAST ERROR")
				for _, r := range recs {
					// Every column but the times and counts is text from the database: a broker's error in
					// last_error, or a row written by another program, may hold terminal escapes.
					fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%d\t%s\t%s\n", printable(r.ID), printable(r.Topic), printable(r.Type),
						printable(r.Key), r.Attempts, r.CreatedAt.UTC().Format(time.RFC3339), printable(oneLine(r.LastError, 240)))
				}
				return tw.Flush()
			case "count":
				n, err := db.CountDead(ctx, filter, int64(limit))
				if err != nil {
					return refused(err)
				}
				if asJSON {
					return writeJSON(rt.stdout, map[string]any{"dead": n.N, "more": n.More})
				}
				fmt.Fprintf(rt.stdout, "%s dead message(s)\n", n)
				return nil
			case "retry":
				n, err := db.RetryDead(ctx, filter)
				if err != nil {
					return refused(err)
				}
				return report(rt, asJSON, "retried", n)
			default:
				n, err := db.PurgeDead(ctx, filter)
				if err != nil {
					return refused(err)
				}
				return report(rt, asJSON, "purged", n)
			}
		}
	},
}

func report(rt *runtime, asJSON bool, verb string, n int64) error {
	if asJSON {
		return writeJSON(rt.stdout, map[string]int64{verb: n})
	}
	fmt.Fprintf(rt.stdout, "%s %d dead message(s)\n", verb, n)
	return nil
}

// invalidAsUsage turns a refused filter (a malformed ID) into a usage error.
func invalidAsUsage(err error) error {
	if errors.Is(err, postbox.ErrInvalidConfig) || isInvalid(err) {
		return usageErrorf("%v", err)
	}
	return err
}

func isInvalid(err error) bool { return errors.Is(err, postbox.ErrInvalidMessage) }

func oneLine(s string, n int) string {
	s = strings.Join(strings.Fields(s), " ")
	if len(s) > n {
		s = strings.ToValidUTF8(s[:n], "") + "…"
	}
	return s
}

type deadJSON struct {
	ID            string            `json:"id"`
	Topic         string            `json:"topic"`
	Type          string            `json:"type"`
	Key           string            `json:"key,omitempty"`
	Attempts      int               `json:"attempts"`
	LastError     string            `json:"last_error"`
	CreatedAt     time.Time         `json:"created_at"`
	Headers       map[string]string `json:"headers,omitempty"`
	Payload       json.RawMessage   `json:"payload,omitempty"`
	PayloadBase64 []byte            `json:"payload_base64,omitempty"`
}

func toDeadJSON(r postbox.Record) deadJSON {
	d := deadJSON{ID: r.ID, Topic: r.Topic, Type: r.Type, Key: r.Key, Attempts: r.Attempts, LastError: r.LastError,
		CreatedAt: r.CreatedAt.UTC(), Headers: r.Headers}
	d.Payload, d.PayloadBase64 = jsonOrBytes(r.Payload)
	return d
}

// jsonOrBytes returns a payload as raw JSON when it is JSON, else as bytes to be base64-encoded.
func jsonOrBytes(p []byte) (json.RawMessage, []byte) {
	if len(p) > 0 && utf8.Valid(p) && json.Valid(p) {
		return json.RawMessage(p), nil
	}
	return nil, p
}

// Version is the postbox version, set at build time with -ldflags "-X .../cli.Version=v1.2.3". When empty, the
// module version from the build information is used.
var Version = ""

var versionCommand = &command{
	name:     "version",
	synopsis: "[--json]",
	summary:  "print the version",
	help:     "Prints the postbox version, the commit it was built from when known, and the Go version.",
	examples: []string{"postbox version", "postbox version --json"},
	setup: func(f *flagSet) func(ctx context.Context, rt *runtime, args []string) error {
		var asJSON bool
		f.Bool(&asJSON, "json", "", "print JSON")
		return func(ctx context.Context, rt *runtime, args []string) error {
			v := versionInfo()
			if asJSON {
				return writeJSON(rt.stdout, v)
			}
			fmt.Fprintf(rt.stdout, "postbox %s", v.Version)
			if v.Commit != "" {
				fmt.Fprintf(rt.stdout, " (%s)", v.Commit)
			}
			fmt.Fprintf(rt.stdout, " %s\n", v.Go)
			return nil
		}
	},
}

type version struct {
	Version string `json:"version"`
	Commit  string `json:"commit,omitempty"`
	Go      string `json:"go"`
}

func versionInfo() version {
	v := version{Version: Version}
	info, ok := debug.ReadBuildInfo()
	if !ok {
		return v
	}
	v.Go = info.GoVersion
	if v.Version == "" {
		v.Version = info.Main.Version
	}
	if v.Version == "" || v.Version == "(devel)" {
		v.Version = "devel"
	}
	for _, s := range info.Settings {
		if s.Key == "vcs.revision" {
			v.Commit = s.Value
		}
	}
	return v
}

// defaultActor is who an operation is logged as when --actor is not given: $USER, $LOGNAME, the account the
// process runs as, so that an operations log never says actor="".
func defaultActor(rt *runtime) string {
	for _, name := range []string{"USER", "LOGNAME"} {
		if v := rt.env(name); v != "" {
			return v
		}
	}
	if u, err := user.Current(); err == nil && u.Username != "" {
		return u.Username
	}
	return "unknown (give --actor)"
}

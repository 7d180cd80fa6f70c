package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/postbox-go/postbox"
)

var migrateCommand = &command{
	name:     "migrate",
	synopsis: "up|status|sql --db URL [--partitioned] [--ordered] [--sql-api] [flags]",
	summary:  "create or upgrade the outbox and inbox tables, show their state, or print their SQL",
	help: `
'migrate up' applies the migrations not yet applied, under a lock, so running it from several processes at once
is safe. 'migrate status' lists every migration and whether it is applied. 'migrate sql' prints the DDL for your
own migration tool (golang-migrate, goose, atlas) without connecting: --dialect, or the --db URL, only chooses
the SQL dialect.

--partitioned creates the outbox partitioned by creation time and the inbox by the time in its message IDs
(PostgreSQL and MySQL), for high volumes: 'postbox partitions' then creates partitions ahead and drops old ones.
It shapes only tables migrate has yet to create; an existing table stays as it is.

--ordered adds the index that ordered relays (relay --ordered) need to find each key's next message; it applies
to existing tables too.

--sql-api installs the SQL enqueue API (PostgreSQL functions, a MySQL/MariaDB procedure) for producers in any
language: see docs/SCHEMA.md. It applies to existing tables too; SQLite has none (use the documented INSERT).`,
	examples: []string{
		"postbox migrate up --db postgres://postbox@localhost/app",
		"postbox migrate up --db mysql://postbox:secret@localhost:3306/app --partitioned",
		"postbox migrate status --db sqlite:app.db",
		"postbox migrate sql --db postgres://localhost/app --schema events > 0001_postbox.sql",
		"postbox migrate sql --dialect mysql --ordered",
		"postbox migrate up --db postgres://postbox@localhost/app --sql-api",
	},
	setup: func(f *flagSet) func(ctx context.Context, rt *runtime, args []string) error {
		var o dbOptions
		addDBFlags(f, &o)
		f.Bool(&o.partitioned, "partitioned", "", "create the outbox and inbox partitioned by time (PostgreSQL, MySQL); see postbox partitions")
		f.Bool(&o.ordered, "ordered", "", "add the index ordered relays need (relay --ordered)")
		f.Bool(&o.sqlAPI, "sql-api", "", "install the SQL enqueue API for producers in other languages (PostgreSQL, MySQL); see docs/SCHEMA.md")
		var dialect string
		f.String(&dialect, "dialect", "", "", "NAME", "migrate sql only, instead of --db: postgres, mysql or sqlite")
		return func(ctx context.Context, rt *runtime, args []string) error {
			if len(args) != 1 {
				return usageErrorf("say what to do: migrate up, migrate status or migrate sql")
			}
			if dialect != "" {
				if args[0] != "sql" {
					return usageErrorf("--dialect is for migrate sql; migrate %s needs --db", args[0])
				}
				u, ok := offlineURLs[dialect]
				switch {
				case !ok:
					return usageErrorf("--dialect %q: use postgres, mysql or sqlite", dialect)
				case o.url != "" && dbScheme(o.url) != dialect:
					return usageErrorf("--dialect %s and --db %s disagree; give one of them", dialect, RedactURL(o.url))
				}
				o.url = u
			}
			if o.url == "" && args[0] == "sql" {
				return usageErrorf("migrate sql needs --dialect postgres, mysql or sqlite (or a --db URL, never connected to)")
			}
			migrateOne := func(o dbOptions) error {
				if o.sqlAPI && dbScheme(o.url) == "sqlite" {
					return usageErrorf("--sql-api: SQLite has no stored routines; producers insert rows as docs/SCHEMA.md says")
				}
				if o.partitioned && dbScheme(o.url) == "sqlite" {
					return usageErrorf("--partitioned: SQLite has no table partitioning; leave it off and keep the table small with postbox cleanup")
				}
				if args[0] == "status" {
					if err := o.sqliteMissing(); err != nil { // only migrate up creates the file
						return err
					}
				}
				db, err := o.open(ctx, rt, nil)
				if err != nil {
					return err
				}
				defer db.Close()
				switch args[0] {
				case "up":
					applied, err := db.Migrate(ctx)
					if err != nil {
						return err
					}
					if len(applied) == 0 {
						fmt.Fprintln(rt.stdout, "up to date: no migration to apply")
						return nil
					}
					for _, v := range applied {
						fmt.Fprintf(rt.stdout, "applied migration %04d\n", v)
					}
					return nil
				case "status":
					states, err := db.MigrationStatus(ctx)
					if err != nil {
						return err
					}
					tw := tabwriter.NewWriter(rt.stdout, 0, 4, 2, ' ', 0)
					fmt.Fprintln(tw, "VERSION\tNAME\tAPPLIED")
					pending, next := 0, 1
					for _, s := range states {
						for ; next < s.Version; next++ { // a migration these tables do not use: say so, not nothing
							fmt.Fprintf(tw, "%04d\t%s\t%s\n", next, "-", "not used without --ordered (migrate up --ordered adds it)")
						}
						next = s.Version + 1
						applied := "no"
						if s.Applied {
							applied = s.AppliedAt.UTC().Format(time.RFC3339)
						} else {
							pending++
						}
						fmt.Fprintf(tw, "%04d\t%s\t%s\n", s.Version, printable(s.Name), applied)
					}
					tw.Flush()
					if pending > 0 {
						fmt.Fprintf(rt.stdout, "%d migration(s) to apply: run %s\n", pending, o.migrateCommand())
					}
					return nil
				case "sql":
					for _, m := range db.Migrations() {
						fmt.Fprintf(rt.stdout, "-- postbox migration %04d: %s (%s)\n%s\n", m.Version, m.Name, db.Dialect(), strings.TrimSpace(m.SQL))
					}
					return nil
				default:
					return usageErrorf("unknown migrate action %q: use up, status or sql", args[0])
				}
			}
			if o.url == "" && args[0] != "sql" && rt.file != nil && rt.file.sources != nil {
				// The config file's sources, as the relay serves them: each database migrated, or shown, in turn.
				specs, err := sourceSpecs(o, nil, 0, rt.file)
				if err != nil {
					return err
				}
				for _, s := range specs {
					fmt.Fprintf(rt.stdout, "== source %s\n", s.Name)
					if err := migrateOne(s.options(o)); err != nil {
						return fmt.Errorf("source %s: %w", s.Name, err)
					}
				}
				return nil
			}
			return migrateOne(o)
		}
	},
}

var sendCommand = &command{
	name:     "send",
	synopsis: "--db URL --topic T --type X [--key K] [--data JSON | --data @file | --data @-] [flags]",
	summary:  "enqueue one message, for operators and scripts",
	help: `
Enqueues one message in a transaction of its own and prints its ID. The payload must be JSON, which brokers and
consumers receive as such; --raw sends the bytes of --data as they are instead (published base64-encoded where the
wire format needs text). When the config file has an events registry, the message must meet it: a known type, on
its topic, with a key if required, and a valid payload.`,
	examples: []string{
		`postbox send --db sqlite:app.db --topic orders --type order.created --key o-42 --data '{"id":"o-42"}'`,
		`postbox send --db postgres://localhost/app -t orders --type order.created -d @order.json -H source=backfill`,
		`postbox send --db sqlite:app.db -t reminders --type reminder.due --delay 15m --data '{}'`,
		`postbox send --db sqlite:app.db -t images --type image.uploaded --raw --data @photo.jpg`,
	},
	setup: func(f *flagSet) func(ctx context.Context, rt *runtime, args []string) error {
		var o dbOptions
		var topic, typ, key, data, id string
		var headers []string
		var delay time.Duration
		var asJSON, raw bool
		addDBFlags(f, &o)
		f.String(&topic, "topic", "t", "", "TOPIC", "topic to publish on (required)")
		f.String(&typ, "type", "", "", "TYPE", "event type, such as order.created (required)")
		f.String(&key, "key", "k", "", "KEY", "key: the partition or ordering key, such as the aggregate ID")
		f.String(&data, "data", "d", "", "JSON|@FILE", "payload, @path to read it from a file, or @- to read standard input")
		f.List(&headers, "header", "H", "NAME=VALUE", "header to carry to the broker")
		f.String(&id, "id", "", "", "UUID", "message ID (default: a new UUIDv7)")
		f.Duration(&delay, "delay", 0, "publish no earlier than this long from now")
		f.Bool(&raw, "raw", "", "send --data as raw bytes instead of checking that it is JSON")
		f.Bool(&asJSON, "json", "", "print the result as JSON")
		return func(ctx context.Context, rt *runtime, args []string) error {
			if len(args) > 0 {
				return usageErrorf("unexpected argument %q; the payload goes in --data", args[0])
			}
			if topic == "" || typ == "" {
				return usageErrorf("--topic and --type are required")
			}
			payload, err := readData(data)
			if err != nil {
				return usageErrorf("%v", err)
			}
			if len(payload) > 0 && !raw && !json.Valid(payload) {
				return usageErrorf("--data %s is not valid JSON (%v); fix it, or add --raw to send the bytes as they are",
					shortValue(data), jsonError(payload))
			}
			m := postbox.Message{ID: id, Topic: topic, Type: typ, Key: key, Payload: payload}
			for _, h := range headers {
				name, value, ok := strings.Cut(h, "=")
				if !ok {
					return usageErrorf("--header %q: write NAME=VALUE", h)
				}
				if m.Headers == nil {
					m.Headers = map[string]string{}
				}
				m.Headers[name] = value
			}
			if delay < 0 {
				return usageErrorf("--delay %v is negative", delay)
			}
			if delay > 0 {
				m.AvailableAt = time.Now().Add(delay)
			}
			reg, err := rt.file.registry()
			if err != nil {
				return err
			}
			db, err := o.openMigrated(ctx, rt, reg)
			if err != nil {
				return err
			}
			defer db.Close()
			sent, err := db.Send(ctx, m)
			if err != nil {
				if isInvalid(err) {
					return usageErrorf("%v", err)
				}
				return err
			}
			if asJSON {
				return writeJSON(rt.stdout, map[string]string{"id": sent})
			}
			fmt.Fprintln(rt.stdout, sent)
			return nil
		}
	},
}

var statusCommand = &command{
	name:     "status",
	synopsis: "--db URL [--json]",
	summary:  "show pending and dead messages, the oldest pending age, per topic",
	help: `
Counts pending and dead messages in total and per topic, and shows how long the oldest ready message has
waited since it was due: a growing age means no relay is keeping up, or publishes keep failing. Pending splits
into ready (due, or waiting to retry a failed publish) and scheduled (sent with a later time, such as send
--delay, and not due yet); scheduled messages are not late and never age the oldest pending figure.

It also lists the relays that record a heartbeat in the table set (every 10s, and at once when a destination
changes state): each one running, stalled or gone (three heartbeats missed), and each of its destinations that is
down or slow, since when, with its topics and how many messages wait for it.

With a config file that lists sources (see relay --help) and no --db, it shows one line per source; with
--json, {"sources": [{"source": NAME, ...}]}, a source that cannot be read carrying its error.`,
	examples: []string{
		"postbox status --db postgres://postbox@localhost/app",
		"postbox status --db sqlite:app.db --json | jq .oldest_pending_age_seconds",
	},
	setup: func(f *flagSet) func(ctx context.Context, rt *runtime, args []string) error {
		var o dbOptions
		var asJSON bool
		addDBFlags(f, &o)
		f.Bool(&asJSON, "json", "", "print one JSON object")
		return func(ctx context.Context, rt *runtime, args []string) error {
			if len(args) > 0 {
				return usageErrorf("unexpected argument %q", args[0])
			}
			if rt.file != nil && rt.file.sources != nil && o.url == "" {
				specs, err := sourceSpecs(o, nil, 0, rt.file)
				if err != nil {
					return err
				}
				return runStatusSources(ctx, rt, o, specs, asJSON)
			}
			db, err := o.openMigrated(ctx, rt, nil)
			if err != nil {
				return err
			}
			defer db.Close()
			s, err := db.Stats(ctx)
			if err != nil {
				return err
			}
			now := time.Now()
			relays := relaysStatus(ctx, rt, db, now)
			if asJSON {
				out := statusJSON(s, now)
				out.Relays = relays
				if st, ok := walSlot(ctx, o); ok {
					out.WAL = &walSlotStatus{Slot: st.Slot, Active: st.Active, ConfirmedLSN: st.ConfirmedLSN,
						RetainedBytes: st.RetainedBytes, LagBytes: st.LagBytes}
				}
				return writeJSON(rt.stdout, out)
			}
			fmt.Fprintf(rt.stdout, "pending: %d (ready %d, scheduled %d)\ndead:    %d\noldest pending: %s\n",
				s.Pending, s.Ready, s.Scheduled, s.Dead, age(s.OldestPending, now))
			walStatusLine(ctx, rt, o)
			printRelays(rt.stdout, relays)
			if len(s.Topics) == 0 {
				return nil
			}
			tw := tabwriter.NewWriter(rt.stdout, 0, 4, 2, ' ', 0)
			fmt.Fprintln(tw, "\nTOPIC\tPENDING\tREADY\tSCHEDULED\tDEAD\tOLDEST PENDING")
			for _, t := range s.Topics {
				fmt.Fprintf(tw, "%s\t%d\t%d\t%d\t%d\t%s\n", printable(t.Topic), t.Pending, t.Ready, t.Scheduled, t.Dead,
					age(t.OldestPending, now))
			}
			return tw.Flush()
		}
	},
}

// shortValue is a flag's value for an error message: quoted, and cut when long.
func shortValue(v string) string {
	if r := []rune(v); len(r) > 40 {
		v = string(r[:40]) + "…"
	}
	return strconv.Quote(v)
}

// jsonError says where b stops being JSON.
func jsonError(b []byte) error {
	var v any
	return json.Unmarshal(b, &v)
}

// offlineURLs stand for a database of each dialect when migrate sql is given --dialect: opening one does no I/O.
var offlineURLs = map[string]string{
	"postgres": "postgres://localhost/postbox",
	"mysql":    "mysql://localhost:3306/postbox",
	"sqlite":   "sqlite:postbox.db",
}

// age is how long ago t was, for people; "-" for the zero time.
func age(t, now time.Time) string {
	if t.IsZero() {
		return "-"
	}
	return now.Sub(t).Round(time.Millisecond).String()
}

func ageSeconds(t, now time.Time) float64 {
	if t.IsZero() {
		return 0
	}
	return now.Sub(t).Seconds()
}

type topicStatus struct {
	Topic                   string  `json:"topic"`
	Pending                 int64   `json:"pending"`
	Ready                   int64   `json:"ready"`
	Scheduled               int64   `json:"scheduled"`
	Dead                    int64   `json:"dead"`
	OldestPendingAgeSeconds float64 `json:"oldest_pending_age_seconds"`
}

type status struct {
	Pending                 int64         `json:"pending"`
	Ready                   int64         `json:"ready"`
	Scheduled               int64         `json:"scheduled"`
	Dead                    int64         `json:"dead"`
	OldestPending           *time.Time    `json:"oldest_pending,omitempty"`
	OldestPendingAgeSeconds float64       `json:"oldest_pending_age_seconds"`
	Topics                  []topicStatus `json:"topics"`
	// Relays are the relays' heartbeats (see relaysStatus); absent when the table set has none to read.
	Relays []relayStatus `json:"relays,omitempty"`
	// WAL is the WAL relay's replication slot, when the database is PostgreSQL and the slot exists.
	WAL *walSlotStatus `json:"wal,omitempty"`
}

func statusJSON(s postbox.Stats, now time.Time) status {
	out := status{Pending: s.Pending, Ready: s.Ready, Scheduled: s.Scheduled, Dead: s.Dead, OldestPendingAgeSeconds: ageSeconds(s.OldestPending, now),
		Topics: []topicStatus{}}
	if !s.OldestPending.IsZero() {
		t := s.OldestPending.UTC()
		out.OldestPending = &t
	}
	for _, t := range s.Topics {
		out.Topics = append(out.Topics, topicStatus{Topic: t.Topic, Pending: t.Pending, Ready: t.Ready, Scheduled: t.Scheduled, Dead: t.Dead,
			OldestPendingAgeSeconds: ageSeconds(t.OldestPending, now)})
	}
	return out
}

// writeJSON writes v as one line of JSON, with the characters a terminal may act on escaped.
func writeJSON(w io.Writer, v any) error {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return err
	}
	_, err := w.Write(escapeJSON(b.Bytes()))
	return err
}

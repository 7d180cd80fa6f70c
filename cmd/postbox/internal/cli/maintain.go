package cli

import (
	"context"
	"errors"
	"fmt"
	"regexp"
	"strings"
	"time"

	"github.com/postbox-go/postbox"
	"github.com/postbox-go/postbox/partition"
)

var cleanupCommand = &command{
	name:     "cleanup",
	synopsis: "--db URL [--retention D] [--dead-retention D] [--inbox-retention D] [--batch N] [--once | --interval D]",
	summary:  "delete published messages, and optionally dead ones and inbox claims, past their retention",
	help: `
Deletes published messages older than --retention (relays keep them with --keep-published), and, when
--dead-retention is set, dead messages whose last failure is older than that, in batches of at most --batch rows,
each batch its own short transaction. A pending message is never deleted. --inbox-retention also deletes inbox
claims received longer ago than that; keep them longer than your broker can redeliver a message.

Only one cleaner works on a table at a time (an advisory lock on PostgreSQL, GET_LOCK on MySQL): another one
skips its turn, so running it from every replica is safe.

With --once it cleans once, prints what it deleted and exits: run it from cron. Otherwise it cleans at once and
then every --interval until SIGINT or SIGTERM. A first run that fails (a wrong URL, a missing table) ends the
command with exit 1; later failures are logged and retried at the next interval.

A config file's keys are shared by every command with that flag: retention there is also what a relay with
--keep-published keeps published messages for, and interval also sets postbox partitions' interval.`,
	examples: []string{
		"postbox cleanup --db postgres://postbox@localhost/app --once",
		"postbox cleanup --db mysql://postbox:secret@localhost:3306/app --retention 72h --dead-retention 720h",
		"postbox cleanup --db sqlite:app.db --inbox-retention 336h --interval 5m",
		"POSTBOX_DB=postgres://localhost/app postbox cleanup --once --json",
	},
	setup: func(f *flagSet) func(ctx context.Context, rt *runtime, args []string) error {
		var o dbOptions
		var cfg postbox.CleanupConfig
		var sched schedule
		addDBFlags(f, &o)
		f.Duration(&cfg.Retention, "retention", postbox.DefaultRetention, "delete published messages published longer ago than this")
		f.Duration(&cfg.DeadRetention, "dead-retention", 0, "also delete dead messages whose last failure is older than this (0: keep them)")
		f.Duration(&cfg.InboxRetention, "inbox-retention", 0, "also delete inbox claims older than this (0: leave the inbox alone)")
		f.Int(&cfg.BatchSize, "batch", postbox.DefaultCleanupBatch, "most rows one delete removes")
		sched.flags(f, postbox.DefaultCleanupInterval)
		return func(ctx context.Context, rt *runtime, args []string) error {
			if len(args) > 0 {
				return usageErrorf("unexpected argument %q", args[0])
			}
			switch {
			case cfg.Retention <= 0:
				return usageErrorf("--retention %v: use a positive duration, such as 168h", cfg.Retention)
			case cfg.DeadRetention < 0 || cfg.InboxRetention < 0:
				return usageErrorf("--dead-retention and --inbox-retention must not be negative (0 turns them off)")
			case cfg.BatchSize <= 0:
				return usageErrorf("--batch %d: use a positive number of rows", cfg.BatchSize)
			}
			if err := sched.validate(); err != nil {
				return err
			}
			db, err := o.openMigrated(ctx, rt, nil)
			if err != nil {
				return err
			}
			defer db.Close()
			cfg.Logger = rt.log
			inbox := cfg.InboxRetention > 0 // without the flag the inbox is left alone
			cfg.KeepInbox = !inbox
			cl, err := db.NewCleaner(&cfg)
			if err != nil {
				return usageErrorf("%v", err)
			}
			once := func(ctx context.Context) (cleanupReport, error) {
				var rep cleanupReport
				res, err := cl.RunOnce(ctx)
				switch {
				case errors.Is(err, postbox.ErrLocked):
					// One lock covers the outbox and the inbox of a table set.
					rep.Skipped, rep.InboxSkipped = true, inbox
				case err != nil:
					return rep, err
				}
				rep.Published, rep.Dead, rep.Batches = res.Published, res.Dead, res.Batches
				if inbox && !rep.InboxSkipped {
					rep.Inbox = &res.Inbox
				}
				return rep, nil
			}
			if sched.once {
				return printOnce(ctx, rt, &sched, once)
			}
			rt.log.Info("cleanup started", "db", RedactURL(o.url), "table", o.table, "interval", sched.interval,
				"retention", cfg.Retention, "dead_retention", cfg.DeadRetention, "inbox_retention", cfg.InboxRetention)
			return sched.run(ctx, rt, "cleanup", func(ctx context.Context) error {
				rep, err := once(ctx)
				if err == nil && rep.Published+rep.Dead+rep.inbox() > 0 {
					rt.log.Info("cleaned up", "published", rep.Published, "dead", rep.Dead, "inbox", rep.inbox(), "batches", rep.Batches)
				}
				if rep.Skipped || rep.InboxSkipped {
					rt.log.Debug("another instance is cleaning; skipped its share", "outbox", rep.Skipped, "inbox", rep.InboxSkipped)
				}
				return err
			})
		}
	},
}

// cleanupReport is what one cleanup run did, as --once prints it.
type cleanupReport struct {
	Published    int64  `json:"published"`
	Dead         int64  `json:"dead"`
	Batches      int    `json:"batches"`
	Inbox        *int64 `json:"inbox,omitempty"` // nil without --inbox-retention
	Skipped      bool   `json:"skipped"`         // another instance held the outbox's cleanup lock
	InboxSkipped bool   `json:"inbox_skipped,omitempty"`
}

func (r cleanupReport) inbox() int64 {
	if r.Inbox == nil {
		return 0
	}
	return *r.Inbox
}

func (r cleanupReport) String() string {
	var b strings.Builder
	if r.Skipped {
		b.WriteString("outbox skipped: another instance is cleaning it")
	} else {
		fmt.Fprintf(&b, "deleted %d published and %d dead message(s) in %d batch(es)", r.Published, r.Dead, r.Batches)
	}
	switch {
	case r.InboxSkipped:
		b.WriteString("\ninbox skipped: another instance is cleaning it")
	case r.Inbox != nil:
		fmt.Fprintf(&b, "\ndeleted %d inbox row(s)", *r.Inbox)
	}
	return b.String()
}

var partitionsCommand = &command{
	name:     "partitions",
	synopsis: "--db URL [--period P] [--lookahead N] [--retention D] [--inbox-retention D] [--drop-dead] [--once | --interval D]",
	summary:  "create partitions ahead and drop old ones, for tables made with migrate up --partitioned",
	help: `
Maintains the time partitions of a partitioned outbox and inbox (PostgreSQL and MySQL; create them with 'postbox
migrate up --partitioned'): creates the partitions up to --lookahead periods after the current one, and drops each
outbox partition whose whole range is older than --retention. Dropping a partition removes its rows without a
DELETE. A partition that still holds a pending message is kept, and so is one holding a dead message unless
--drop-dead is set. Inbox claims are placed by the time in their message's ID, and an inbox partition is dropped
once its whole range is older than --inbox-retention, which must exceed the longest time from a message's creation
to its last redelivery.

Every DDL statement is logged before it runs. Creating and dropping partitions takes a brief exclusive lock on
the table; --lock-timeout bounds the wait for it, and a run that gives up tries again at the next interval. Only
one maintainer works on a table at a time; another one skips its turn.

With --once it maintains once, prints what it created and dropped and exits: run it from cron, at least once a
period. Otherwise it maintains at once and then every --interval until SIGINT or SIGTERM. A first run that fails
(a wrong URL, a table that is not partitioned) ends the command with exit 1; later failures are logged and
retried at the next interval.`,
	examples: []string{
		"postbox migrate up --db postgres://postbox@localhost/app --partitioned",
		"postbox partitions --db postgres://postbox@localhost/app --once",
		"postbox partitions --db mysql://postbox:secret@localhost:3306/app --period hourly --lookahead 6 --retention 48h",
		"postbox partitions --db postgres://localhost/app --retention 720h --drop-dead --interval 30m",
	},
	setup: func(f *flagSet) func(ctx context.Context, rt *runtime, args []string) error {
		var o dbOptions
		var cfg partition.Config
		var period string
		var sched schedule
		addDBFlags(f, &o)
		f.String(&period, "period", "", partition.Daily.String(), "PERIOD", "time span of one partition: hourly, daily or monthly")
		f.Int(&cfg.Lookahead, "lookahead", partition.DefaultLookahead, "periods after the current one whose partitions are made ahead")
		f.Duration(&cfg.Retention, "retention", partition.DefaultRetention, "drop a partition once its whole range is older than this")
		f.Duration(&cfg.InboxRetention, "inbox-retention", partition.DefaultInboxRetention,
			"drop an inbox partition once its whole range of message creation times is older than this")
		f.Bool(&cfg.DropDead, "drop-dead", "", "drop partitions past retention even when they hold dead messages")
		f.Duration(&cfg.LockTimeout, "lock-timeout", partition.DefaultLockTimeout, "longest wait for the table lock a DDL statement needs")
		sched.flags(f, partition.DefaultInterval)
		return func(ctx context.Context, rt *runtime, args []string) error {
			if len(args) > 0 {
				return usageErrorf("unexpected argument %q", args[0])
			}
			p, ok := parsePeriod(period)
			if !ok {
				return usageErrorf("--period %q: use hourly, daily or monthly", period)
			}
			cfg.Period = p
			switch {
			case cfg.Lookahead < 1:
				return usageErrorf("--lookahead %d: use 1 or more periods, so that the next period's partition is ready before it begins", cfg.Lookahead)
			case cfg.Retention <= 0:
				return usageErrorf("--retention %v: use a positive duration, such as 168h", cfg.Retention)
			case cfg.InboxRetention <= 0:
				return usageErrorf("--inbox-retention %v: use a positive duration, such as 168h", cfg.InboxRetention)
			case cfg.LockTimeout <= 0:
				return usageErrorf("--lock-timeout %v: use a positive duration, such as 5s", cfg.LockTimeout)
			}
			if err := sched.validate(); err != nil {
				return err
			}
			if dbScheme(o.url) == "sqlite" {
				return usageErrorf("--db %s: SQLite has no table partitioning; keep its outbox small with postbox cleanup", o.url)
			}
			db, err := o.openMigrated(ctx, rt, nil)
			if err != nil {
				return err
			}
			defer db.Close()
			cfg.Logger = rt.log
			m, err := db.NewMaintainer(&cfg)
			if err != nil {
				return usageErrorf("%v", err)
			}
			once := func(ctx context.Context) (partitionReport, error) {
				res, err := m.RunOnce(ctx)
				switch {
				case errors.Is(err, postbox.ErrLocked):
					return partitionReport{Created: []string{}, Dropped: []string{}, Kept: []string{},
						InboxCreated: []string{}, InboxDropped: []string{}, Skipped: true}, nil
				case errors.Is(err, partition.ErrNotPartitioned):
					// In the CLI's words: the library's error speaks of Config.Partitioned and postbox.Cleaner.
					table := o.table
					if m := notPartitionedTable.FindStringSubmatch(err.Error()); m != nil {
						table = m[1]
					}
					return partitionReport{}, fmt.Errorf("table %s was created without --partitioned, so it has no partitions to "+
						"maintain: keep it small with postbox cleanup, or give a new table partitions with postbox migrate up "+
						"--partitioned", table)
				case err != nil:
					return partitionReport{}, err
				}
				return partitionReport{Created: nonNil(res.Created), Dropped: nonNil(res.Dropped), Kept: nonNil(res.Kept),
					InboxCreated: nonNil(res.InboxCreated), InboxDropped: nonNil(res.InboxDropped)}, nil
			}
			if sched.once {
				return printOnce(ctx, rt, &sched, once)
			}
			rt.log.Info("partition maintenance started", "db", RedactURL(o.url), "table", o.table, "interval", sched.interval,
				"period", cfg.Period.String(), "lookahead", cfg.Lookahead, "retention", cfg.Retention, "inbox_retention", cfg.InboxRetention)
			return sched.run(ctx, rt, "partition maintenance", func(ctx context.Context) error {
				rep, err := once(ctx)
				if len(rep.Created)+len(rep.Dropped)+len(rep.InboxCreated)+len(rep.InboxDropped) > 0 {
					rt.log.Info("partitions maintained", "created", rep.Created, "dropped", rep.Dropped,
						"inbox_created", rep.InboxCreated, "inbox_dropped", rep.InboxDropped)
				}
				if rep.Skipped {
					rt.log.Debug("another maintainer is at work; skipped this run")
				}
				return err
			})
		}
	},
}

// notPartitionedTable finds the table in partition.ErrNotPartitioned's message.
var notPartitionedTable = regexp.MustCompile(`(\S+) was created without Config\.Partitioned`)

func parsePeriod(s string) (partition.Period, bool) {
	for _, p := range []partition.Period{partition.Hourly, partition.Daily, partition.Monthly} {
		if strings.EqualFold(s, p.String()) {
			return p, true
		}
	}
	return 0, false
}

func nonNil(s []string) []string {
	if s == nil {
		return []string{}
	}
	return s
}

// partitionReport is what one maintenance run did, as --once prints it.
type partitionReport struct {
	Created []string `json:"created"`
	Dropped []string `json:"dropped"`
	Kept    []string `json:"kept"`    // past retention, but holding pending or dead messages
	Skipped bool     `json:"skipped"` // another maintainer was at work
	// The inbox's partitions; both empty when the inbox is not partitioned.
	InboxCreated []string `json:"inbox_created"`
	InboxDropped []string `json:"inbox_dropped"`
}

func (r partitionReport) String() string {
	if r.Skipped {
		return "skipped: another maintainer is at work on this table"
	}
	list := func(s []string) string {
		if len(s) == 0 {
			return "none"
		}
		return printable(strings.Join(s, " ")) // partition names are read from the catalog
	}
	out := fmt.Sprintf("created: %s\ndropped: %s\ninbox created: %s\ninbox dropped: %s",
		list(r.Created), list(r.Dropped), list(r.InboxCreated), list(r.InboxDropped))
	if len(r.Kept) > 0 {
		out += "\nkept past retention (they hold pending or dead messages): " + list(r.Kept)
	}
	return out
}

// schedule is the --once, --interval and --json options of a maintenance command.
type schedule struct {
	once, json bool
	interval   time.Duration
}

func (s *schedule) flags(f *flagSet, def time.Duration) {
	f.Bool(&s.once, "once", "", "run once, print the result and exit, instead of running every --interval")
	f.Duration(&s.interval, "interval", def, "time between runs, until SIGINT or SIGTERM (ignored with --once)")
	f.Bool(&s.json, "json", "", "with --once, print the result as JSON")
}

func (s *schedule) validate() error {
	switch {
	case s.json && !s.once:
		return usageErrorf("--json prints the result of --once; add --once, or leave --json off to run every --interval")
	case !s.once && s.interval <= 0:
		return usageErrorf("--interval %v: use a positive duration, such as 10m, or --once", s.interval)
	}
	return nil
}

// printOnce runs once a single time for --once and prints its report, as JSON with --json.
func printOnce[R fmt.Stringer](ctx context.Context, rt *runtime, s *schedule, once func(context.Context) (R, error)) error {
	rep, err := once(ctx)
	if err != nil {
		return err
	}
	if s.json {
		return writeJSON(rt.stdout, rep)
	}
	fmt.Fprintln(rt.stdout, rep.String())
	return nil
}

// run calls fn at once and then every interval until ctx is done, and returns nil then. The first call's error
// is returned, so that a wrong URL or table ends the command; later errors are logged and retried.
func (s *schedule) run(ctx context.Context, rt *runtime, what string, fn func(ctx context.Context) error) error {
	if err := fn(ctx); err != nil {
		if ctx.Err() != nil {
			return nil
		}
		return err
	}
	t := time.NewTicker(s.interval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			rt.log.Info(what + " stopped")
			return nil
		case <-t.C:
		}
		if err := fn(ctx); err != nil && ctx.Err() == nil {
			rt.log.Error(what+" failed; trying again at the next interval", "err", err)
		}
	}
}

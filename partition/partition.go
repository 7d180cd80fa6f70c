// Package partition maintains the time partitions of a partitioned outbox and inbox (postbox.Config.Partitioned)
// on PostgreSQL and MySQL: it creates partitions ahead of time and drops those past retention, which removes old
// rows without a single DELETE, so a high-volume table neither bloats nor fragments.
//
//	client, err := postbox.NewClient(drv, &postbox.Config{Partitioned: true})
//	_, err = client.Migrate(ctx)
//	m, err := partition.New(client, &partition.Config{Period: partition.Daily, Retention: 7 * 24 * time.Hour})
//	go m.Run(ctx)           // or m.RunOnce(ctx) from a cron job
//
// Outbox rows are placed by their creation time, inbox claims by the time in their message's UUIDv7 ID. A tail
// partition (pmax on MySQL, DEFAULT on PostgreSQL) takes rows that no named partition covers, so an enqueue or a
// claim never fails when the maintainer falls behind; its next run moves them into their partitions. An outbox
// partition is never dropped while it holds a pending message, nor a dead one unless Config.DropDead is set. Any
// number of maintainers may run: a named lock lets one act at a time.
//
// Every DDL statement is logged at Info before it runs. Creating and dropping partitions takes a brief exclusive
// lock on the table, which waits for open claims to settle; Config.LockTimeout bounds that wait so producers never
// queue behind it for long, and a run that gives up tries again at the next interval.
package partition

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sort"
	"time"

	"github.com/postbox-go/postbox"
	"github.com/postbox-go/postbox/driver"
)

// Defaults for Config.
const (
	DefaultLookahead = 3
	DefaultRetention = postbox.DefaultRetention
	// DefaultInboxRetention is the inbox cleanup's default retention, 7 days.
	DefaultInboxRetention = postbox.DefaultInboxRetention
	DefaultInterval       = time.Hour
	DefaultLockTimeout    = 5 * time.Second
	// MaxCreate is the most partitions one run creates. A run that would need more (a maintainer started long
	// after the table filled, with a short period) returns an error instead of locking the table for long.
	MaxCreate = 1000
)

// ErrNotPartitioned is returned for a table created without postbox.Config.Partitioned.
var ErrNotPartitioned = errors.New("postbox: table is not partitioned")

// Config configures a Maintainer. The zero value is valid: every field has a default.
type Config struct {
	// Period is the time span of one partition. Default: Daily.
	Period Period
	// Lookahead is how many periods after the current one have their partition ready. Default:
	// DefaultLookahead (3).
	Lookahead int
	// Retention is how long rows are kept after their creation: a partition is dropped once its whole range is
	// older than Retention, unless it still holds a pending message (or a dead one, see DropDead). Default:
	// DefaultRetention (7 days).
	Retention time.Duration
	// InboxRetention is how long inbox claims are kept, counted from their message's creation (the time in its
	// UUIDv7 ID), which is never later than its delivery: an inbox partition is dropped once its whole range is
	// older than InboxRetention. It must exceed the longest time from a message's creation to its last possible
	// redelivery, or a late redelivery is processed again. Claims of IDs that are not UUIDv7 are left to
	// a postbox.Cleaner. Default: DefaultInboxRetention (7 days).
	InboxRetention time.Duration
	// DropDead lets a partition past retention be dropped with its dead messages. Default: false, so dead
	// messages keep their partition until an operator retries or purges them.
	DropDead bool
	// Interval is how often Run maintains. Default: DefaultInterval (1h).
	Interval time.Duration
	// LockTimeout bounds how long one DDL statement waits for the table lock. Default: DefaultLockTimeout (5s).
	LockTimeout time.Duration
	// Logger receives the maintainer's logs, each DDL statement at Info. Default: the client's logger.
	Logger *slog.Logger
}

// WithDefaults returns a copy of c with every zero field set to its default. A nil c gives the defaults.
func (c *Config) WithDefaults() Config {
	var out Config
	if c != nil {
		out = *c
	}
	if out.Lookahead == 0 {
		out.Lookahead = DefaultLookahead
	}
	if out.Retention == 0 {
		out.Retention = DefaultRetention
	}
	if out.InboxRetention == 0 {
		out.InboxRetention = DefaultInboxRetention
	}
	if out.Interval == 0 {
		out.Interval = DefaultInterval
	}
	if out.LockTimeout == 0 {
		out.LockTimeout = DefaultLockTimeout
	}
	return out
}

func (c Config) validate() error {
	if !c.Period.valid() {
		return fmt.Errorf("%w: partition Period %d is unknown; use partition.Daily, Hourly or Monthly", postbox.ErrInvalidConfig, int(c.Period))
	}
	for _, f := range []struct {
		name string
		v    int64
	}{{"Lookahead", int64(c.Lookahead)}, {"Retention", int64(c.Retention)},
		{"InboxRetention", int64(c.InboxRetention)}, {"Interval", int64(c.Interval)}, {"LockTimeout", int64(c.LockTimeout)}} {
		if f.v < 0 {
			return fmt.Errorf("%w: partition Config.%s is negative; use a positive value or 0 for the default", postbox.ErrInvalidConfig, f.name)
		}
	}
	return nil
}

// Result is what one run did.
type Result struct {
	// Created are the labels of the outbox partitions created, oldest first.
	Created []string
	// Dropped are the labels of the outbox partitions dropped.
	Dropped []string
	// Kept are outbox partitions past retention that were not dropped because they hold a pending message, or a
	// dead one without DropDead.
	Kept []string
	// InboxCreated are the labels of the inbox partitions created, oldest first.
	InboxCreated []string
	// InboxDropped are the labels of the inbox partitions dropped.
	InboxDropped []string
}

// Maintainer keeps the partitions of one partitioned table set: its outbox and, when it is partitioned too, its
// inbox. It is safe for concurrent use, and any number of maintainers may run on one table set: a named lock (a
// transaction-level advisory lock on PostgreSQL, GET_LOCK on MySQL) lets one act at a time.
type Maintainer struct {
	db    driver.SessionOpener
	d     ddl
	names driver.Names
	clock postbox.Clock
	cfg   Config
	log   *slog.Logger
}

// New returns a maintainer of client's outbox and inbox tables. cfg may be nil for the defaults. It does no I/O;
// call Run or RunOnce.
func New[TTx any](client *postbox.Client[TTx], cfg *Config) (*Maintainer, error) {
	if client == nil {
		return nil, fmt.Errorf("%w: partition.New needs a client from postbox.NewClient", postbox.ErrInvalidConfig)
	}
	db, ok := client.Driver().(driver.SessionOpener)
	if !ok {
		return nil, fmt.Errorf("%w: driver %T cannot maintain partitions; use pgxv5 or databasesql", postbox.ErrInvalidConfig, client.Driver())
	}
	caps := client.Driver().Capabilities()
	d, ok := ddlFor(caps.Dialect)
	if !caps.Partitions || !ok {
		return nil, fmt.Errorf("%w: %s has no table partitioning; use postbox.Cleaner", postbox.ErrInvalidConfig, caps.Dialect)
	}
	c := cfg.WithDefaults()
	if err := c.validate(); err != nil {
		return nil, err
	}
	cc := client.Config()
	log := c.Logger
	if log == nil {
		log = cc.Logger
	}
	return &Maintainer{
		db: db, d: d, clock: cc.Clock, cfg: c,
		names: driver.Names{Schema: cc.Schema, Outbox: cc.Table, Inbox: cc.InboxTable, Partitioned: true},
		log:   log.With("component", "postbox.partition", "table", cc.Table),
	}, nil
}

// span is one existing named partition.
type span struct {
	label      string
	start, end time.Time
}

// RunOnce creates the partitions missing up to Lookahead periods ahead and drops those past retention, in the
// inbox and then in the outbox. An inbox created without the partitioned layout (before Config.Partitioned shaped
// the inbox) is left to a postbox.Cleaner. It returns postbox.ErrLocked, having done nothing, when
// another maintainer of the same table set is running. On error the Result is empty: on PostgreSQL the whole run
// is one transaction and was rolled back, while on MySQL, where DDL commits at once, the statements that ran are
// in the log.
func (m *Maintainer) RunOnce(ctx context.Context) (Result, error) {
	sess, err := m.db.Session(ctx)
	if err != nil {
		return Result{}, fmt.Errorf("postbox: partition: %w", err)
	}
	defer sess.Close() // closing ends whatever the session still holds
	got, err := m.d.begin(ctx, sess, m.names, m.cfg.LockTimeout)
	if err != nil {
		return Result{}, err
	}
	if !got {
		return Result{}, postbox.ErrLocked
	}
	res, err := m.run(ctx, sess)
	if eerr := m.d.end(context.WithoutCancel(ctx), sess, m.names, err); err == nil {
		err = eerr
	}
	if err != nil {
		return Result{}, err
	}
	return res, nil
}

// run does the work of RunOnce inside the maintenance lock. The inbox comes first: on PostgreSQL the run is one
// transaction holding each table's lock to its end, and a consumer's transaction claims in the inbox before it
// enqueues into the outbox, so taking them in the same order cannot deadlock with it.
func (m *Maintainer) run(ctx context.Context, sess driver.Session) (res Result, err error) {
	now := m.clock.Now().UTC()
	if res.InboxCreated, res.InboxDropped, err = m.runInbox(ctx, sess, now); err != nil {
		return res, err
	}
	layout, spans, err := m.list(ctx, sess, Outbox)
	if err != nil {
		return res, err
	}
	from := time.Time{}
	if len(spans) == 0 && layout.Tail != "" {
		oldest, ok, err := m.d.oldestInTail(ctx, sess, m.names, layout.Tail)
		if err != nil {
			return res, err
		}
		if ok {
			from = oldest
		}
	}
	if res.Created, err = m.create(ctx, sess, Outbox, layout.Tail, spans, from, now); err != nil {
		return res, err
	}
	cutoff := now.Add(-m.cfg.Retention)
	for _, s := range spans {
		if s.end.After(cutoff) {
			continue
		}
		dropped, err := m.d.drop(ctx, sess, m.names, s.label, !m.cfg.DropDead, m.logDDL)
		if err != nil {
			return res, fmt.Errorf("postbox: drop partition %s: %w", s.label, err)
		}
		if dropped {
			res.Dropped = append(res.Dropped, s.label)
			continue
		}
		res.Kept = append(res.Kept, s.label)
		m.log.WarnContext(ctx, "partition past retention still holds messages that are pending or dead; keeping it",
			"partition", s.label, "drop_dead", m.cfg.DropDead)
	}
	return res, nil
}

// runInbox creates and drops the inbox's partitions, when the inbox is partitioned. Claims are never kept past
// retention: nothing waits on them.
func (m *Maintainer) runInbox(ctx context.Context, sess driver.Session, now time.Time) (created, dropped []string, err error) {
	layout, spans, err := m.list(ctx, sess, Inbox)
	if errors.Is(err, ErrNotPartitioned) {
		m.log.DebugContext(ctx, "the inbox is not partitioned; a postbox.Cleaner keeps it small", "inbox", m.names.Inbox)
		return nil, nil, nil
	}
	if err != nil {
		return nil, nil, err
	}
	// A table with no named partition yet starts at the current period. Claims of older messages stay in the tail
	// (PostgreSQL) or go to the first partition (MySQL, whose first range has no lower bound), and leave with it.
	if created, err = m.create(ctx, sess, Inbox, layout.Tail, spans, time.Time{}, now); err != nil {
		return nil, nil, err
	}
	cutoff := now.Add(-m.cfg.InboxRetention)
	for _, s := range spans {
		if s.end.After(cutoff) {
			continue
		}
		if err := m.d.dropInbox(ctx, sess, m.names, s.label, m.logDDL); err != nil {
			return nil, nil, fmt.Errorf("postbox: drop inbox partition %s: %w", s.label, err)
		}
		dropped = append(dropped, s.label)
	}
	return created, dropped, nil
}

// Partitions lists the partitions of the table set's outbox or inbox, their labels oldest first. It returns an
// error wrapping ErrNotPartitioned for a table created without postbox.Config.Partitioned.
func (m *Maintainer) Partitions(ctx context.Context, t Table) (Partitions, error) {
	sess, err := m.db.Session(ctx)
	if err != nil {
		return Partitions{}, fmt.Errorf("postbox: partition: %w", err)
	}
	defer sess.Close()
	p, spans, err := m.list(ctx, sess, t)
	p.Labels = p.Labels[:0]
	for _, s := range spans {
		p.Labels = append(p.Labels, s.label)
	}
	return p, err
}

// list returns the layout of table t and its named partitions in time order.
func (m *Maintainer) list(ctx context.Context, sess driver.Session, t Table) (Partitions, []span, error) {
	layout, err := m.d.list(ctx, sess, m.names, t)
	if err != nil {
		return layout, nil, err
	}
	var spans []span
	for _, l := range layout.Labels {
		if start, end, ok := parseLabel(l); ok {
			spans = append(spans, span{l, start, end})
		}
	}
	sort.Slice(spans, func(i, j int) bool { return spans[i].start.Before(spans[j].start) })
	return layout, spans, nil
}

// create adds table pt's partitions from the end of the last one (or, on a table with none yet, from the current
// period, or from the period of oldest when that is earlier) to Lookahead periods after the current one.
func (m *Maintainer) create(ctx context.Context, sess driver.Session, pt Table, tail string, spans []span,
	oldest, now time.Time) ([]string, error) {
	p := m.cfg.Period
	var from time.Time
	if len(spans) > 0 {
		for _, s := range spans {
			if s.end.After(from) {
				from = s.end
			}
		}
	} else {
		from = p.floor(now)
		if !oldest.IsZero() && oldest.Before(from) {
			from = p.floor(oldest)
		}
	}
	until := p.floor(now)
	for range m.cfg.Lookahead + 1 {
		until = p.next(until)
	}
	var parts []partRange
	for s := from; s.Before(until); {
		start := p.floor(s)
		e := p.next(start)
		parts = append(parts, partRange{label: p.label(start), start: s, end: e})
		s = e
		if len(parts) > MaxCreate {
			return nil, fmt.Errorf("postbox: partition: %s %s partitions from %s to %s are more than %d; create the oldest by hand or choose a longer Period",
				p, pt, from.Format(time.RFC3339), until.Format(time.RFC3339), MaxCreate)
		}
	}
	if err := m.d.add(ctx, sess, m.names, pt, tail, parts, m.logDDL); err != nil {
		return nil, fmt.Errorf("postbox: create %s partitions: %w", pt, err)
	}
	labels := make([]string, len(parts))
	for i, pr := range parts {
		labels[i] = pr.label
	}
	return labels, nil
}

func (m *Maintainer) logDDL(ctx context.Context, stmt string) {
	m.log.InfoContext(ctx, "partition DDL", "sql", stmt)
}

// Run maintains at once and then every Interval until ctx is done, and returns nil. Errors are logged and the
// next run tries again; a run that finds another maintainer at work skips its turn.
func (m *Maintainer) Run(ctx context.Context) error {
	t := time.NewTicker(m.cfg.Interval)
	defer t.Stop()
	for {
		_, err := m.RunOnce(ctx)
		switch {
		case ctx.Err() != nil:
			return nil
		case errors.Is(err, postbox.ErrLocked):
			m.log.DebugContext(ctx, "another maintainer is at work; skipping this run")
		case err != nil:
			m.log.ErrorContext(ctx, "partition maintenance failed", "err", err)
		}
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
	}
}

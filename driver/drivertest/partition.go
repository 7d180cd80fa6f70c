package drivertest

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/postbox-go/postbox"
	"github.com/postbox-go/postbox/driver"
	"github.com/postbox-go/postbox/driver/internal/sqlstore"
	"github.com/postbox-go/postbox/partition"
	"github.com/postbox-go/postbox/postboxtest"
)

// ExercisePartitions runs the whole conformance suite, the inbox's included, on partitioned tables (see
// Partitioned), then the tests of partition.Maintainer. The driver must implement driver.SessionOpener on a database with partitioning; opts
// are Exercise's.
func ExercisePartitions[TTx any](t *testing.T, newDriver NewDriver[TTx], opts Options[TTx]) {
	t.Run("Conformance", func(t *testing.T) { Exercise(t, Partitioned(newDriver), opts) })
	t.Run("LookaheadAndRetention", func(t *testing.T) { testLookaheadAndRetention(t, newDriver) })
	t.Run("TailTakesLateRows", func(t *testing.T) { testTailTakesLateRows(t, newDriver) })
	t.Run("Inbox", func(t *testing.T) { testInboxPartitions(t, newDriver) })
	t.Run("OneMaintainerAtATime", func(t *testing.T) { testOneMaintainerAtATime(t, newDriver) })
	t.Run("Unpartitioned", func(t *testing.T) { testUnpartitioned(t, newDriver) })
}

// Partitioned returns drivers on which every table set has the partitioned layout, outbox and inbox. After each
// migration it runs a partition maintainer with hourly partitions and two hours of lookahead, so that the suite's
// rows, whose clocks move by hours, spread over named partitions and the tail, and the inbox claims of messages
// made now land in named partitions.
func Partitioned[TTx any](newDriver NewDriver[TTx]) NewDriver[TTx] {
	return func(t *testing.T) driver.Driver[TTx] {
		drv := newDriver(t)
		m, ok := drv.(driver.SessionOpener)
		if !ok {
			t.Fatalf("driver %T does not implement driver.SessionOpener, so it cannot maintain partitions", drv)
		}
		return partitionedDriver[TTx]{Driver: drv, m: m}
	}
}

type partitionedDriver[TTx any] struct {
	driver.Driver[TTx]
	m driver.SessionOpener
}

func (d partitionedDriver[TTx]) Session(ctx context.Context) (driver.Session, error) {
	return d.m.Session(ctx)
}

func (d partitionedDriver[TTx]) Store(n driver.Names) (driver.Store[TTx], error) {
	n.Partitioned = true
	inner, err := d.Driver.Store(n)
	if err != nil {
		return nil, err
	}
	return withStoreOptions(partitionedStore[TTx]{Store: inner, drv: d, n: n}, inner), nil
}

type partitionedStore[TTx any] struct {
	driver.Store[TTx]
	drv partitionedDriver[TTx]
	n   driver.Names
}

func (s partitionedStore[TTx]) Migrate(ctx context.Context) ([]int, error) {
	done, err := s.Store.Migrate(ctx)
	if err != nil {
		return done, err
	}
	c, err := postbox.NewClient[TTx](s.drv, &postbox.Config{Schema: s.n.Schema, Table: s.n.Outbox, InboxTable: s.n.Inbox})
	if err != nil {
		return done, err
	}
	m, err := partition.New(c, &partition.Config{Period: partition.Hourly, Lookahead: 2, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		return done, err
	}
	if _, err := m.RunOnce(ctx); err != nil && !errors.Is(err, postbox.ErrLocked) {
		return done, err
	}
	// The suite's inbox tests must run on a partitioned inbox.
	if _, err := m.Partitions(ctx, partition.Inbox); err != nil {
		return done, fmt.Errorf("drivertest: the inbox of a partitioned table set: %w", err)
	}
	return done, nil
}

// t0 is the partition tests' start: a fixed time, so that partition labels are known in advance.
var t0 = time.Date(2031, 3, 10, 12, 0, 0, 0, time.UTC)

func partitionedClient[TTx any](t *testing.T, drv driver.Driver[TTx], clock postbox.Clock) *postbox.Client[TTx] {
	cfg := Tables(clock)
	cfg.Partitioned = true
	return Client(t, drv, cfg)
}

func maintainer[TTx any](t *testing.T, c *postbox.Client[TTx], cfg *partition.Config) *partition.Maintainer {
	t.Helper()
	m, err := partition.New(c, cfg)
	if err != nil {
		t.Fatalf("partition.New: %v", err)
	}
	return m
}

func runOnce(t *testing.T, m *partition.Maintainer) partition.Result {
	t.Helper()
	res, err := m.RunOnce(context.Background())
	if err != nil {
		t.Fatalf("RunOnce: %v", err)
	}
	return res
}

func days(from string, n int) []string {
	start, err := time.Parse("20060102", from)
	if err != nil {
		panic(err)
	}
	out := make([]string, n)
	for i := range out {
		out[i] = "p" + start.AddDate(0, 0, i).Format("20060102")
	}
	return out
}

// session opens a maintenance session on drv for inspecting tables; the caller closes it, so that inspecting
// often never runs the driver's pool dry.
func session[TTx any](t *testing.T, drv driver.Driver[TTx]) (sqlstore.Dialect, driver.Session) {
	t.Helper()
	m, ok := drv.(driver.SessionOpener)
	if !ok {
		t.Fatalf("driver %T does not implement driver.SessionOpener", drv)
	}
	d, ok := sqlstore.ByName(drv.Capabilities().Dialect)
	if !ok {
		t.Fatalf("driver %T reports dialect %q, which has no SQL here", drv, drv.Capabilities().Dialect)
	}
	sess, err := m.Session(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	return d, sess
}

// partitions lists the partitions of c's table pt.
func partitions[TTx any](t *testing.T, c *postbox.Client[TTx], pt partition.Table) partition.Partitions {
	t.Helper()
	p, err := maintainer(t, c, nil).Partitions(context.Background(), pt)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// labels lists the named partitions of c's table pt in time order.
func labels[TTx any](t *testing.T, _ driver.Driver[TTx], c *postbox.Client[TTx], pt partition.Table) []string {
	t.Helper()
	l := partitions(t, c, pt).Labels
	sort.Strings(l)
	return l
}

// tailRows counts the rows in the tail partition (pmax, or PostgreSQL's DEFAULT partition) of c's table pt.
func tailRows[TTx any](t *testing.T, drv driver.Driver[TTx], c *postbox.Client[TTx], pt partition.Table) int64 {
	t.Helper()
	ctx := context.Background()
	layout := partitions(t, c, pt)
	d, sess := session(t, drv)
	defer sess.Close()
	table := c.Config().Table
	if pt == partition.Inbox {
		table = c.Config().InboxTable
	}
	if layout.Tail == "" {
		t.Fatalf("table %s has no tail partition", table)
	}
	q := "SELECT COUNT(*) FROM " + d.QuoteIdent(layout.Tail)
	if d == sqlstore.MySQL {
		q = "SELECT COUNT(*) FROM " + d.QuoteIdent(table) + " PARTITION (" + d.QuoteIdent(layout.Tail) + ")"
	}
	var n int64
	if err := sess.Query(ctx, q, nil, func(scan func(...any) error) error { return scan(&n) }); err != nil {
		t.Fatal(err)
	}
	return n
}

func testLookaheadAndRetention[TTx any](t *testing.T, newDriver NewDriver[TTx]) {
	drv := newDriver(t)
	clock := postboxtest.NewClock(t0)
	c := partitionedClient(t, drv, clock)
	enqueue(t, c, messages(5, "orders")...)
	m := maintainer(t, c, &partition.Config{Lookahead: 2, Retention: 48 * time.Hour})

	res := runOnce(t, m)
	if want := days("20310310", 3); !slices.Equal(res.Created, want) || len(res.Dropped) != 0 {
		t.Fatalf("first run %+v; want today's partition and 2 ahead created, %v", res, want)
	}
	if got, want := labels(t, drv, c, partition.Outbox), days("20310310", 3); !slices.Equal(got, want) {
		t.Fatalf("partitions %v, want %v", got, want)
	}
	if res := runOnce(t, m); len(res.Created)+len(res.Dropped)+len(res.Kept) != 0 {
		t.Fatalf("second run at the same time did %+v; want nothing", res)
	}
	rec := poisonRecorder()
	r := relay(t, c, rec, &postbox.RelayConfig{KeepPublished: true})
	if n := drain(t, r); n != 5 {
		t.Fatalf("published %d, want 5", n)
	}
	clock.Advance(24 * time.Hour) // 11 March: a message that stays pending
	pending := messages(1, "later")
	pending[0].AvailableAt = t0.AddDate(1, 0, 0)
	enqueue(t, c, pending...)
	clock.Advance(24 * time.Hour) // 12 March: a message that dies
	enqueue(t, c, messages(1, "poison")...)
	if n := drain(t, r); n != 1 {
		t.Fatalf("claimed %d, want the poison message", n)
	}

	clock.Advance(48 * time.Hour) // 14 March noon: everything before 12 March noon is past retention
	res = runOnce(t, m)
	if want := days("20310313", 4); !slices.Equal(res.Created, want) {
		t.Fatalf("created %v, want %v", res.Created, want)
	}
	if !slices.Equal(res.Dropped, []string{"p20310310"}) || !slices.Equal(res.Kept, []string{"p20310311"}) {
		t.Fatalf("run on 14 March %+v; want p20310310 (only published rows) dropped and p20310311 (a pending row) kept", res)
	}
	if s := stats(t, c); s.Pending != 1 || s.Dead != 1 {
		t.Fatalf("stats %+v; want the pending and the dead message kept", s)
	}

	clock.Advance(48 * time.Hour) // 16 March noon
	res = runOnce(t, m)
	if !slices.Equal(res.Dropped, []string{"p20310313"}) || !slices.Equal(res.Kept, days("20310311", 2)) {
		t.Fatalf("run on 16 March %+v; want the empty p20310313 dropped, and p20310311 (pending) and p20310312 (dead) kept", res)
	}
	res = runOnce(t, maintainer(t, c, &partition.Config{Lookahead: 2, Retention: 48 * time.Hour, DropDead: true}))
	if !slices.Equal(res.Dropped, []string{"p20310312"}) || !slices.Equal(res.Kept, []string{"p20310311"}) {
		t.Fatalf("run with DropDead %+v; want p20310312 dropped with its dead message, p20310311 still kept", res)
	}
	if s := stats(t, c); s.Pending != 1 || s.Dead != 0 {
		t.Fatalf("stats %+v; want only the pending message", s)
	}
	if got, want := labels(t, drv, c, partition.Outbox), append([]string{"p20310311"}, days("20310314", 5)...); !slices.Equal(got, want) {
		t.Fatalf("partitions %v, want %v", got, want)
	}
}

func testTailTakesLateRows[TTx any](t *testing.T, newDriver NewDriver[TTx]) {
	drv := newDriver(t)
	clock := postboxtest.NewClock(t0)
	c := partitionedClient(t, drv, clock)
	m := maintainer(t, c, &partition.Config{Lookahead: 1})
	if res := runOnce(t, m); !slices.Equal(res.Created, days("20310310", 2)) {
		t.Fatalf("created %v", res.Created)
	}
	// The maintainer stopped; ten days later rows keep coming, past the last named partition.
	clock.Advance(10 * 24 * time.Hour)
	msgs := messages(3, "late")
	enqueue(t, c, msgs...)
	if n := tailRows(t, drv, c, partition.Outbox); n != 3 {
		t.Fatalf("%d rows in the tail partition, want the 3 late ones", n)
	}
	res := runOnce(t, m)
	if want := days("20310312", 10); !slices.Equal(res.Created, want) {
		t.Fatalf("created %v, want %v", res.Created, want)
	}
	if n := tailRows(t, drv, c, partition.Outbox); n != 0 {
		t.Fatalf("%d rows left in the tail partition; creating their partition must move them", n)
	}
	rec := &postboxtest.Recorder{}
	if n := drain(t, relay(t, c, rec, nil)); n != 3 {
		t.Fatalf("published %d, want the 3 late messages", n)
	}
	for _, id := range ids(msgs) {
		if rec.Counts()[id] != 1 {
			t.Fatalf("late message %s published %d times", id, rec.Counts()[id])
		}
	}
}

// blockingHandler holds the first log record at Info or above until release is closed, after closing entered.
type blockingHandler struct {
	once             *sync.Once
	entered, release chan struct{}
}

func (h blockingHandler) Enabled(_ context.Context, l slog.Level) bool { return l >= slog.LevelInfo }
func (h blockingHandler) WithAttrs([]slog.Attr) slog.Handler           { return h }
func (h blockingHandler) WithGroup(string) slog.Handler                { return h }
func (h blockingHandler) Handle(context.Context, slog.Record) error {
	h.once.Do(func() {
		close(h.entered)
		<-h.release
	})
	return nil
}

func testOneMaintainerAtATime[TTx any](t *testing.T, newDriver NewDriver[TTx]) {
	ctx := context.Background()
	clock := postboxtest.NewClock(t0)
	cfg := Tables(clock)
	cfg.Partitioned = true
	c := Client(t, newDriver(t), cfg)

	// Maintainer a stops at its first DDL statement, holding the lock.
	h := blockingHandler{once: &sync.Once{}, entered: make(chan struct{}), release: make(chan struct{})}
	a := maintainer(t, c, &partition.Config{Logger: slog.New(h)})
	other, err := postbox.NewClient(newDriver(t), cfg) // another process's client
	if err != nil {
		t.Fatal(err)
	}
	b := maintainer(t, other, nil)
	type result struct {
		res partition.Result
		err error
	}
	done := make(chan result, 1)
	go func() {
		res, err := a.RunOnce(ctx)
		done <- result{res, err}
	}()
	<-h.entered
	if res, err := b.RunOnce(ctx); !errors.Is(err, postbox.ErrLocked) || len(res.Created)+len(res.InboxCreated) != 0 {
		t.Errorf("second maintainer while the first works = %+v, %v; want ErrLocked and nothing done", res, err)
	}
	close(h.release)
	if r := <-done; r.err != nil || len(r.res.Created) != 1+partition.DefaultLookahead ||
		len(r.res.InboxCreated) != 1+partition.DefaultLookahead {
		t.Fatalf("first maintainer = %+v, %v; want today's partition and %d ahead, in the outbox and in the inbox",
			r.res, r.err, partition.DefaultLookahead)
	}
	if res := runOnce(t, b); len(res.Created)+len(res.InboxCreated) != 0 {
		t.Fatalf("second maintainer afterwards created %v and %v in the inbox; the first had done it", res.Created, res.InboxCreated)
	}

	// Many at once on a fresh table: each acts or stands aside, and no partition is made twice.
	cfg = Tables(clock)
	cfg.Partitioned = true
	Client(t, newDriver(t), cfg)
	var wg sync.WaitGroup
	results := make([]result, 4)
	for i := range results {
		cl, err := postbox.NewClient(newDriver(t), cfg)
		if err != nil {
			t.Fatal(err)
		}
		m := maintainer(t, cl, &partition.Config{Logger: slog.New(slog.DiscardHandler)})
		wg.Add(1)
		go func() {
			defer wg.Done()
			res, err := m.RunOnce(ctx)
			results[i] = result{res, err}
		}()
	}
	wg.Wait()
	var created, inboxCreated []string
	for i, r := range results {
		if r.err != nil && !errors.Is(r.err, postbox.ErrLocked) {
			t.Fatalf("maintainer %d of 4 running at once: %v", i, r.err)
		}
		created = append(created, r.res.Created...)
		inboxCreated = append(inboxCreated, r.res.InboxCreated...)
	}
	sort.Strings(created)
	sort.Strings(inboxCreated)
	want := days("20310310", 1+partition.DefaultLookahead)
	if !slices.Equal(created, want) || !slices.Equal(inboxCreated, want) {
		t.Fatalf("4 maintainers at once created %v in the outbox and %v in the inbox between them; want each of %v once in each",
			created, inboxCreated, want)
	}
}

func testUnpartitioned[TTx any](t *testing.T, newDriver NewDriver[TTx]) {
	drv := newDriver(t)
	c := Client(t, drv, nil)
	if _, err := maintainer(t, c, nil).RunOnce(context.Background()); !errors.Is(err, partition.ErrNotPartitioned) {
		t.Fatalf("RunOnce on an unpartitioned table: %v, want ErrNotPartitioned", err)
	}
	missing, err := postbox.NewClient(drv, Tables(nil))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := maintainer(t, missing, nil).RunOnce(context.Background()); err == nil || !strings.Contains(err.Error(), "run Migrate") {
		t.Fatalf("RunOnce on a table not yet migrated: %v, want an error saying to run Migrate", err)
	}
	if _, err := partition.New(c, &partition.Config{Period: 7}); !errors.Is(err, postbox.ErrInvalidConfig) {
		t.Fatalf("partition.New with an unknown Period: %v, want ErrInvalidConfig", err)
	}
}

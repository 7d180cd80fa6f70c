package drivertest

import (
	"context"
	"errors"
	"maps"
	"slices"
	"testing"
	"time"

	"github.com/postbox-go/postbox"
	"github.com/postbox-go/postbox/driver"
	"github.com/postbox-go/postbox/driver/internal/sqlstore"
)

// testStore calls a store's operations directly, with no client or relay in between, and checks the rows each
// leaves, so that a store bug fails the case of the operation that has it.
func testStore[TTx any](t *testing.T, newDriver NewDriver[TTx], opts Options[TTx]) {
	drv := newDriver(t)
	t.Run("RefusesInvalidNames", func(t *testing.T) {
		for _, n := range []driver.Names{
			{Outbox: `outbox"; DROP TABLE accounts; --`, Inbox: "inbox"},
			{Outbox: "outbox", Inbox: "inbox'); --"},
			{Outbox: "same", Inbox: "same"},
			{Outbox: "", Inbox: "inbox"},
		} {
			if s, err := drv.Store(n); err == nil || s != nil {
				t.Errorf("Store(%+v) = %v, %v; want an error and no store", n, s, err)
			}
		}
	})
	t.Run("InsertClaimSettle", func(t *testing.T) { testStoreOutbox(t, newStoreEnv(t, drv, opts)) })
	t.Run("ClaimDeletePublished", func(t *testing.T) { testStoreDeletePublished(t, newStoreEnv(t, drv, opts)) })
	t.Run("InboxClaimAndFail", func(t *testing.T) { testStoreInbox(t, newStoreEnv(t, drv, opts)) })
	t.Run("Cleanup", func(t *testing.T) { testStoreCleanup(t, newStoreEnv(t, drv, opts)) })
}

// storeEnv is a store on fresh tables and the means to look at its rows.
type storeEnv[TTx any] struct {
	t    *testing.T
	drv  driver.Driver[TTx]
	opts Options[TTx]
	cfg  postbox.Config
	s    driver.Store[TTx]
	now  time.Time
}

func newStoreEnv[TTx any](t *testing.T, drv driver.Driver[TTx], opts Options[TTx]) *storeEnv[TTx] {
	c := Client(t, drv, Tables(nil)) // migrates the tables
	return &storeEnv[TTx]{t: t, drv: drv, opts: opts, cfg: c.Config(), s: storeOf(t, drv, c),
		now: time.Now().UTC().Truncate(time.Millisecond)}
}

// record returns a record to insert, created and available at e.now.
func (e *storeEnv[TTx]) record(topic string) driver.Record {
	return driver.Record{Message: driver.Message{ID: postbox.NewID(), Topic: topic, Key: "k1", Type: "test.event",
		Payload: []byte(`{"n":1}`), AvailableAt: e.now}, CreatedAt: e.now}
}

// inTx runs fn in a transaction of the driver's type and commits it, or rolls it back when commit is false.
func (e *storeEnv[TTx]) inTx(commit bool, fn func(ctx context.Context, tx TTx) error) {
	e.t.Helper()
	ctx := context.Background()
	tx, err := e.drv.Begin(ctx)
	if err != nil {
		e.t.Fatal(err)
	}
	if err := fn(ctx, tx); err != nil {
		_ = e.drv.Rollback(ctx, tx)
		e.t.Fatal(err)
	}
	end := e.drv.Rollback
	if commit {
		end = e.drv.Commit
	}
	if err := end(ctx, tx); err != nil {
		e.t.Fatal(err)
	}
}

func (e *storeEnv[TTx]) insert(recs ...driver.Record) {
	e.t.Helper()
	e.inTx(true, func(ctx context.Context, tx TTx) error { return e.s.Insert(ctx, tx, recs) })
}

// count runs a query returning one integer; the tables' names are plain identifiers, so they need no quoting.
func (e *storeEnv[TTx]) count(query string) int64 {
	e.t.Helper()
	var n int64
	e.inTx(false, func(ctx context.Context, tx TTx) (err error) {
		n, err = e.opts.QueryInt(ctx, tx, query)
		return err
	})
	return n
}

func (e *storeEnv[TTx]) outbox(where string) int64 {
	e.t.Helper()
	return e.count("SELECT count(*) FROM " + e.cfg.Table + " WHERE " + where)
}

func (e *storeEnv[TTx]) claim(limit int, now time.Time) driver.Claim {
	e.t.Helper()
	return e.claimWith(driver.ClaimParams{Limit: limit, Now: now})
}

func (e *storeEnv[TTx]) claimWith(p driver.ClaimParams) driver.Claim {
	e.t.Helper()
	cl, err := e.s.Claim(context.Background(), p)
	if err != nil {
		e.t.Fatalf("Claim: %v", err)
	}
	return cl
}

func claimedIDs(cl driver.Claim) []string {
	var out []string
	for _, r := range cl.Records() {
		out = append(out, r.ID)
	}
	return out
}

func sortedIDs(recs ...driver.Record) []string {
	var out []string
	for _, r := range recs {
		out = append(out, r.ID)
	}
	slices.Sort(out)
	return out
}

// testStoreOutbox: Insert writes only in the caller's transaction; Claim takes the due pending records oldest first
// with every field as inserted, and skips locked ones; Settle deletes, keeps or reschedules each record as told;
// Release changes nothing.
func testStoreOutbox[TTx any](t *testing.T, e *storeEnv[TTx]) {
	ctx := context.Background()
	a, b, delayed, rolledBack := e.record("orders"), e.record("orders"), e.record("orders"), e.record("orders")
	a.Headers = map[string]string{"traceparent": "00-abc-def-01", "tenant": "7"}
	b.Key, b.Payload = "", nil
	delayed.AvailableAt = e.now.Add(time.Hour)
	e.insert(a, b, delayed)
	e.inTx(false, func(ctx context.Context, tx TTx) error { return e.s.Insert(ctx, tx, []driver.Record{rolledBack}) })
	if n := e.outbox("status = 'pending'"); n != 3 {
		t.Fatalf("%d pending rows after inserting 3 and rolling 1 back; want 3", n)
	}

	cl := e.claim(10, e.now)
	if got, want := claimedIDs(cl), sortedIDs(a, b); !slices.Equal(got, want) {
		t.Fatalf("claimed %v; want the two due records oldest first %v", got, want)
	}
	inserted := map[string]driver.Record{a.ID: a, b.ID: b}
	for _, got := range cl.Records() {
		want := inserted[got.ID]
		if got.Topic != want.Topic || got.Key != want.Key || got.Type != want.Type || string(got.Payload) != string(want.Payload) ||
			!maps.Equal(got.Headers, want.Headers) || got.Status != driver.StatusPending || got.Attempts != 0 || got.LastError != "" ||
			!got.CreatedAt.Equal(want.CreatedAt) || !got.AvailableAt.Equal(want.AvailableAt) || !got.PublishedAt.IsZero() {
			t.Fatalf("claimed record %+v; want the inserted %+v, pending with no attempt", got, want)
		}
	}
	if e.drv.Capabilities().SkipLocked {
		other := e.claim(10, e.now)
		if n := len(other.Records()); n != 0 {
			t.Fatalf("a second claim took %d records locked by the first; want 0", n)
		}
		if err := other.Release(ctx); err != nil {
			t.Fatal(err)
		}
	}
	err := cl.Settle(ctx, driver.Settlement{Published: []string{a.ID}, Now: e.now, Failed: []driver.Failure{
		{ID: b.ID, Attempts: 1, LastError: "broker down", AvailableAt: e.now.Add(time.Minute)}}})
	if err != nil {
		t.Fatalf("Settle: %v", err)
	}
	if n, p := e.outbox("1 = 1"), e.outbox("status = 'pending'"); n != 2 || p != 2 {
		t.Fatalf("%d rows, %d pending after settling; want the published one deleted and 2 pending left", n, p)
	}
	if ids := claimedIDs(e.claim(10, e.now)); len(ids) != 0 {
		t.Fatalf("claimed %v before the retry and the delayed record are due; want nothing", ids)
	}

	later := e.now.Add(2 * time.Hour)
	cl = e.claim(10, later)
	if got, want := claimedIDs(cl), sortedIDs(b, delayed); !slices.Equal(got, want) {
		t.Fatalf("claimed %v once due; want %v", got, want)
	}
	for _, r := range cl.Records() {
		if r.ID == b.ID && (r.Attempts != 1 || r.LastError != "broker down" || !r.AvailableAt.Equal(e.now.Add(time.Minute))) {
			t.Fatalf("the failed record reads %+v; want attempts 1, its error and its retry time", r)
		}
	}
	if err := cl.Release(ctx); err != nil {
		t.Fatalf("Release: %v", err)
	}
	cl = e.claim(10, later)
	if got, want := claimedIDs(cl), sortedIDs(b, delayed); !slices.Equal(got, want) {
		t.Fatalf("claimed %v after a release; want the same records %v", got, want)
	}
	err = cl.Settle(ctx, driver.Settlement{Published: []string{b.ID}, Keep: true, Now: later, Failed: []driver.Failure{
		{ID: delayed.ID, Attempts: 1, LastError: "rejected", AvailableAt: later, Dead: true}}})
	if err != nil {
		t.Fatalf("Settle: %v", err)
	}
	if p, d, n := e.outbox("status = 'published' AND published_at IS NOT NULL"), e.outbox("status = 'dead'"), e.outbox("1 = 1"); p != 1 || d != 1 || n != 2 {
		t.Fatalf("%d published, %d dead, %d rows; want the kept one published and the other dead", p, d, n)
	}
	dead, err := e.s.ListDead(ctx, driver.DeadFilter{All: true})
	if err != nil || len(dead) != 1 || dead[0].ID != delayed.ID || dead[0].Attempts != 1 || dead[0].LastError != "rejected" ||
		dead[0].Status != driver.StatusDead {
		t.Fatalf("ListDead = %+v, %v; want the dead record with its attempt and error", dead, err)
	}
	if ids := claimedIDs(e.claim(10, later.Add(time.Hour))); len(ids) != 0 {
		t.Fatalf("claimed %v from published and dead records; want nothing", ids)
	}
}

// testStoreDeletePublished: a claim made with DeletePublished (which a store may serve by deleting the batch in the
// claim's transaction) takes the same records, hides them from other claims, loses nothing when released (the
// killed-relay case covers a dead connection), and on Settle deletes the published records only: failed ones come back with their new
// attempt count, error and retry time, dead ones as dead, and records the settlement does not name unchanged.
func testStoreDeletePublished[TTx any](t *testing.T, e *storeEnv[TTx]) {
	ctx := context.Background()
	pub, failed, dead, unnamed := e.record("orders"), e.record("orders"), e.record("orders"), e.record("orders")
	pub.Headers = map[string]string{"tenant": "7"}
	failed.Headers = map[string]string{"traceparent": "00-abc-def-01", "tenant": "7"}
	failed.Key, failed.Payload = "", nil
	e.insert(pub, failed, dead, unnamed)
	all := sortedIDs(pub, failed, dead, unnamed)
	claim := func() driver.Claim {
		return e.claimWith(driver.ClaimParams{Limit: 10, Now: e.now, DeletePublished: true})
	}

	cl := claim()
	if got := claimedIDs(cl); !slices.Equal(got, all) {
		t.Fatalf("claimed %v; want every due record oldest first %v", got, all)
	}
	if e.drv.Capabilities().SkipLocked {
		other := claim()
		if n := len(other.Records()); n != 0 {
			t.Fatalf("a second claim took %d records of an open claim; want 0", n)
		}
		if err := other.Release(ctx); err != nil {
			t.Fatal(err)
		}
	}
	if err := cl.Release(ctx); err != nil {
		t.Fatalf("Release: %v", err)
	}
	if n := e.outbox("status = 'pending'"); n != 4 {
		t.Fatalf("%d pending rows after a release; want all 4 back", n)
	}

	cl = claim()
	retry := e.now.Add(time.Minute)
	err := cl.Settle(ctx, driver.Settlement{Published: []string{pub.ID}, Now: e.now, Failed: []driver.Failure{
		{ID: failed.ID, Attempts: 1, LastError: "broker down", AvailableAt: retry},
		{ID: dead.ID, Attempts: 1, LastError: "rejected", AvailableAt: retry, Dead: true}}})
	if err != nil {
		t.Fatalf("Settle: %v", err)
	}
	if n, p, d := e.outbox("1 = 1"), e.outbox("status = 'pending'"), e.outbox("status = 'dead'"); n != 3 || p != 2 || d != 1 {
		t.Fatalf("%d rows, %d pending, %d dead after settling; want the published one gone, 2 pending and 1 dead", n, p, d)
	}
	cl = claim()
	if got := claimedIDs(cl); !slices.Equal(got, []string{unnamed.ID}) {
		t.Fatalf("claimed %v before the retry is due; want only the record the settlement did not name", got)
	}
	if r := cl.Records()[0]; r.Attempts != 0 || r.LastError != "" || !r.CreatedAt.Equal(unnamed.CreatedAt) {
		t.Fatalf("the unnamed record reads %+v; want it unchanged", r)
	}
	if err := cl.Settle(ctx, driver.Settlement{Published: []string{unnamed.ID}, Now: e.now}); err != nil {
		t.Fatalf("Settle: %v", err)
	}
	cl = claim()
	if got := claimedIDs(cl); len(got) != 0 {
		t.Fatalf("claimed %v; want nothing before the retry is due", got)
	}
	cl = e.claimWith(driver.ClaimParams{Limit: 10, Now: retry, DeletePublished: true})
	if got := claimedIDs(cl); !slices.Equal(got, []string{failed.ID}) {
		t.Fatalf("claimed %v once due; want the failed record", got)
	}
	if r := cl.Records()[0]; r.Attempts != 1 || r.LastError != "broker down" || !r.AvailableAt.Equal(retry) ||
		!r.CreatedAt.Equal(failed.CreatedAt) || r.Key != "" || len(r.Payload) != 0 || !maps.Equal(r.Headers, failed.Headers) {
		t.Fatalf("the failed record reads %+v; want it as inserted with attempts 1, its error and its retry time", r)
	}
	if err := cl.Release(ctx); err != nil {
		t.Fatal(err)
	}
	deadRecs, err := e.s.ListDead(ctx, driver.DeadFilter{All: true})
	if err != nil || len(deadRecs) != 1 || deadRecs[0].ID != dead.ID || deadRecs[0].Attempts != 1 || deadRecs[0].LastError != "rejected" ||
		!maps.Equal(deadRecs[0].Headers, dead.Headers) {
		t.Fatalf("ListDead = %+v, %v; want the dead record with its attempt and error", deadRecs, err)
	}
}

// testStoreInbox: InboxClaim reports a new claim once per (consumer, message ID), counting only committed claims;
// InboxFail counts failures and, at the limit or when told to give up, turns the count into a failed claim.
func testStoreInbox[TTx any](t *testing.T, e *storeEnv[TTx]) {
	inbox, failures := e.cfg.InboxTable, driver.Derived(e.cfg.InboxTable, "_failures")
	claim := func(commit bool, consumer, id string) (isNew bool) {
		t.Helper()
		e.inTx(commit, func(ctx context.Context, tx TTx) (err error) {
			isNew, err = e.s.InboxClaim(ctx, tx, consumer, id, e.now)
			return err
		})
		return isNew
	}
	fail := func(f driver.InboxFailure) (res driver.InboxFailResult) {
		t.Helper()
		f.Now = e.now
		e.inTx(true, func(ctx context.Context, tx TTx) (err error) {
			res, err = e.s.InboxFail(ctx, tx, f)
			return err
		})
		return res
	}
	first, rolled, failing, given := postbox.NewID(), postbox.NewID(), postbox.NewID(), postbox.NewID()
	if !claim(true, "billing", first) {
		t.Fatal("the first claim was not new")
	}
	if claim(true, "billing", first) {
		t.Fatal("a second claim of the same message was new")
	}
	if !claim(true, "shipping", first) {
		t.Fatal("another consumer's claim of the message was not new")
	}
	if !claim(false, "billing", rolled) || !claim(true, "billing", rolled) {
		t.Fatal("a claim after a rolled-back one was not new")
	}
	if n := e.count("SELECT count(*) FROM " + inbox); n != 3 {
		t.Fatalf("%d inbox rows; want the 3 committed claims", n)
	}

	if res := fail(driver.InboxFailure{Consumer: "billing", MessageID: failing, LastError: "e1", MaxFailures: 2}); res.Failures != 1 || res.Failed {
		t.Fatalf("first failure = %+v; want 1 counted, not failed", res)
	}
	if n := e.count("SELECT count(*) FROM " + failures); n != 1 {
		t.Fatalf("%d failure counts; want 1", n)
	}
	if res := fail(driver.InboxFailure{Consumer: "billing", MessageID: failing, LastError: "e2", MaxFailures: 2}); res.Failures != 2 || !res.Failed {
		t.Fatalf("second failure at MaxFailures 2 = %+v; want 2 counted and failed", res)
	}
	if c, f := e.count("SELECT count(*) FROM "+failures), e.count("SELECT count(*) FROM "+inbox+" WHERE status = 'failed'"); c != 0 || f != 1 {
		t.Fatalf("%d failure counts and %d failed claims; want the count moved onto one failed claim", c, f)
	}
	if claim(true, "billing", failing) {
		t.Fatal("a claim of a message recorded as failed was new")
	}
	if res := fail(driver.InboxFailure{Consumer: "billing", MessageID: given, LastError: "bad", Give: true}); res.Failures != 1 || !res.Failed {
		t.Fatalf("a failure that gives up = %+v; want failed at once", res)
	}
	if res := fail(driver.InboxFailure{Consumer: "billing", MessageID: first, LastError: "late"}); res.Failed {
		t.Fatalf("a failure of a message already claimed = %+v; want it not recorded as failed", res)
	}
}

// testStoreCleanup: one Cleanup call deletes at most Limit rows of each selected set, older than its cutoff, and
// never a pending record; a held cleanup lock makes it return ErrLocked.
func testStoreCleanup[TTx any](t *testing.T, e *storeEnv[TTx]) {
	ctx := context.Background()
	old := e.now.Add(-48 * time.Hour)
	var published, dead []driver.Record
	for range 3 {
		published, dead = append(published, e.record("orders")), append(dead, e.record("orders"))
	}
	e.insert(published...)
	if err := e.claim(10, e.now).Settle(ctx, driver.Settlement{Published: sortedIDs(published...), Keep: true, Now: old}); err != nil {
		t.Fatal(err)
	}
	e.insert(dead...)
	cl := e.claim(10, e.now)
	var failed []driver.Failure
	for _, id := range claimedIDs(cl) {
		failed = append(failed, driver.Failure{ID: id, Attempts: 1, LastError: "x", AvailableAt: old, Dead: true})
	}
	if err := cl.Settle(ctx, driver.Settlement{Now: e.now, Failed: failed}); err != nil {
		t.Fatal(err)
	}
	pending := []driver.Record{e.record("orders"), e.record("orders")}
	for i := range pending {
		pending[i].CreatedAt, pending[i].AvailableAt = old, old
	}
	e.insert(pending...)
	for i := range 4 {
		at := old
		if i == 3 {
			at = e.now
		}
		e.inTx(true, func(ctx context.Context, tx TTx) error {
			_, err := e.s.InboxClaim(ctx, tx, "billing", postbox.NewID(), at)
			return err
		})
	}
	for range 2 {
		e.inTx(true, func(ctx context.Context, tx TTx) error {
			_, err := e.s.InboxFail(ctx, tx, driver.InboxFailure{Consumer: "billing", MessageID: postbox.NewID(), LastError: "x", Now: old})
			return err
		})
	}

	if _, err := e.s.Cleanup(ctx, driver.CleanupParams{PublishedBefore: e.now, Limit: 0}); err == nil {
		t.Fatal("Cleanup with Limit 0: no error; want one")
	}
	if res, err := e.s.Cleanup(ctx, driver.CleanupParams{Limit: 2}); err != nil || res != (driver.CleanupResult{}) {
		t.Fatalf("Cleanup selecting nothing = %+v, %v; want nothing deleted", res, err)
	}
	before := e.now.Add(-time.Hour)
	p := driver.CleanupParams{PublishedBefore: before, DeadBefore: before, InboxBefore: before, Limit: 2}
	if m, ok := e.drv.(driver.SessionOpener); ok && e.drv.Capabilities().SkipLocked {
		d, _ := sqlstore.ByName(e.drv.Capabilities().Dialect)
		sess, err := m.Session(ctx)
		if err != nil {
			t.Fatal(err)
		}
		names := driver.Names{Outbox: e.cfg.Table, Inbox: e.cfg.InboxTable}
		if got, err := d.TryLock(ctx, sess, names, sqlstore.LockCleanup); err != nil || !got {
			t.Fatalf("TryLock = %v, %v", got, err)
		}
		if res, err := e.s.Cleanup(ctx, p); !errors.Is(err, driver.ErrLocked) || res != (driver.CleanupResult{}) {
			t.Fatalf("Cleanup while another instance holds the lock = %+v, %v; want ErrLocked and nothing deleted", res, err)
		}
		if err := d.Unlock(ctx, sess, names, sqlstore.LockCleanup); err != nil {
			t.Fatal(err)
		}
		if err := sess.Close(); err != nil {
			t.Fatal(err)
		}
	}
	for i, want := range []driver.CleanupResult{
		{Published: 2, Dead: 2, InboxClaims: 2, InboxFailures: 2},
		{Published: 1, Dead: 1, InboxClaims: 1},
		{},
	} {
		if res, err := e.s.Cleanup(ctx, p); err != nil || res != want {
			t.Fatalf("Cleanup batch %d = %+v, %v; want %+v", i+1, res, err, want)
		}
	}
	if n, pend := e.outbox("1 = 1"), e.outbox("status = 'pending'"); n != 2 || pend != 2 {
		t.Fatalf("%d rows, %d pending after cleanup; want only the 2 old pending records", n, pend)
	}
	if c, f := e.count("SELECT count(*) FROM "+e.cfg.InboxTable), e.count("SELECT count(*) FROM "+driver.Derived(e.cfg.InboxTable, "_failures")); c != 1 || f != 0 {
		t.Fatalf("%d claims and %d failure counts after cleanup; want the fresh claim only", c, f)
	}
}

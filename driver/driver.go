// Package driver is the interface between Postbox and a database. Users do not call it; they pass a driver such as
// pgxv5.New(pool) or databasesql.New(db, databasesql.Postgres) to postbox.NewClient.
//
// A driver implements Driver for its transaction type and advertises what its database can do in Capabilities.
// Every driver must pass drivertest.Exercise.
package driver

import (
	"context"
	"errors"
	"time"
)

// ErrLocked is returned by maintenance operations when another instance holds the lock for the same table set.
var ErrLocked = errors.New("postbox: another instance holds the maintenance lock")

// Capabilities describe what a driver's database can do.
type Capabilities struct {
	// Dialect is "postgres", "sqlite" or "mysql".
	Dialect string
	// SkipLocked is true when claims use FOR UPDATE SKIP LOCKED, so that several relays share a table without
	// waiting on each other. SQLite has a single writer and claims under an immediate transaction instead.
	SkipLocked bool
	// Schemas is true when tables may live in a named schema (a database, on MySQL).
	Schemas bool
	// Partitions is true when the outbox and inbox may be partitioned tables (Names.Partitioned).
	Partitions bool
}

// Driver connects Postbox to one database through one client library. TTx is the caller's transaction type
// (pgx.Tx, *sql.Tx).
type Driver[TTx any] interface {
	// Capabilities reports what the database supports.
	Capabilities() Capabilities
	// Store returns the operations on the table set names. It does no I/O, and returns an error, before any SQL
	// is built, when names fails Names.Validate or asks for what Capabilities lacks (a schema, partitions).
	Store(names Names) (Store[TTx], error)
	// Begin starts a transaction of the caller's type, for helpers that run a function in a transaction.
	Begin(ctx context.Context) (TTx, error)
	// Commit commits tx.
	Commit(ctx context.Context, tx TTx) error
	// Rollback rolls tx back. Rolling back a finished transaction is not an error.
	Rollback(ctx context.Context, tx TTx) error
}

// Store holds the statements for one table set.
type Store[TTx any] interface {
	// Insert writes records inside the caller's transaction, in one round trip, and nothing else: it never
	// commits, rolls back or notifies.
	Insert(ctx context.Context, tx TTx, recs []Record) error
	// Claim locks up to p.Limit pending records available at p.Now, oldest first, in a transaction of its own
	// that stays open until the claim is settled or released. Records locked by another claim are skipped.
	Claim(ctx context.Context, p ClaimParams) (Claim, error)

	// Migrate applies the migrations not yet applied, under a lock so that concurrent callers are safe, and
	// returns the versions it applied.
	Migrate(ctx context.Context) ([]int, error)
	// MigrationStatus lists every known migration and whether it has been applied.
	MigrationStatus(ctx context.Context) ([]MigrationState, error)
	// Migrations returns the migration SQL for this table set, for users who run their own migration tool.
	Migrations() []Migration

	// Stats counts pending and dead records per topic, splitting pending into ready and scheduled as of now.
	Stats(ctx context.Context, now time.Time) ([]TopicStats, error)
	// ListDead returns dead records matching f, oldest first (newest first with f.Newest), after f.After.
	ListDead(ctx context.Context, f DeadFilter) ([]Record, error)
	// RetryDead makes dead records matching f pending again, available at now, with attempts reset.
	RetryDead(ctx context.Context, f DeadFilter, now time.Time) (int64, error)
	// PurgeDead deletes dead records matching f.
	PurgeDead(ctx context.Context, f DeadFilter) (int64, error)
	// Cleanup deletes one batch of what p selects: at most p.Limit rows of each selected set (published records,
	// dead records, inbox claims, inbox failure counts), oldest first, in one short transaction or, where DDL and
	// long transactions are costly (MySQL), one short statement per set. It never deletes a pending record. It
	// holds the table set's cleanup lock while it deletes, and returns ErrLocked, having deleted nothing, when
	// another instance holds it. The caller calls again while a set came back full (p.Limit rows).
	Cleanup(ctx context.Context, p CleanupParams) (CleanupResult, error)

	// InboxStore holds the inbox operations.
	InboxStore[TTx]
}

// CleanupParams select the rows one Cleanup call deletes. A zero time selects none of its set.
type CleanupParams struct {
	// PublishedBefore selects published records whose PublishedAt is before it.
	PublishedBefore time.Time
	// DeadBefore selects dead records whose AvailableAt is before it. A failure sets AvailableAt to the failure
	// time plus its backoff, so a selected record died before DeadBefore.
	DeadBefore time.Time
	// InboxBefore selects inbox claims received before it and inbox failure counts last updated before it.
	InboxBefore time.Time
	// Limit bounds the rows deleted from each selected set. It must be positive.
	Limit int
}

// CleanupResult counts the rows one Cleanup call deleted, per set.
type CleanupResult struct {
	Published     int64 // published records
	Dead          int64 // dead records
	InboxClaims   int64 // inbox claims
	InboxFailures int64 // inbox failure counts
}

// ClaimParams select the records to claim.
type ClaimParams struct {
	Limit int
	Now   time.Time
	// DeletePublished promises that Settle will delete the published records (Settlement.Keep false). A store
	// may then delete the records in the claim itself, inside the claim's transaction, and write back only the
	// ones that are not published before it commits: one write per record instead of a lock and a delete. A
	// rolled-back claim must still leave every record as it was. Stores that cannot do this ignore it.
	DeletePublished bool
	// SkipTopics are topics not to claim: the paused topics (see TopicPauser). Stores that implement
	// TopicPauser honour it; an empty list must cost the claim nothing.
	SkipTopics []string
}

// Claim is a batch of records locked by one relay.
type Claim interface {
	// Records are the claimed records, oldest first.
	Records() []Record
	// Settle records the outcome of publishing the batch and ends the claim.
	Settle(ctx context.Context, s Settlement) error
	// Release ends the claim without changing any record, so the records can be claimed again.
	Release(ctx context.Context) error
}

// ChainClaimer is a Claim that can settle and claim the next batch in one round trip to the database (PostgreSQL
// through pgx). A relay draining a backlog settles each full batch with it instead of Settle and a new claim.
type ChainClaimer interface {
	Claim
	// SettleAndClaim settles like Settle and, once the settle has committed, claims the next batch with p the way
	// this claim was made (ordered or not). settleErr is the settle's error, as Settle returns it; nothing was
	// claimed then. claimErr is the next claim's error, the settle being done; next is nil then. An empty next
	// claim holds nothing.
	SettleAndClaim(ctx context.Context, s Settlement, p ClaimParams) (next Claim, settleErr, claimErr error)
}

// Settlement is the outcome of one published batch.
type Settlement struct {
	// Published are the IDs the broker acknowledged.
	Published []string
	// Keep marks published records as published (at Now) instead of deleting them.
	Keep bool
	Now  time.Time
	// Failed are the records that were not published.
	Failed []Failure
}

// Failure is one record that failed to publish.
type Failure struct {
	ID          string
	Attempts    int       // the new attempt count
	LastError   string    // the error, truncated by the caller
	AvailableAt time.Time // when to try again
	Dead        bool      // park the record instead of retrying
}

// TopicStats are the counts for one topic, as of the now passed to Stats.
type TopicStats struct {
	Topic   string
	Pending int64 // Ready + Scheduled
	// Ready are the pending records that are due or waiting to retry a failed publish.
	Ready int64
	// Scheduled are the pending records never attempted whose available_at is still ahead.
	Scheduled int64
	Dead      int64
	// OldestPending is when the longest-waiting ready record became due: its available_at when it was never
	// attempted, its created_at otherwise; zero when nothing is ready.
	OldestPending time.Time
}

// DeadFilter selects dead records: those that match every field set. An empty filter selects nothing; set All to
// select every dead record. postbox.DeadFilter documents each field.
type DeadFilter struct {
	Topic string
	IDs   []string
	All   bool
	Limit int // for ListDead; 0 means no limit

	Type          string
	Key           string
	ErrorContains string    // a substring of last_error, matched literally (no wildcards)
	FailedFrom    time.Time // available_at >= FailedFrom when set
	FailedBefore  time.Time // available_at < FailedBefore when set
	After         string    // keyset cursor for ListDead: records after this ID in the listing's order
	Newest        bool      // ListDead lists newest first
}

// Empty reports whether f selects nothing.
func (f DeadFilter) Empty() bool {
	return f.Topic == "" && len(f.IDs) == 0 && !f.All && f.Type == "" && f.Key == "" && f.ErrorContains == "" &&
		f.FailedFrom.IsZero() && f.FailedBefore.IsZero()
}

// Migration is one versioned schema change.
type Migration struct {
	Version int
	Name    string
	SQL     string
}

// MigrationState is a migration and whether it has been applied.
type MigrationState struct {
	Migration
	Applied   bool
	AppliedAt time.Time
}

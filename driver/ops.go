package driver

import (
	"context"
	"time"
)

// Operator is implemented by stores that serve an operator's tools (the CLI, a console) beyond what Store has:
// counts bounded by a cap, look-ups by ID or key, replay of published records, a cheap overview and the inbox
// view. Postbox finds it by type assertion on the Store; a call on a store without it fails with
// errors.ErrUnsupported.
type Operator interface {
	// CountDead counts the dead records f selects, reading at most limit+1 of them: a result above limit means
	// "more than limit".
	CountDead(ctx context.Context, f DeadFilter, limit int64) (int64, error)
	// FindRecords returns the records, in any state, whose ID is id (when id is set) or whose key is key (when
	// key is set), newest first, at most limit.
	FindRecords(ctx context.Context, id, key string, limit int) ([]Record, error)
	// ReplayPublished makes the published records f selects pending again, available at now, with attempts
	// reset and their published time cleared, and returns how many.
	ReplayPublished(ctx context.Context, f ReplayFilter, now time.Time) (int64, error)
	// CountPublished counts the published records f selects (f.Limit ignored), reading at most limit+1 of them.
	CountPublished(ctx context.Context, f ReplayFilter, limit int64) (int64, error)
	// Overview returns bounded counts of the table set as of now; see OverviewParams.
	Overview(ctx context.Context, p OverviewParams) (Overview, error)

	// InboxConsumers lists the consumer names that have claims or failure counts in the inbox, in name order,
	// at most limit.
	InboxConsumers(ctx context.Context, limit int) ([]string, error)
	// InboxActivity counts one consumer's claims per minute received in [since, until): processed and failed.
	InboxActivity(ctx context.Context, consumer string, since, until time.Time) ([]InboxMinute, error)
	// InboxFailing lists one consumer's failure counts (messages failing but not given up), latest first.
	InboxFailing(ctx context.Context, consumer string, limit int) ([]InboxEntry, error)
	// InboxGivenUp lists one consumer's claims recorded as failed, latest first.
	InboxGivenUp(ctx context.Context, consumer string, limit int) ([]InboxEntry, error)
	// InboxRetry deletes the failed claim of (consumer, messageID), or its failure count, so that its next
	// delivery reaches the handler again, and reports whether there was one. A processed claim is left alone.
	InboxRetry(ctx context.Context, consumer, messageID string) (bool, error)
}

// TopicPauser is implemented by stores that can pause topics: the paused set lives in a table of the table set,
// and Claim and ClaimOrdered skip ClaimParams.SkipTopics.
type TopicPauser interface {
	// PauseTopic records topic as paused by p; pausing a paused topic keeps its first record and reports false.
	PauseTopic(ctx context.Context, p PausedTopic) (bool, error)
	// ResumeTopic removes topic from the paused set and reports whether it was paused.
	ResumeTopic(ctx context.Context, topic string) (bool, error)
	// PausedTopics lists the paused topics in topic order.
	PausedTopics(ctx context.Context) ([]PausedTopic, error)
}

// PausedTopic is one row of the paused set.
type PausedTopic struct {
	Topic    string
	PausedAt time.Time
	PausedBy string // who paused it, as the caller named them; may be empty
}

// ReplayFilter selects published records to replay: those of Topic created in [From, To).
type ReplayFilter struct {
	Topic    string
	From, To time.Time
	// Limit bounds how many records one call replays; 0 means no limit.
	Limit int
}

// OverviewParams bound the work of Overview.
type OverviewParams struct {
	Now time.Time
	// Limit caps each count: a count reads at most Limit+1 index entries, and a count above Limit means "more".
	// The per-topic breakdowns, and the split of pending records into ready and scheduled, cover the oldest
	// Limit pending and dead records.
	Limit int64
	// RecentSince and RecentLimit ask for the newest published records kept since RecentSince, at most
	// RecentLimit of them (none when 0), newest first.
	RecentSince time.Time
	RecentLimit int
}

// Overview is what Store.Overview returns.
type Overview struct {
	// Pending, Dead and Published are counts capped at Limit+1. PendingEstimate, DeadEstimate and
	// PublishedEstimate are the database's statistics (PostgreSQL's reltuples of the partial indexes), -1 when
	// it has none.
	Pending, Dead, Published                         int64
	PendingEstimate, DeadEstimate, PublishedEstimate int64
	// Next is the ready record the next claim would take first: the oldest by ID that is due. Zero ID when none.
	NextID          string
	NextAvailableAt time.Time
	NextCreatedAt   time.Time
	NextAttempts    int
	// Topics are the per-topic counts among the oldest Limit pending and the oldest Limit dead records, in topic
	// order.
	Topics []TopicSample
	// Recent are the published records asked for by RecentSince and RecentLimit, newest first.
	Recent []PublishedTimes
}

// PublishedTimes are the creation and publication times of one kept published record.
type PublishedTimes struct {
	CreatedAt, PublishedAt time.Time
}

// TopicSample is one topic's share of the records Overview read.
type TopicSample struct {
	Topic         string
	Pending, Dead int64
	// Ready counts the pending records that are due (AvailableAt not after Now); Scheduled those never attempted
	// and not yet due. The rest of Pending wait for a retry.
	Ready, Scheduled int64
	// OldestWaiting is when the longest-waiting ready record among those read became due: its AvailableAt when
	// never attempted, else its CreatedAt. Zero when none of them is ready.
	OldestWaiting time.Time
}

// InboxMinute counts one consumer's claims received in one minute.
type InboxMinute struct {
	Minute    time.Time // the minute's start, UTC
	Processed int64
	Failed    int64
}

// InboxEntry is one message in a consumer's inbox that failed: a failure count, or a claim recorded as failed.
type InboxEntry struct {
	Consumer  string
	MessageID string // the inbox key: the message ID, or "source id" with ScopeBySource
	Failures  int
	LastError string
	At        time.Time // when the count was last updated, or when the message was recorded as failed
}

// Heartbeater is implemented by stores whose table set has the relays table (migration 5): running relays record
// a heartbeat in it, which operators' tools read.
type Heartbeater interface {
	// Heartbeat records h, replacing the instance's last record but for its StartedAt.
	Heartbeat(ctx context.Context, h RelayHeartbeat) error
	// Heartbeats lists every recorded relay, in instance order.
	Heartbeats(ctx context.Context) ([]RelayHeartbeat, error)
	// ForgetHeartbeats deletes the records last seen before t, and returns how many.
	ForgetHeartbeats(ctx context.Context, before time.Time) (int64, error)
}

// RelayHeartbeat is one row of the relays table.
type RelayHeartbeat struct {
	Instance          string
	StartedAt, SeenAt time.Time
	Version           string
	// State is the relay's own account of itself, a JSON document the core writes and reads.
	State string
}

package postbox

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/postbox-go/postbox/driver"
)

// DefaultOverviewLimit is the cap Overview uses when given 0.
const DefaultOverviewLimit = 10_000

// Overview is a cheap summary of the outbox for a page that loads often. Unlike Stats, which counts every
// pending and dead record, it reads a bounded number of index entries whatever the table's size.
type Overview struct {
	// Pending, Dead and Published count the records in each state, up to the limit given to Overview (More set
	// beyond it). Published counts only records kept with RelayConfig.KeepPublished.
	Pending, Dead, Published Count
	// Ready and Scheduled split Pending: Ready counts the messages due now (AvailableAt not after now), Scheduled
	// those never attempted and due later (EnqueueOptions.Delay or At). The rest of Pending wait for a retry
	// after a failed attempt. When Pending has More they are counted over the oldest limit pending messages and
	// have More set: there may be more of each beyond them.
	Ready, Scheduled Count
	// Recent covers the messages published in the last RecentWindow, from the records kept with
	// RelayConfig.KeepPublished; zero when none are kept.
	Recent Recent
	// PendingEstimate, DeadEstimate and PublishedEstimate are the database's own row estimates for each state,
	// from its statistics, free to read at any size: on PostgreSQL the reltuples of the partial index of that
	// state, as of the last VACUUM or ANALYZE (autovacuum keeps them within about a tenth of the truth on a busy
	// table). -1 where the database keeps none (MySQL, SQLite, or a PostgreSQL table not yet analysed): use the
	// capped count.
	PendingEstimate, DeadEstimate, PublishedEstimate int64
	// OldestReady is when the message the next claim takes first became due: its AvailableAt when never
	// attempted, else its creation time (see TopicStats.OldestPending). Zero when nothing is ready. It is the
	// relay's lag: a time far in the past means no relay keeps up, or the message's topic is paused (paused
	// topics' messages are not left out).
	OldestReady time.Time
	// Topics break the counts down by topic, in topic order, over the oldest Limit pending and the oldest Limit
	// dead records: exact when Pending and Dead have no More, otherwise the head of each queue. Paused topics
	// are listed even when none of their records were read.
	Topics []TopicOverview
	// Paused are the paused topics; nil when the driver cannot pause.
	Paused []PausedTopic
}

// RecentWindow is the span of Overview.Recent.
const RecentWindow = 5 * time.Minute

// RecentLimit is the most kept published records Overview reads for Overview.Recent.
const RecentLimit = 1000

// Recent describes the messages published lately, from the published records kept with
// RelayConfig.KeepPublished. Relays that delete what they publish leave nothing to read here: their figures
// reach a program only through RelayConfig.Observer.
type Recent struct {
	// Published counts the kept records published in the last RecentWindow, up to the smaller of RecentLimit and
	// Overview's limit (More set beyond it).
	Published Count
	// Span is the time the figures cover, ending now: RecentWindow, or less when Published has More (from the
	// publication of the first record left unread).
	Span time.Duration
	// PerSecond is Published.N over Span.
	PerSecond float64
	// LatencyP50 and LatencyP95 are percentiles of the enqueue-to-publish time (publication minus creation) of
	// the records counted; zero when none. A message enqueued with a delay counts its delay.
	LatencyP50, LatencyP95 time.Duration
}

// recent summarises rows, the newest published records since now-RecentWindow, newest first, read with a cap
// of limit+1.
func recent(rows []driver.PublishedTimes, now time.Time, limit int) Recent {
	r := Recent{Published: capped(int64(len(rows)), int64(limit)), Span: RecentWindow}
	if r.Published.More {
		r.Span = now.Sub(rows[limit].PublishedAt)
		rows = rows[:limit]
	}
	if len(rows) == 0 {
		return r
	}
	if r.Span > 0 {
		r.PerSecond = float64(len(rows)) / r.Span.Seconds()
	}
	lat := make([]time.Duration, len(rows))
	for i, row := range rows {
		lat[i] = row.PublishedAt.Sub(row.CreatedAt)
	}
	slices.Sort(lat)
	r.LatencyP50, r.LatencyP95 = lat[len(lat)*50/100], lat[min(len(lat)-1, len(lat)*95/100)]
	return r
}

// TopicOverview is one topic's share of the records Overview read.
type TopicOverview struct {
	Topic         string
	Pending, Dead int64
	// Paused reports that relays hold the topic's messages back (PauseTopic).
	Paused bool
	// OldestWaiting is when the topic's longest-waiting ready message among those read became due: its
	// AvailableAt when never attempted, else its creation time. Zero when none is ready. Now minus it is how
	// long the topic has waited for a relay.
	OldestWaiting time.Time
}

// Overview summarises the outbox in a bounded number of reads: each count reads at most limit+1 index entries
// (0 means DefaultOverviewLimit), the per-topic breakdowns and the ready and scheduled split the oldest limit
// pending and dead records, the lag one record, Recent at most RecentLimit+1 published records, and the
// statistics estimates a catalogue row. It costs a few tens of milliseconds at a million pending records with
// the default limit.
func (c *Client[TTx]) Overview(ctx context.Context, limit int64) (Overview, error) {
	if limit <= 0 {
		limit = DefaultOverviewLimit
	}
	op, err := c.operator("summarise the outbox")
	if err != nil {
		return Overview{}, err
	}
	now := c.cfg.Clock.Now()
	recentLimit := int(min(limit, RecentLimit))
	o, err := op.Overview(ctx, driver.OverviewParams{Now: now, Limit: limit, RecentSince: now.Add(-RecentWindow), RecentLimit: recentLimit + 1})
	if err != nil {
		return Overview{}, fmt.Errorf("postbox: overview: %w", err)
	}
	out := Overview{Pending: capped(o.Pending, limit), Dead: capped(o.Dead, limit), Published: capped(o.Published, limit),
		PendingEstimate: o.PendingEstimate, DeadEstimate: o.DeadEstimate, PublishedEstimate: o.PublishedEstimate}
	if o.Published > 0 {
		out.Recent = recent(o.Recent, now, recentLimit)
	}
	for _, t := range o.Topics {
		out.Ready.N += t.Ready
		out.Scheduled.N += t.Scheduled
	}
	out.Ready.More, out.Scheduled.More = out.Pending.More, out.Pending.More
	if o.NextID != "" {
		out.OldestReady = o.NextAvailableAt
		if o.NextAttempts > 0 {
			out.OldestReady = o.NextCreatedAt
		}
	}
	paused := map[string]bool{}
	if p, ok := c.store.(driver.TopicPauser); ok {
		rows, err := p.PausedTopics(ctx)
		if err != nil {
			return Overview{}, fmt.Errorf("postbox: overview: paused topics: %w", err)
		}
		out.Paused = make([]PausedTopic, len(rows))
		for i, r := range rows {
			out.Paused[i] = PausedTopic(r)
			paused[r.Topic] = true
		}
	}
	for _, t := range o.Topics {
		out.Topics = append(out.Topics, TopicOverview{Topic: t.Topic, Pending: t.Pending, Dead: t.Dead, Paused: paused[t.Topic],
			OldestWaiting: t.OldestWaiting})
		delete(paused, t.Topic)
	}
	for _, p := range out.Paused {
		if paused[p.Topic] {
			out.Topics = append(out.Topics, TopicOverview{Topic: p.Topic, Paused: true})
		}
	}
	slices.SortFunc(out.Topics, func(a, b TopicOverview) int { return strings.Compare(a.Topic, b.Topic) })
	return out, nil
}

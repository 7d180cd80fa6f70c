package sqlstore

import (
	"context"
	"slices"
	"time"

	"github.com/postbox-go/postbox/driver"
)

// estimatingDialect is a dialect whose database keeps row estimates an overview may read for free (PostgreSQL).
type estimatingDialect interface {
	// estimate returns the query reading the estimated row count of the index named by its argument, -1 for
	// none.
	estimate() string
}

// Overview implements driver.Operator with bounded reads: a capped count per state through the index of that
// state, the head of the claim order, and per-topic counts over the head of the pending and dead records.
func (s *store[TTx]) Overview(ctx context.Context, p driver.OverviewParams) (driver.Overview, error) {
	o := driver.Overview{PendingEstimate: -1, DeadEstimate: -1, PublishedEstimate: -1}
	for _, c := range []struct {
		status string
		n, est *int64
		index  string
		order  string
	}{
		{"pending", &o.Pending, &o.PendingEstimate, "_pending_idx", "o.id"},
		{"dead", &o.Dead, &o.DeadEstimate, "_dead_id_idx", "o.id"},
		{"published", &o.Published, &o.PublishedEstimate, "_published_idx", "o.published_at"},
	} {
		// The status is written into the statement, not passed: a partial index serves only a condition the
		// planner can see, and a generic plan sees no parameter's value. The order is the column of the state's
		// index: without it PostgreSQL, taking the state's rows to be spread evenly through the table, may
		// choose to scan the table for the first Limit of them.
		a := &args{d: s.d}
		n, err := s.countUpTo(ctx, "SELECT 1 FROM "+s.d.statusScan(s.outbox)+" WHERE o.status = '"+c.status+"' ORDER BY "+c.order, a, p.Limit)
		if err != nil {
			return o, err
		}
		*c.n = n
		if e, ok := s.d.(estimatingDialect); ok {
			index := table(s.d, s.n, driver.Derived(s.n.Outbox, c.index))
			if err := s.b.Pool().Query(ctx, e.estimate(), []any{index}, func(scan func(...any) error) error {
				return scan(c.est)
			}); err != nil {
				return o, err
			}
		}
	}
	a := &args{d: s.d}
	q := "SELECT " + s.d.recordCols() + " FROM " + s.d.statusScan(s.outbox) + " WHERE o.status = 'pending'" +
		" AND o.available_at <= " + a.add(s.d.timeArg(p.Now)) + " ORDER BY o.id LIMIT 1"
	var next []driver.Record
	if err := s.b.Pool().Query(ctx, q, a.list, scanRecords(s.d, &next)); err != nil {
		return o, err
	}
	if len(next) == 1 {
		o.NextID, o.NextAvailableAt, o.NextCreatedAt, o.NextAttempts = next[0].ID, next[0].AvailableAt, next[0].CreatedAt, next[0].Attempts
	}
	topics := map[string]*driver.TopicSample{}
	for _, status := range []string{"pending", "dead"} {
		a := &args{d: s.d}
		q := "SELECT h.topic, count(*), SUM(CASE WHEN h.available_at <= " + a.add(s.d.timeArg(p.Now)) + " THEN 1 ELSE 0 END)," +
			" SUM(CASE WHEN h.attempts = 0 AND h.available_at > " + a.add(s.d.timeArg(p.Now)) + " THEN 1 ELSE 0 END)," +
			" MIN(CASE WHEN h.available_at <= " + a.add(s.d.timeArg(p.Now)) +
			" THEN CASE WHEN h.attempts > 0 THEN h.created_at ELSE h.available_at END END)" +
			" FROM (SELECT o.topic, o.available_at, o.attempts, o.created_at FROM " + s.d.statusScan(s.outbox) +
			" WHERE o.status = '" + status + "' ORDER BY o.id LIMIT " + a.add(p.Limit) + ") AS h GROUP BY h.topic"
		err := s.b.Pool().Query(ctx, q, a.list, func(scan func(...any) error) error {
			var topic string
			var n, ready, scheduled int64
			oldest, oldestDest := s.d.nullTimeDest()
			if err := scan(&topic, &n, &ready, &scheduled, oldestDest); err != nil {
				return err
			}
			t := topics[topic]
			if t == nil {
				t = &driver.TopicSample{Topic: topic}
				topics[topic] = t
			}
			if status == "pending" {
				t.Pending, t.Ready, t.Scheduled, t.OldestWaiting = n, ready, scheduled, oldest()
			} else {
				t.Dead = n
			}
			return nil
		})
		if err != nil {
			return o, err
		}
	}
	for _, t := range topics {
		o.Topics = append(o.Topics, *t)
	}
	if p.RecentLimit > 0 {
		// Newest first through the index of published records by publication time, so the read stops after
		// RecentLimit entries whatever the number kept.
		a := &args{d: s.d}
		q := "SELECT o.created_at, o.published_at FROM " + s.outbox + " AS o WHERE o.status = 'published'" +
			" AND o.published_at >= " + a.add(s.d.timeArg(p.RecentSince)) + " ORDER BY o.published_at DESC LIMIT " + a.add(p.RecentLimit)
		err := s.b.Pool().Query(ctx, q, a.list, func(scan func(...any) error) error {
			created, createdDest := s.d.timeDest()
			published, publishedDest := s.d.timeDest()
			if err := scan(createdDest, publishedDest); err != nil {
				return err
			}
			o.Recent = append(o.Recent, driver.PublishedTimes{CreatedAt: created(), PublishedAt: published()})
			return nil
		})
		if err != nil {
			return o, err
		}
	}
	return o, nil
}

// PauseTopic implements driver.TopicPauser.
func (s *store[TTx]) PauseTopic(ctx context.Context, p driver.PausedTopic) (bool, error) {
	q := s.d.insertIgnore(s.pausedTable(), "(topic, paused_at, paused_by)", 3)
	n, err := s.b.Pool().Exec(ctx, q, p.Topic, s.d.timeArg(p.PausedAt), p.PausedBy)
	return n == 1, err
}

// ResumeTopic implements driver.TopicPauser.
func (s *store[TTx]) ResumeTopic(ctx context.Context, topic string) (bool, error) {
	n, err := s.b.Pool().Exec(ctx, "DELETE FROM "+s.pausedTable()+" WHERE topic = "+s.d.ph(1), topic)
	return n == 1, err
}

// PausedTopics implements driver.TopicPauser.
func (s *store[TTx]) PausedTopics(ctx context.Context) ([]driver.PausedTopic, error) {
	var out []driver.PausedTopic
	err := s.b.Pool().Query(ctx, "SELECT topic, paused_at, paused_by FROM "+s.pausedTable()+" ORDER BY topic", nil,
		func(scan func(...any) error) error {
			var p driver.PausedTopic
			at, dest := s.d.timeDest()
			if err := scan(&p.Topic, dest, &p.PausedBy); err != nil {
				return err
			}
			p.PausedAt = at()
			out = append(out, p)
			return nil
		})
	return out, err
}

func (s *store[TTx]) pausedTable() string {
	return table(s.d, s.n, driver.Derived(s.n.Outbox, "_paused"))
}

func (s *store[TTx]) failuresTable() string {
	return table(s.d, s.n, driver.Derived(s.n.Inbox, "_failures"))
}

// InboxConsumers implements driver.Operator. It reads the next name after the last one from the primary key of
// the claims and of the failure counts, one probe per name, so it never reads a consumer's claims.
func (s *store[TTx]) InboxConsumers(ctx context.Context, limit int) ([]string, error) {
	var out []string
	seen := map[string]bool{}
	for _, t := range []string{table(s.d, s.n, s.n.Inbox), s.failuresTable()} {
		q := "SELECT min(consumer) FROM " + t + " WHERE consumer > " + s.d.ph(1)
		last := ""
		for range limit {
			var name *string
			if err := s.b.Pool().Query(ctx, q, []any{last}, func(scan func(...any) error) error { return scan(&name) }); err != nil {
				return nil, err
			}
			if name == nil {
				break
			}
			last = *name
			if !seen[last] {
				seen[last] = true
				out = append(out, last)
			}
		}
	}
	slices.Sort(out)
	if len(out) > limit {
		out = out[:limit]
	}
	return out, nil
}

// InboxActivity implements driver.Operator through the index of claims by received time.
func (s *store[TTx]) InboxActivity(ctx context.Context, consumer string, since, until time.Time) ([]driver.InboxMinute, error) {
	a := &args{d: s.d}
	q := "SELECT m.minute, SUM(CASE WHEN m.status = 'processed' THEN 1 ELSE 0 END), SUM(CASE WHEN m.status = 'failed' THEN 1 ELSE 0 END)" +
		" FROM (SELECT " + s.d.minuteOf("received_at") + " AS minute, status FROM " + table(s.d, s.n, s.n.Inbox) +
		" WHERE received_at >= " + a.add(s.d.timeArg(since)) + " AND received_at < " + a.add(s.d.timeArg(until)) +
		" AND consumer = " + a.add(consumer) + ") AS m GROUP BY m.minute ORDER BY m.minute"
	var out []driver.InboxMinute
	err := s.b.Pool().Query(ctx, q, a.list, func(scan func(...any) error) error {
		var m driver.InboxMinute
		var minute int64
		if err := scan(&minute, &m.Processed, &m.Failed); err != nil {
			return err
		}
		m.Minute = time.Unix(minute*60, 0).UTC()
		out = append(out, m)
		return nil
	})
	return out, err
}

// InboxFailing implements driver.Operator.
func (s *store[TTx]) InboxFailing(ctx context.Context, consumer string, limit int) ([]driver.InboxEntry, error) {
	q := "SELECT consumer, message_id, failures, last_error, updated_at FROM " + s.failuresTable() +
		" WHERE consumer = " + s.d.ph(1) + " ORDER BY updated_at DESC LIMIT " + s.d.ph(2)
	return s.inboxEntries(ctx, q, consumer, limit)
}

// InboxGivenUp implements driver.Operator through the index of failed claims (migration 4).
func (s *store[TTx]) InboxGivenUp(ctx context.Context, consumer string, limit int) ([]driver.InboxEntry, error) {
	q := "SELECT consumer, message_id, failures, last_error, received_at FROM " + table(s.d, s.n, s.n.Inbox) +
		" WHERE status = 'failed' AND consumer = " + s.d.ph(1) + " ORDER BY received_at DESC LIMIT " + s.d.ph(2)
	return s.inboxEntries(ctx, q, consumer, limit)
}

func (s *store[TTx]) inboxEntries(ctx context.Context, q, consumer string, limit int) ([]driver.InboxEntry, error) {
	var out []driver.InboxEntry
	err := s.b.Pool().Query(ctx, q, []any{consumer, limit}, func(scan func(...any) error) error {
		var e driver.InboxEntry
		at, dest := s.d.timeDest()
		if err := scan(&e.Consumer, &e.MessageID, &e.Failures, &e.LastError, dest); err != nil {
			return err
		}
		e.At = at()
		out = append(out, e)
		return nil
	})
	return out, err
}

// InboxRetry implements driver.Operator in one transaction, queued behind claimers of the same key as they queue
// behind each other (see lockInboxKey).
func (s *store[TTx]) InboxRetry(ctx context.Context, consumer, messageID string) (bool, error) {
	var n int64
	err := inTx(ctx, s.b, func(tx Conn) error {
		if err := s.d.lockInboxKey(ctx, tx, s.n, consumer, messageID); err != nil {
			return err
		}
		p := s.d.ph
		claims, err := tx.Exec(ctx, "DELETE FROM "+table(s.d, s.n, s.n.Inbox)+" WHERE consumer = "+p(1)+
			" AND message_id = "+p(2)+" AND status = 'failed'", consumer, messageID)
		if err != nil {
			return err
		}
		counts, err := tx.Exec(ctx, "DELETE FROM "+s.failuresTable()+" WHERE consumer = "+p(1)+" AND message_id = "+p(2),
			consumer, messageID)
		n = claims + counts
		return err
	})
	return n > 0, err
}

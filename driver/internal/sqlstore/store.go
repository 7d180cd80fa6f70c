package sqlstore

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"sync/atomic"
	"time"

	"github.com/postbox-go/postbox/driver"
)

// store implements driver.Store on a Backend, in the SQL of its Dialect.
type store[TTx any] struct {
	b Backend[TTx]
	d Dialect
	n driver.Names

	outbox      string // quoted, qualified
	claim       string
	deleteClaim string       // the claim that deletes what it returns, where the dialect has one
	writeBack   atomic.Int32 // whether the store's role may insert the rows a deleting claim writes back: 0 unknown, 1 yes, -1 no
	peek        string       // is anything claimable?
}

// New returns the store for the table set n. It validates n first, so that no SQL is ever built from a name that
// is not a plain identifier.
func New[TTx any](b Backend[TTx], d Dialect, n driver.Names) (driver.Store[TTx], error) {
	if err := n.ValidateFor(d.Capabilities()); err != nil {
		return nil, err
	}
	s := &store[TTx]{b: b, d: d, n: n, outbox: table(d, n, n.Outbox)}
	s.claim = d.claimQuery(s.outbox, 0)
	if dd, ok := d.(deletingDialect); ok {
		s.deleteClaim = dd.deleteClaimQuery(s.outbox, 0)
	}
	s.peek = "SELECT 1 FROM " + s.outbox + " WHERE status = 'pending' AND available_at <= " + d.ph(1) + " LIMIT 1"
	if nt, ok := d.(notifyingDialect); ok {
		return notifyingStore[TTx]{s, nt}, nil
	}
	return s, nil
}

// ClaimSQL is the query a relay claims a batch with on table set n, for review and EXPLAIN. Its arguments are the
// current time and the batch size.
func ClaimSQL(d Dialect, n driver.Names) string {
	return d.claimQuery(table(d, n, n.Outbox), 0)
}

// OrderedClaimSQL is the query an ordered relay claims a batch with on table set n (which needs n.Ordered's
// index), for review and EXPLAIN, with deadHoldsKey as RelayConfig.DeadHoldsKey. Its arguments are ClaimSQL's.
func OrderedClaimSQL(d Dialect, n driver.Names, deadHoldsKey bool) string {
	return d.orderedClaimQuery(newOrderedTable(d, n), deadHoldsKey, 0)
}

func (s *store[TTx]) Insert(ctx context.Context, tx TTx, recs []driver.Record) error {
	return s.d.insert(ctx, s.b.Conn(tx), s.outbox, recs)
}

// insertArgs are the arguments of one record's row, in the order of insertColumns.
func insertArgs(d Dialect, r driver.Record) ([]any, error) {
	h, err := encodeHeaders(r.Headers)
	if err != nil {
		return nil, err
	}
	return []any{d.idArg(r.ID), r.Topic, r.Key, r.Type, payloadArg(r.Payload), h, d.timeArg(r.AvailableAt), d.timeArg(r.CreatedAt)}, nil
}

// scanRecords returns a row callback that appends each record scanned from recordCols to out. Its destinations
// are made once and reused for every row: a claim scans hundreds of rows, and a set of destinations per row was
// the relay's largest cost in the client (docs/PERFORMANCE.md).
func scanRecords(d Dialect, out *[]driver.Record) func(scan func(...any) error) error {
	var (
		r       driver.Record // Headers is never scanned: each row's map is its own
		headers *string
		status  string
	)
	id, idDest := d.idDest()
	avail, availDest := d.timeDest()
	created, createdDest := d.timeDest()
	published, publishedDest := d.nullTimeDest()
	dests := []any{idDest, &r.Topic, &r.Key, &r.Type, &r.Payload, &headers, &status, &r.Attempts, &r.LastError,
		availDest, createdDest, publishedDest}
	return func(scan func(...any) error) error {
		if err := scan(dests...); err != nil {
			return err
		}
		rec := r
		rec.ID = id()
		if headers != nil {
			if err := json.Unmarshal([]byte(*headers), &rec.Headers); err != nil {
				return fmt.Errorf("postbox: record %s has malformed headers: %w", rec.ID, err)
			}
		}
		rec.Status, rec.AvailableAt, rec.CreatedAt, rec.PublishedAt = driver.Status(status), avail(), created(), published()
		*out = append(*out, rec)
		return nil
	}
}

func (s *store[TTx]) Stats(ctx context.Context, now time.Time) ([]driver.TopicStats, error) {
	var out []driver.TopicStats
	// A never-attempted record is scheduled until its available_at, and waits from then on; a record that failed
	// has been waiting since it was created, backoff included, since its delay is the broker's.
	due := "status = 'pending' AND attempts = 0 AND available_at <= " + s.d.ph(1)
	ahead := "status = 'pending' AND attempts = 0 AND available_at > " + s.d.ph(2)
	q := "SELECT topic, SUM(CASE WHEN status = 'pending' THEN 1 ELSE 0 END)," +
		" SUM(CASE WHEN " + ahead + " THEN 1 ELSE 0 END)," +
		" SUM(CASE WHEN status = 'dead' THEN 1 ELSE 0 END)," +
		" MIN(CASE WHEN " + due + " THEN available_at WHEN status = 'pending' AND attempts > 0 THEN created_at END)" +
		" FROM " + s.outbox + " WHERE status IN ('pending', 'dead') GROUP BY topic ORDER BY topic"
	t := s.d.timeArg(now)
	err := s.b.Pool().Query(ctx, q, []any{t, t}, func(scan func(...any) error) error {
		var t driver.TopicStats
		oldest, dest := s.d.nullTimeDest()
		if err := scan(&t.Topic, &t.Pending, &t.Scheduled, &t.Dead, dest); err != nil {
			return err
		}
		t.Ready, t.OldestPending = t.Pending-t.Scheduled, oldest()
		out = append(out, t)
		return nil
	})
	return out, err
}

// Claimable implements driver.Peeker with one statement outside any transaction.
func (s *store[TTx]) Claimable(ctx context.Context, now time.Time) (bool, error) {
	found := false
	err := s.b.Pool().Query(ctx, s.peek, []any{s.d.timeArg(now)}, func(func(...any) error) error {
		found = true
		return nil
	})
	return found, err
}

// notifyingDialect is a dialect whose database can wake listening relays when a transaction commits (PostgreSQL).
type notifyingDialect interface {
	// insertNotify is insert plus a wake-up on channel, delivered if and when the transaction commits.
	insertNotify(ctx context.Context, c Conn, outbox, channel string, recs []driver.Record) error
}

// notifyingStore is a store whose dialect can notify: it implements driver.Notifier.
type notifyingStore[TTx any] struct {
	*store[TTx]
	nt notifyingDialect
}

// InsertNotify implements driver.Notifier.
func (s notifyingStore[TTx]) InsertNotify(ctx context.Context, tx TTx, recs []driver.Record) error {
	return s.nt.insertNotify(ctx, s.b.Conn(tx), s.outbox, s.n.Channel(), recs)
}

// insertValues writes recs with multi-row VALUES statements ("?" placeholders), as many rows each as chunk allows
// (at least one).
func insertValues(ctx context.Context, c Conn, d Dialect, outbox, cols string, recs []driver.Record, chunk func([]driver.Record) int) error {
	for len(recs) > 0 {
		n := chunk(recs)
		var b strings.Builder
		b.WriteString("INSERT INTO " + outbox + " " + cols + " VALUES ")
		args := make([]any, 0, n*8)
		for i, r := range recs[:n] {
			if i > 0 {
				b.WriteString(", ")
			}
			b.WriteString("(?, ?, ?, ?, ?, ?, ?, ?)")
			a, err := insertArgs(d, r)
			if err != nil {
				return err
			}
			args = append(args, a...)
		}
		if _, err := c.Exec(ctx, b.String(), args...); err != nil {
			return err
		}
		recs = recs[n:]
	}
	return nil
}

package sqlstore

import (
	"context"
	"strconv"
	"strings"
	"time"

	"github.com/postbox-go/postbox/driver"
)

// args collects a statement's arguments and renders each one's placeholder, so that the text and the arguments
// stay in step on databases that number placeholders and on those that do not.
type args struct {
	d    Dialect
	list []any
}

// add appends v and returns its placeholder.
func (a *args) add(v any) string {
	a.list = append(a.list, v)
	return a.d.ph(len(a.list))
}

// in renders "col IN (...)" over ids and appends their arguments.
func (a *args) in(col string, ids []string) string {
	q, more := a.d.inList(col, ids, len(a.list)+1)
	a.list = append(a.list, more...)
	return q
}

// deadWhere renders the WHERE clause selecting the dead records of the outbox aliased o that f selects, without
// its cursor, appending its arguments to a.
func (s *store[TTx]) deadWhere(f driver.DeadFilter, a *args) string {
	where := " WHERE o.status = 'dead'"
	if f.Topic != "" {
		where += " AND o.topic = " + a.add(f.Topic)
	}
	if f.Type != "" {
		where += " AND o.type = " + a.add(f.Type)
	}
	if f.Key != "" {
		where += " AND o." + s.d.QuoteIdent("key") + " = " + a.add(f.Key)
	}
	if f.ErrorContains != "" {
		a.list = append(a.list, f.ErrorContains)
		where += " AND " + s.d.containsText("o.last_error", len(a.list))
	}
	if !f.FailedFrom.IsZero() {
		where += " AND o.available_at >= " + a.add(s.d.timeArg(f.FailedFrom))
	}
	if !f.FailedBefore.IsZero() {
		where += " AND o.available_at < " + a.add(s.d.timeArg(f.FailedBefore))
	}
	if len(f.IDs) > 0 {
		where += " AND " + a.in("o.id", f.IDs)
	}
	return where
}

// ListDead reads in id order (descending for f.Newest) from the index of dead records by id, by topic and id or by
// key and id (PostgreSQL, SQLite) or by status and id (MySQL), so a page costs its own rows whatever the number of
// dead records.
func (s *store[TTx]) ListDead(ctx context.Context, f driver.DeadFilter) ([]driver.Record, error) {
	if f.Empty() {
		return nil, nil
	}
	a := &args{d: s.d}
	where := s.deadWhere(f, a)
	order, after := " ORDER BY o.id", " > "
	if f.Newest {
		order, after = " ORDER BY o.id DESC", " < "
	}
	if f.After != "" {
		where += " AND o.id" + after + a.add(s.d.idArg(f.After))
	}
	q := "SELECT " + s.d.recordCols() + " FROM " + s.d.statusScan(s.outbox) + where + order
	if f.Limit > 0 {
		q += " LIMIT " + strconv.Itoa(f.Limit)
	}
	var out []driver.Record
	return out, s.b.Pool().Query(ctx, q, a.list, scanRecords(s.d, &out))
}

// CountDead implements driver.Operator.
func (s *store[TTx]) CountDead(ctx context.Context, f driver.DeadFilter, limit int64) (int64, error) {
	if f.Empty() {
		return 0, nil
	}
	a := &args{d: s.d}
	where := s.deadWhere(f, a)
	// Ordered by id, as the indexes of dead records are (by id, by topic and id, by key and id), so that the
	// count reads index entries in their order and stops after limit+1; unordered, PostgreSQL may scan the table.
	return s.countUpTo(ctx, "SELECT 1 FROM "+s.d.statusScan(s.outbox)+where+" ORDER BY o.id", a, limit)
}

// countUpTo counts the rows of query, reading at most limit+1 of them.
func (s *store[TTx]) countUpTo(ctx context.Context, query string, a *args, limit int64) (int64, error) {
	q := "SELECT count(*) FROM (" + query + " LIMIT " + a.add(limit+1) + ") AS c"
	var n int64
	err := s.b.Pool().Query(ctx, q, a.list, func(scan func(...any) error) error { return scan(&n) })
	return n, err
}

func (s *store[TTx]) RetryDead(ctx context.Context, f driver.DeadFilter, now time.Time) (int64, error) {
	if f.Empty() {
		return 0, nil
	}
	a := &args{d: s.d}
	set := " SET status = 'pending', attempts = 0, available_at = " + a.add(s.d.timeArg(now))
	where := s.deadWhere(f, a)
	return s.b.Pool().Exec(ctx, "UPDATE "+s.outbox+" AS o"+set+where, a.list...)
}

func (s *store[TTx]) PurgeDead(ctx context.Context, f driver.DeadFilter) (int64, error) {
	if f.Empty() {
		return 0, nil
	}
	a := &args{d: s.d}
	where := s.deadWhere(f, a)
	return s.b.Pool().Exec(ctx, s.deleteAliased()+where, a.list...)
}

// deleteAliased starts a DELETE from the outbox aliased o: MySQL names the table to delete from when it is
// aliased.
func (s *store[TTx]) deleteAliased() string {
	if s.d.Capabilities().Dialect == "mysql" {
		return "DELETE o FROM " + s.outbox + " AS o"
	}
	return "DELETE FROM " + s.outbox + " AS o"
}

// FindRecords implements driver.Operator.
func (s *store[TTx]) FindRecords(ctx context.Context, id, key string, limit int) ([]driver.Record, error) {
	a := &args{d: s.d}
	var where []string
	if id != "" {
		where = append(where, "o.id = "+a.add(s.d.idArg(id)))
	}
	if key != "" {
		where = append(where, "o."+s.d.QuoteIdent("key")+" = "+a.add(key))
	}
	if len(where) == 0 {
		return nil, nil
	}
	q := "SELECT " + s.d.recordCols() + " FROM " + s.outbox + " AS o WHERE " + strings.Join(where, " AND ") +
		" ORDER BY o.id DESC LIMIT " + a.add(limit)
	var out []driver.Record
	return out, s.b.Pool().Query(ctx, q, a.list, scanRecords(s.d, &out))
}

// publishedWhere renders the condition selecting the published records of the outbox aliased o that f selects.
func (s *store[TTx]) publishedWhere(f driver.ReplayFilter, a *args) string {
	where := " WHERE o.status = 'published' AND o.topic = " + a.add(f.Topic)
	if !f.From.IsZero() {
		where += " AND o.created_at >= " + a.add(s.d.timeArg(f.From))
	}
	if !f.To.IsZero() {
		where += " AND o.created_at < " + a.add(s.d.timeArg(f.To))
	}
	return where
}

// CountPublished implements driver.Operator.
func (s *store[TTx]) CountPublished(ctx context.Context, f driver.ReplayFilter, limit int64) (int64, error) {
	a := &args{d: s.d}
	where := s.publishedWhere(f, a)
	return s.countUpTo(ctx, "SELECT 1 FROM "+s.outbox+" AS o"+where, a, limit)
}

// ReplayPublished implements driver.Operator. A limited replay takes the oldest records first, so that repeated
// calls walk the range.
func (s *store[TTx]) ReplayPublished(ctx context.Context, f driver.ReplayFilter, now time.Time) (int64, error) {
	a := &args{d: s.d}
	set := " SET status = 'pending', attempts = 0, available_at = " + a.add(s.d.timeArg(now)) + ", published_at = NULL"
	where := s.publishedWhere(f, a)
	if f.Limit <= 0 {
		return s.b.Pool().Exec(ctx, "UPDATE "+s.outbox+" AS o"+set+where, a.list...)
	}
	if s.d.Capabilities().Dialect == "mysql" {
		// MySQL cannot update a table it selects from in a subquery, and takes ORDER BY and LIMIT on UPDATE.
		q := "UPDATE " + s.outbox + " AS o" + set + where + " ORDER BY o.id LIMIT " + a.add(f.Limit)
		return s.b.Pool().Exec(ctx, q, a.list...)
	}
	q := "UPDATE " + s.outbox + " AS o" + set + " WHERE o.id IN (SELECT o.id FROM " + s.outbox + " AS o" + where +
		" ORDER BY o.id LIMIT " + a.add(f.Limit) + ")"
	return s.b.Pool().Exec(ctx, q, a.list...)
}

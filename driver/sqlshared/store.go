package sqlshared

import (
	"context"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/postbox-go/postbox/driver"
)

// sqliteMaxRowsPerInsert keeps a multi-row insert under SQLite's limit of 32766 bound variables.
const sqliteMaxRowsPerInsert = 1000

// mysqlClaimIndex is the name of the MySQL index that serves the claim query; see NewStore.
const mysqlClaimIndex = "claim_idx"

// store implements driver.Store on a Backend.
type store[TTx any] struct {
	b Backend[TTx]
	d Dialect
	n driver.Names

	outbox     string // quoted, qualified
	cols       string // select list of a record
	insertCols string
	insertOne  string
	insertMany string // PostgreSQL only: unnest of arrays
	claim      string
	peek       string // is anything claimable?
}

// NewStore returns the store for one validated table set.
func NewStore[TTx any](b Backend[TTx], d Dialect, n driver.Names) driver.Store[TTx] {
	s := &store[TTx]{b: b, d: d, n: n, outbox: d.table(n, n.Outbox)}
	s.cols = d.recordCols()
	insertCols := "(id, topic, key, type, payload, headers, available_at, created_at)"
	if d.my() {
		insertCols = strings.Replace(insertCols, "key", "`key`", 1) // KEY is a reserved word in MySQL
	}
	s.insertCols = insertCols
	var ph []string
	for i := 1; i <= 8; i++ {
		ph = append(ph, d.ph(i))
	}
	s.insertOne = "INSERT INTO " + s.outbox + " " + insertCols + " VALUES (" + strings.Join(ph, ", ") + ")"
	if d.pg() {
		s.insertOne = "INSERT INTO " + s.outbox + " " + insertCols + " VALUES ($1::uuid, $2, $3, $4, $5, $6::jsonb, $7, $8)"
		s.insertMany = "INSERT INTO " + s.outbox + " " + insertCols +
			" SELECT * FROM unnest($1::uuid[], $2::text[], $3::text[], $4::text[], $5::bytea[], $6::jsonb[], $7::timestamptz[], $8::timestamptz[])"
	}
	s.claim = d.ClaimSQL(n)
	s.peek = "SELECT 1 FROM " + s.outbox + " WHERE status = 'pending' AND available_at <= " + d.ph(1) + " LIMIT 1"
	return withOptional(s)
}

// recordCols is the select list of a record.
func (d Dialect) recordCols() string {
	switch {
	case d.pg():
		return "id::text, topic, key, type, payload, headers::text, status, attempts, last_error, available_at, created_at, published_at"
	case d.my():
		return "id, topic, `key`, type, payload, headers, status, attempts, last_error, available_at, created_at, published_at"
	}
	return "id, topic, key, type, payload, headers, status, attempts, last_error, available_at, created_at, published_at"
}

// ClaimSQL is the query a relay claims a batch with, for review and EXPLAIN. Its arguments are the current time
// (as Time converts it) and the batch size.
func (d Dialect) ClaimSQL(n driver.Names) string {
	from := d.table(n, n.Outbox) + " AS o"
	if d.my() {
		// Pending rows are the newest: a scan of the primary key in id order would first pass every published
		// and dead row, which the optimizer, assuming an even spread, may still prefer (TestMySQLClaimUsesIndex
		// shows MariaDB doing so). The (status, id) index yields pending rows already in id order: no filesort.
		from += " FORCE INDEX (" + mysqlClaimIndex + ")"
	}
	// ORDER BY names the table's column: on PostgreSQL a bare "id" would mean the select list's id::text, which no
	// index has, and every claim would sort the whole table.
	q := "SELECT " + d.recordCols() + " FROM " + from + " WHERE status = 'pending' AND available_at <= " + d.ph(1) +
		" ORDER BY o.id LIMIT " + d.ph(2)
	if d.pg() || d.my() {
		q += " FOR UPDATE SKIP LOCKED"
	}
	return q
}

// encodeHeaders returns the headers as JSON text, or nil for none.
func encodeHeaders(h map[string]string) (any, error) {
	if len(h) == 0 {
		return nil, nil
	}
	b, err := json.Marshal(h)
	if err != nil {
		return nil, err
	}
	return string(b), nil
}

func (s *store[TTx]) Insert(ctx context.Context, tx TTx, recs []driver.Record) error {
	c := s.b.Conn(tx)
	if len(recs) == 1 {
		args, err := s.insertArgs(recs[0])
		if err != nil {
			return err
		}
		_, err = c.Exec(ctx, s.insertOne, args...)
		return err
	}
	if s.d.pg() {
		return s.insertUnnest(ctx, c, recs)
	}
	for len(recs) > 0 {
		n := s.insertChunk(recs)
		if err := s.insertValues(ctx, c, recs[:n]); err != nil {
			return err
		}
		recs = recs[n:]
	}
	return nil
}

// insertChunk returns how many of recs, at least one, fit in one multi-row insert.
func (s *store[TTx]) insertChunk(recs []driver.Record) int {
	if !s.d.my() {
		return min(len(recs), sqliteMaxRowsPerInsert)
	}
	size := 0
	for i, r := range recs {
		size += len(r.Payload) + len(r.Topic) + len(r.Key) + len(r.Type) + 64
		for k, v := range r.Headers {
			size += len(k) + len(v) + 6
		}
		if i > 0 && (i == mysqlMaxRowsPerStatement || size > mysqlMaxBytesPerStatement) {
			return i
		}
	}
	return len(recs)
}

func (s *store[TTx]) insertArgs(r driver.Record) ([]any, error) {
	h, err := encodeHeaders(r.Headers)
	if err != nil {
		return nil, err
	}
	return []any{s.d.idArg(r.ID), r.Topic, r.Key, r.Type, payloadArg(r.Payload), h, s.d.Time(r.AvailableAt), s.d.Time(r.CreatedAt)}, nil
}

// payloadArg never passes a nil slice, which drivers would write as NULL.
func payloadArg(p []byte) []byte {
	if p == nil {
		return []byte{}
	}
	return p
}

func (s *store[TTx]) insertUnnest(ctx context.Context, c Conn, recs []driver.Record) error {
	args, err := unnestArgs(recs)
	if err != nil {
		return err
	}
	_, err = c.Exec(ctx, s.insertMany, args...)
	return err
}

// unnestArgs returns the arrays of insertMany's arguments.
func unnestArgs(recs []driver.Record) ([]any, error) {
	n := len(recs)
	ids, topics, keys, types := make([]string, n), make([]string, n), make([]string, n), make([]string, n)
	payloads, headers := make([][]byte, n), make([]*string, n)
	avail, created := make([]time.Time, n), make([]time.Time, n)
	for i, r := range recs {
		ids[i], topics[i], keys[i], types[i], payloads[i] = r.ID, r.Topic, r.Key, r.Type, payloadArg(r.Payload)
		h, err := encodeHeaders(r.Headers)
		if err != nil {
			return nil, err
		}
		if h != nil {
			hs := h.(string)
			headers[i] = &hs
		}
		avail[i], created[i] = r.AvailableAt.UTC(), r.CreatedAt.UTC()
	}
	return []any{ids, topics, keys, types, payloads, headers, avail, created}, nil
}

func (s *store[TTx]) insertValues(ctx context.Context, c Conn, recs []driver.Record) error {
	var b strings.Builder
	b.WriteString("INSERT INTO " + s.outbox + " " + s.insertCols + " VALUES ")
	args := make([]any, 0, len(recs)*8)
	for i, r := range recs {
		if i > 0 {
			b.WriteString(", ")
		}
		b.WriteString("(?, ?, ?, ?, ?, ?, ?, ?)")
		a, err := s.insertArgs(r)
		if err != nil {
			return err
		}
		args = append(args, a...)
	}
	_, err := c.Exec(ctx, b.String(), args...)
	return err
}

// scanRecords returns a row callback that appends each scanned record to out.
func (s *store[TTx]) scanRecords(out *[]driver.Record) func(scan func(...any) error) error {
	return func(scan func(...any) error) error {
		var r driver.Record
		var headers *string
		var status string
		id, idDest := s.d.idDest()
		avail, availDest := s.d.timeDest()
		created, createdDest := s.d.timeDest()
		published, publishedDest := s.d.nullTimeDest()
		if err := scan(idDest, &r.Topic, &r.Key, &r.Type, &r.Payload, &headers, &status, &r.Attempts, &r.LastError,
			availDest, createdDest, publishedDest); err != nil {
			return err
		}
		r.ID = id()
		if headers != nil {
			if err := json.Unmarshal([]byte(*headers), &r.Headers); err != nil {
				return fmt.Errorf("postbox: record %s has malformed headers: %w", r.ID, err)
			}
		}
		r.Status, r.AvailableAt, r.CreatedAt, r.PublishedAt = driver.Status(status), avail(), created(), published()
		*out = append(*out, r)
		return nil
	}
}

// timeDest returns a scan destination for a NOT NULL time column and a function reading the scanned time.
func (d Dialect) timeDest() (func() time.Time, any) {
	if d.pg() {
		var t time.Time
		return func() time.Time { return t }, &t
	}
	var us int64
	return func() time.Time { return time.UnixMicro(us).UTC() }, &us
}

// nullTimeDest is timeDest for a nullable column; NULL reads as the zero time.
func (d Dialect) nullTimeDest() (func() time.Time, any) {
	if d.pg() {
		var t *time.Time
		return func() time.Time {
			if t == nil {
				return time.Time{}
			}
			return *t
		}, &t
	}
	var us *int64
	return func() time.Time {
		if us == nil {
			return time.Time{}
		}
		return time.UnixMicro(*us).UTC()
	}, &us
}

func (s *store[TTx]) Stats(ctx context.Context) ([]driver.TopicStats, error) {
	var out []driver.TopicStats
	q := "SELECT topic, SUM(CASE WHEN status = 'pending' THEN 1 ELSE 0 END), SUM(CASE WHEN status = 'dead' THEN 1 ELSE 0 END)," +
		" MIN(CASE WHEN status = 'pending' THEN created_at END) FROM " + s.outbox +
		" WHERE status IN ('pending', 'dead') GROUP BY topic ORDER BY topic"
	err := s.b.Pool().Query(ctx, q, nil, func(scan func(...any) error) error {
		var t driver.TopicStats
		oldest, dest := s.d.nullTimeDest()
		if err := scan(&t.Topic, &t.Pending, &t.Dead, dest); err != nil {
			return err
		}
		t.OldestPending = oldest()
		out = append(out, t)
		return nil
	})
	return out, err
}

// deadWhere renders the WHERE clause selecting dead records by f, with arguments numbered from n.
func (s *store[TTx]) deadWhere(f driver.DeadFilter, n int) (string, []any) {
	where := " WHERE status = 'dead'"
	var args []any
	if f.Topic != "" {
		where += " AND topic = " + s.d.ph(n+len(args))
		args = append(args, f.Topic)
	}
	if len(f.IDs) > 0 {
		in, a := s.d.inList("id", f.IDs, n+len(args))
		where += " AND " + in
		args = append(args, a...)
	}
	return where, args
}

func (s *store[TTx]) ListDead(ctx context.Context, f driver.DeadFilter) ([]driver.Record, error) {
	if f.Empty() {
		return nil, nil
	}
	where, args := s.deadWhere(f, 1)
	q := "SELECT " + s.cols + " FROM " + s.outbox + " AS o" + where + " ORDER BY o.id"
	if f.Limit > 0 {
		q += " LIMIT " + strconv.Itoa(f.Limit)
	}
	var out []driver.Record
	return out, s.b.Pool().Query(ctx, q, args, s.scanRecords(&out))
}

func (s *store[TTx]) RetryDead(ctx context.Context, f driver.DeadFilter, now time.Time) (int64, error) {
	if f.Empty() {
		return 0, nil
	}
	where, args := s.deadWhere(f, 2)
	q := "UPDATE " + s.outbox + " SET status = 'pending', attempts = 0, available_at = " + s.d.ph(1) + where
	return s.b.Pool().Exec(ctx, q, append([]any{s.d.Time(now)}, args...)...)
}

func (s *store[TTx]) PurgeDead(ctx context.Context, f driver.DeadFilter) (int64, error) {
	if f.Empty() {
		return 0, nil
	}
	where, args := s.deadWhere(f, 1)
	return s.b.Pool().Exec(ctx, "DELETE FROM "+s.outbox+where, args...)
}

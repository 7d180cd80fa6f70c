package wal

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strings"
	"time"

	"github.com/jackc/pglogrepl"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgproto3"

	"github.com/postbox-go/postbox"
	"github.com/postbox-go/postbox/internal/backoff"
)

// A session reads one replication connection. It keeps the messages read and not yet settled in commit order,
// and the transactions they came in: the confirmed position moves past a transaction once every message of it is
// published or parked, and only then.

type txn struct {
	end       pglogrepl.LSN // the end of its commit record, known once committed
	open      int           // messages not yet settled
	committed bool
}

type item struct {
	rec  postbox.Record
	tx   *txn
	due  time.Time // zero: at once
	dead bool      // failed for good: waiting to be written into the dead table
	done bool
}

type session struct {
	r          *Relay
	conn       *pgconn.PgConn
	pending    []*item
	txs        []*txn // committed and not yet confirmed, in commit order
	cur        *txn   // between a Begin and its Commit
	walEnd     pglogrepl.LSN
	confirmed  pglogrepl.LSN
	sent       pglogrepl.LSN
	nextStatus time.Time
	probe      backoff.Backoff // while the broker refuses whole batches
	down       bool
	pause      time.Time // no batch before it: the broker refused the last one whole
	seen       map[string]struct{}
}

func (s *session) run(ctx context.Context) error {
	s.nextStatus = time.Now().Add(s.r.cfg.StatusInterval)
	for {
		if ctx.Err() != nil {
			s.advance()
			return s.status() // a last confirmation; an error here changes nothing: the next run reads again
		}
		if err := s.fill(ctx); err != nil {
			if ctx.Err() != nil {
				continue
			}
			return err
		}
		now := time.Now()
		if err := s.park(ctx); err != nil {
			s.r.errors.Add(1)
			s.r.log.WarnContext(ctx, "writing dead messages failed; retrying", "err", err)
		}
		if b := s.batch(now); len(b) > 0 {
			s.publish(ctx, b)
		}
		s.compact()
		s.advance()
		if s.confirmed > s.sent || !now.Before(s.nextStatus) {
			if err := s.status(); err != nil {
				return err
			}
		}
	}
}

// status sends a standby status update confirming s.confirmed.
func (s *session) status() error {
	err := pglogrepl.SendStandbyStatusUpdate(context.Background(), s.conn, pglogrepl.StandbyStatusUpdate{WALWritePosition: s.confirmed})
	if err != nil {
		return fmt.Errorf("standby status update: %w", err)
	}
	s.sent = s.confirmed
	s.r.confirmed.Store(uint64(s.confirmed))
	s.nextStatus = time.Now().Add(s.r.cfg.StatusInterval)
	return nil
}

// fill reads from the stream until a batch is ready, the linger after the first new message has passed, a
// retry is due or a status update is; it does not read while MaxPending messages wait.
func (s *session) fill(ctx context.Context) error {
	now := time.Now()
	until := s.nextStatus
	ready, next := s.scan(now)
	if ready > 0 {
		until = minTime(until, now.Add(s.r.cfg.Linger))
	}
	if !next.IsZero() {
		until = minTime(until, next)
	}
	if len(s.pending) >= s.r.cfg.MaxPending {
		sleep(ctx, time.Until(until))
		return nil
	}
	lingering := ready > 0
	// A read deadline on the connection rather than a context per message: pgconn watches a context with a
	// goroutine per call, which costs more than decoding a message. Run's context sets the deadline to now when
	// it is cancelled (see stream).
	var deadline time.Time
	for ready < s.r.cfg.BatchSize && len(s.pending) < s.r.cfg.MaxPending {
		if !until.After(time.Now()) {
			return nil
		}
		if !until.Equal(deadline) {
			deadline = until
			if err := s.conn.Conn().SetReadDeadline(until); err != nil {
				return err
			}
			if ctx.Err() != nil {
				return nil
			}
		}
		msg, err := s.conn.ReceiveMessage(context.Background())
		if err != nil {
			var ne net.Error
			if ctx.Err() != nil || (errors.As(err, &ne) && ne.Timeout()) {
				return nil
			}
			return err
		}
		n, err := s.handle(msg)
		if err != nil {
			return err
		}
		ready += n
		if n > 0 && !lingering {
			lingering = true
			until = minTime(until, time.Now().Add(s.r.cfg.Linger))
		}
		if s.nextStatus.IsZero() {
			return nil // the server asked for a reply
		}
	}
	return nil
}

// handle takes one message of the stream and returns how many postbox messages it queued.
func (s *session) handle(msg pgproto3.BackendMessage) (int, error) {
	switch m := msg.(type) {
	case *pgproto3.CopyData:
		if len(m.Data) == 0 {
			return 0, nil
		}
		switch m.Data[0] {
		case pglogrepl.PrimaryKeepaliveMessageByteID:
			k, err := pglogrepl.ParsePrimaryKeepaliveMessage(m.Data[1:])
			if err != nil {
				return 0, err
			}
			s.walEnd = max(s.walEnd, k.ServerWALEnd)
			if k.ReplyRequested {
				s.nextStatus = time.Time{}
			}
		case pglogrepl.XLogDataByteID:
			x, err := pglogrepl.ParseXLogData(m.Data[1:])
			if err != nil {
				return 0, err
			}
			return s.decode(x)
		}
	case *pgproto3.ErrorResponse:
		return 0, pgconn.ErrorResponseToPgError(m)
	case *pgproto3.CopyDone:
		return 0, errors.New("the server ended the replication stream")
	}
	return 0, nil
}

// decode takes one pgoutput message: the begin and commit of a transaction, or a logical decoding message.
// Everything else (relations, row changes of published tables) is skipped.
func (s *session) decode(x pglogrepl.XLogData) (int, error) {
	if len(x.WALData) == 0 {
		return 0, nil
	}
	switch pglogrepl.MessageType(x.WALData[0]) {
	case pglogrepl.MessageTypeBegin, pglogrepl.MessageTypeCommit, pglogrepl.MessageTypeMessage:
	default:
		return 0, nil
	}
	lm, err := pglogrepl.Parse(x.WALData)
	if err != nil {
		return 0, fmt.Errorf("decode at %s: %w", x.WALStart, err)
	}
	switch m := lm.(type) {
	case *pglogrepl.BeginMessage:
		s.cur = &txn{}
	case *pglogrepl.CommitMessage:
		if s.cur == nil {
			return 0, fmt.Errorf("commit at %s without a begin", m.CommitLSN)
		}
		s.cur.end, s.cur.committed = m.TransactionEndLSN, true
		s.txs = append(s.txs, s.cur)
		s.cur = nil
	case *pglogrepl.LogicalDecodingMessage:
		if !m.Transactional || m.Prefix != s.r.prefix {
			return 0, nil
		}
		if s.cur == nil {
			return 0, fmt.Errorf("transactional message at %s outside a transaction", m.LSN)
		}
		if !s.r.verified(m.LSN, m.Content) {
			return 0, nil // not signed with RelayConfig.Secret: skipped as settled (auth.go)
		}
		rec, err := Decode(m.Content)
		if errors.Is(err, ErrVersion) {
			return 0, fmt.Errorf("message at %s: %w", m.LSN, err)
		}
		if err != nil {
			// Not written by Encode: nothing in it can be published or parked.
			s.r.errors.Add(1)
			s.r.log.Error("skipped a message with the table set's prefix that is not a postbox message", "lsn", m.LSN, "err", err)
			return 0, nil
		}
		s.cur.open++
		s.pending = append(s.pending, &item{rec: postbox.Record{Message: postbox.Message(rec.Message),
			Status: postbox.StatusPending, CreatedAt: rec.CreatedAt}, tx: s.cur})
		return 1, nil
	}
	return 0, nil
}

// scan counts the messages a batch could take at now, and returns the earliest retry time still ahead.
func (s *session) scan(now time.Time) (ready int, next time.Time) {
	if s.pause.After(now) {
		return 0, s.pause
	}
	clear(s.seen)
	for _, it := range s.pending {
		k := it.rec.Key
		_, held := s.seen[k]
		switch {
		case it.dead:
		case it.due.After(now):
			if next.IsZero() || it.due.Before(next) {
				next = it.due
			}
		case !held || k == "":
			ready++
		}
		if k != "" {
			s.seen[k] = struct{}{}
		}
	}
	return ready, next
}

// batch returns the messages to publish now, oldest first: at most BatchSize (one while the broker is down), and
// at most one per key, the key's oldest unsettled message, so that a failure holds back its key's later messages.
func (s *session) batch(now time.Time) []*item {
	if s.pause.After(now) {
		return nil
	}
	limit := s.r.cfg.BatchSize
	if s.down {
		limit = 1
	}
	clear(s.seen)
	var out []*item
	for _, it := range s.pending {
		if len(out) == limit {
			break
		}
		k := it.rec.Key
		_, held := s.seen[k]
		if k != "" {
			s.seen[k] = struct{}{}
		}
		if it.dead || it.due.After(now) || (held && k != "") {
			continue
		}
		out = append(out, it)
	}
	return out
}

// publish publishes b and settles each message: published, retried later, or marked for the dead table.
func (s *session) publish(ctx context.Context, b []*item) {
	r := s.r
	recs := make([]postbox.Record, len(b))
	for i, it := range b {
		recs[i] = it.rec
	}
	started := time.Now()
	// A batch in flight finishes even when ctx is cancelled, within PublishTimeout.
	pctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), r.cfg.PublishTimeout)
	errs := r.publishChecked(pctx, recs)
	cancel()
	now := time.Now()
	down := true
	for _, err := range errs {
		if err == nil || !postbox.IsUnavailable(err) {
			down = false
		}
	}
	var published, failed, dead int64
	deadFlags := make([]bool, len(b))
	for i, it := range b {
		err := errs[i]
		switch {
		case err == nil:
			it.done = true
			published++
		case down:
			// The broker took nothing: no attempt counts against the messages. Wait, then probe it with one
			// message.
		default:
			it.rec.Attempts++
			it.rec.LastError = truncate(err.Error(), postbox.MaxLastErrorLen)
			if postbox.IsPermanent(err) || it.rec.Attempts >= r.cfg.MaxAttempts {
				it.dead, deadFlags[i] = true, true
				dead++
				r.log.WarnContext(ctx, "message parked as dead", "id", it.rec.ID, "topic", it.rec.Topic, "attempts", it.rec.Attempts, "err", err)
				continue
			}
			it.due = now.Add(backoff.Delay(r.cfg.BackoffBase, r.cfg.BackoffMax, it.rec.Attempts))
			failed++
		}
	}
	if down {
		s.pause = now.Add(s.probe.Next())
		if !s.down {
			r.log.WarnContext(ctx, "broker unavailable; probing it with one message at a time", "err", errs[0])
		}
		s.down = true
	} else if s.down {
		s.down = false
		s.probe.Reset()
		r.log.InfoContext(ctx, "broker available again")
	}
	r.batches.Add(1)
	r.published.Add(published)
	r.failed.Add(failed)
	if r.cfg.Observer != nil {
		r.cfg.Observer.ObserveBatch(ctx, postbox.BatchReport{Records: recs, Errs: errs, Dead: deadFlags, Started: started, SettledAt: now})
	}
	if failed > 0 {
		r.log.WarnContext(ctx, "publish failed", "failed", failed, "published", published, "first_err", firstErr(errs))
	}
	if dead > 0 {
		if err := s.park(ctx); err != nil {
			r.errors.Add(1)
			r.log.WarnContext(ctx, "writing dead messages failed; retrying", "err", err)
		}
	}
}

func firstErr(errs []error) error {
	for _, err := range errs {
		if err != nil {
			return err
		}
	}
	return nil
}

// publishChecked publishes the records that meet the client's registry and fails the others permanently.
func (r *Relay) publishChecked(ctx context.Context, recs []postbox.Record) []error {
	errs := make([]error, len(recs))
	valid := make([]postbox.Record, 0, len(recs))
	idx := make([]int, 0, len(recs))
	for i, rec := range recs {
		if reg := r.ccfg.Registry; reg != nil {
			if err := reg.Check(rec.Message); err != nil {
				errs[i] = postbox.Permanent(fmt.Errorf("refused by the event registry, not published: %w", err))
				continue
			}
		}
		valid = append(valid, rec)
		idx = append(idx, i)
	}
	if len(valid) == 0 {
		return errs
	}
	for j, err := range r.publish(ctx, valid) {
		errs[idx[j]] = err
	}
	return errs
}

// publish calls the publisher and returns one error per record.
func (r *Relay) publish(ctx context.Context, recs []postbox.Record) (errs []error) {
	errs = make([]error, len(recs))
	defer func() {
		if p := recover(); p != nil {
			err := fmt.Errorf("postbox wal: publisher panicked: %v", p)
			for i := range errs {
				errs[i] = err
			}
		}
	}()
	err := r.pub.Publish(ctx, recs)
	if err == nil {
		return errs
	}
	var be *postbox.BatchError
	if errors.As(err, &be) && len(be.Errs) == len(recs) {
		copy(errs, be.Errs)
		return errs
	}
	for i := range errs {
		errs[i] = err
	}
	return errs
}

// park writes the messages that failed for good into the outbox table as dead rows, where dead list, retry
// and purge find them; a retried one is then published by a table relay.
func (s *session) park(ctx context.Context) error {
	var dead []*item
	for _, it := range s.pending {
		if it.dead && !it.done {
			dead = append(dead, it)
		}
	}
	if len(dead) == 0 {
		return nil
	}
	wctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), s.r.cfg.PublishTimeout)
	defer cancel()
	if err := s.r.insertDead(wctx, dead); err != nil {
		return err
	}
	for _, it := range dead {
		it.done = true
	}
	s.r.dead.Add(int64(len(dead)))
	return nil
}

func (r *Relay) insertDead(ctx context.Context, dead []*item) error {
	table := pgx.Identifier{r.names.Outbox}
	if r.names.Schema != "" {
		table = pgx.Identifier{r.names.Schema, r.names.Outbox}
	}
	q := "INSERT INTO " + table.Sanitize() + " (id, topic, key, type, payload, headers, available_at, created_at, status, attempts, last_error)" +
		" VALUES ($1::uuid, $2, $3, $4, $5, $6::jsonb, $7, $8, 'dead', $9, $10) ON CONFLICT DO NOTHING"
	var b pgx.Batch
	now := time.Now().UTC()
	for _, it := range dead {
		var headers any
		if len(it.rec.Headers) > 0 {
			headers = it.rec.Headers
		}
		payload := it.rec.Payload
		if payload == nil {
			payload = []byte{}
		}
		b.Queue(q, it.rec.ID, it.rec.Topic, it.rec.Key, it.rec.Type, payload, headers, now, it.rec.CreatedAt, it.rec.Attempts, it.rec.LastError)
	}
	return r.pool.SendBatch(ctx, &b).Close()
}

// compact drops the settled messages and counts them off their transactions.
func (s *session) compact() {
	kept := s.pending[:0]
	for _, it := range s.pending {
		if it.done {
			it.tx.open--
			continue
		}
		kept = append(kept, it)
	}
	clear(s.pending[len(kept):])
	s.pending = kept
}

// advance moves the confirmed position past every committed transaction whose messages are all settled, and,
// when nothing is in flight, to the server's position from its last keepalive.
func (s *session) advance() {
	i := 0
	for ; i < len(s.txs) && s.txs[i].open == 0; i++ {
		s.confirmed = max(s.confirmed, s.txs[i].end)
	}
	s.txs = s.txs[i:]
	if len(s.txs) == 0 && s.cur == nil && len(s.pending) == 0 {
		s.confirmed = max(s.confirmed, s.walEnd)
	}
}

func minTime(a, b time.Time) time.Time {
	if b.Before(a) {
		return b
	}
	return a
}

// truncate makes s fit a text column: valid UTF-8 without NUL, at most n bytes.
func truncate(s string, n int) string {
	s = strings.ToValidUTF8(strings.ReplaceAll(s, "\x00", ""), "\uFFFD")
	if len(s) <= n {
		return s
	}
	return strings.ToValidUTF8(s[:n], "")
}

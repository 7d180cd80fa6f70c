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
	due  time.Time // zero: at once; on the client's clock
	dead bool      // failed for good: waiting to be written into the dead table
	// spill: waiting to be written into the table as a pending row; waiting is when it first failed or was held
	// (see RelayConfig.SpillAfter).
	spill   bool
	waiting time.Time
	done    bool
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
	seen       map[string]struct{}
	// spilledKeys are the keys with a message spilled into the table in this session: their later messages
	// follow it there, so that the table relay publishes them in order.
	spilledKeys map[string]struct{}
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
		now := s.r.clock.Now()
		s.settleInTable(ctx)
		if b := s.batch(now); len(b) > 0 {
			s.publish(ctx, b)
		}
		s.compact()
		s.advance()
		if s.confirmed > s.sent || !time.Now().Before(s.nextStatus) {
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
	now, clockNow := time.Now(), s.r.clock.Now()
	until := s.nextStatus
	ready, next := s.scan(clockNow)
	if ready > 0 {
		until = minTime(until, now.Add(s.r.cfg.Linger))
	}
	if !next.IsZero() {
		until = minTime(until, now.Add(next.Sub(clockNow)))
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
	clear(s.seen)
	for _, it := range s.pending {
		k := it.rec.Key
		_, held := s.seen[k]
		switch {
		case it.dead || it.spill:
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

// batch returns the messages to publish now, oldest first: at most BatchSize, and at most one per key, the key's
// oldest unsettled message, so that a failure holds back its key's later messages. A message whose key has a
// message spilled into the table is marked to follow it there instead.
func (s *session) batch(now time.Time) []*item {
	clear(s.seen)
	var out []*item
	for _, it := range s.pending {
		if len(out) == s.r.cfg.BatchSize {
			break
		}
		k := it.rec.Key
		_, held := s.seen[k]
		if k != "" {
			s.seen[k] = struct{}{}
		}
		if _, spilled := s.spilledKeys[k]; spilled && k != "" && !it.dead && !it.done {
			it.spill = true
		}
		if it.dead || it.spill || it.due.After(now) || (held && k != "") {
			continue
		}
		out = append(out, it)
	}
	return out
}

// publish publishes b through the delivery step and settles each message as its verdict says: published,
// retried later, marked for the dead table, or held for a destination that is down, and spilled into the table
// once held for SpillAfter (or at once when MaxPending messages wait).
func (s *session) publish(ctx context.Context, b []*item) {
	r := s.r
	recs := make([]postbox.Record, len(b))
	for i, it := range b {
		recs[i] = it.rec
	}
	started := r.clock.Now()
	// A batch in flight finishes even when ctx is cancelled, within PublishTimeout.
	pctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), r.cfg.PublishTimeout)
	verdicts := r.deliver.Deliver(pctx, recs)
	cancel()
	now := r.clock.Now()
	full := len(s.pending) >= r.cfg.MaxPending
	var published, failed, dead int64
	errs, deadFlags := make([]error, len(b)), make([]bool, len(b))
	for i, it := range b {
		v := verdicts[i]
		errs[i] = v.Err
		switch v.Kind {
		case postbox.VerdictPublished:
			it.done = true
			published++
		case postbox.VerdictHeld:
			it.due = v.RetryAt
			s.mayspill(it, now, full)
		case postbox.VerdictDead:
			it.rec.Attempts, it.rec.LastError = v.Attempts, v.LastError
			it.dead, deadFlags[i] = true, true
			dead++
			r.log.WarnContext(ctx, "message parked as dead", "id", it.rec.ID, "topic", it.rec.Topic, "attempts", it.rec.Attempts, "err", v.Err)
		case postbox.VerdictRetry:
			it.rec.Attempts, it.rec.LastError, it.due = v.Attempts, v.LastError, v.RetryAt
			s.mayspill(it, now, full)
			failed++
		}
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
	s.settleInTable(ctx)
}

// mayspill marks it, which failed or was held at now, to be spilled into the table when it has waited, or is to
// wait, SpillAfter, or when full: MaxPending messages wait. Its key's later messages follow it there.
func (s *session) mayspill(it *item, now time.Time, full bool) {
	if it.waiting.IsZero() {
		it.waiting = now
	}
	after := s.r.cfg.SpillAfter
	if !full && now.Sub(it.waiting) < after && it.due.Sub(now) < after {
		return
	}
	it.spill = true
	if it.rec.Key != "" {
		s.spilledKeys[it.rec.Key] = struct{}{}
	}
}

func firstErr(errs []error) error {
	for _, err := range errs {
		if err != nil && !errors.Is(err, postbox.ErrDestinationDown) {
			return err
		}
	}
	return nil
}

// settleInTable writes the messages that failed for good into the outbox table as dead rows, where dead list,
// retry and purge find them (a retried one is then published by a table relay), and the spilled ones as pending
// rows, which a table relay publishes. Either way the message is settled and the confirmed position may pass it.
// A failed write is logged and tried again at the next turn.
func (s *session) settleInTable(ctx context.Context) {
	var rows []*item
	var dead, spilled int64
	for _, it := range s.pending {
		if (it.dead || it.spill) && !it.done {
			rows = append(rows, it)
			if it.dead {
				dead++
			} else {
				spilled++
			}
		}
	}
	if len(rows) == 0 {
		return
	}
	wctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), s.r.cfg.PublishTimeout)
	defer cancel()
	if err := s.r.insertRows(wctx, rows); err != nil {
		s.r.errors.Add(1)
		s.r.log.WarnContext(ctx, "writing messages into the outbox table failed; retrying", "dead", dead, "spilled", spilled, "err", err)
		return
	}
	for _, it := range rows {
		it.done = true
	}
	s.r.dead.Add(dead)
	if spilled > 0 {
		s.r.spilled.Add(spilled)
		s.r.log.InfoContext(ctx, "messages that waited too long written into the outbox table as pending; the table relay publishes them",
			"spilled", spilled, "spill_after", s.r.cfg.SpillAfter)
	}
}

// insertRows inserts rows into the outbox table, dead or pending as each is, in one batch. Text a text column
// refuses (NUL, invalid UTF-8: Decode accepts what Encode wrote, the table is stricter) is stored with the
// offending bytes replaced by U+FFFD and the message's last error saying so, so that no message is left
// unsettled, pinning the slot, because the table refuses its text.
func (r *Relay) insertRows(ctx context.Context, rows []*item) error {
	table := pgx.Identifier{r.names.Outbox}
	if r.names.Schema != "" {
		table = pgx.Identifier{r.names.Schema, r.names.Outbox}
	}
	q := "INSERT INTO " + table.Sanitize() + " (id, topic, key, type, payload, headers, available_at, created_at, status, attempts, last_error)" +
		" VALUES ($1::uuid, $2, $3, $4, $5, $6::jsonb, $7, $8, $9, $10, $11) ON CONFLICT DO NOTHING"
	var b pgx.Batch
	now := r.clock.Now().UTC()
	for _, it := range rows {
		rec, changed := fitRecord(it.rec)
		lastErr := rec.LastError
		if changed {
			lastErr = "stored with bytes the table refuses (NUL or invalid UTF-8) replaced by U+FFFD; " + lastErr
			if len(lastErr) > postbox.MaxLastErrorLen {
				lastErr = strings.ToValidUTF8(lastErr[:postbox.MaxLastErrorLen], "")
			}
		}
		var headers any
		if len(rec.Headers) > 0 {
			headers = rec.Headers
		}
		payload := rec.Payload
		if payload == nil {
			payload = []byte{}
		}
		status, at := "dead", now
		if !it.dead {
			status, at = "pending", maxTime(it.due, now).UTC()
		}
		b.Queue(q, rec.ID, rec.Topic, rec.Key, rec.Type, payload, headers, at, rec.CreatedAt, status, rec.Attempts, lastErr)
	}
	return r.pool.SendBatch(ctx, &b).Close()
}

// fitRecord returns rec with its text made fit for text columns, and whether anything changed.
func fitRecord(rec postbox.Record) (postbox.Record, bool) {
	changed := false
	fit := func(s string) string {
		f := fitText(s)
		changed = changed || f != s
		return f
	}
	rec.Topic, rec.Key, rec.Type = fit(rec.Topic), fit(rec.Key), fit(rec.Type)
	if len(rec.Headers) > 0 {
		h := make(map[string]string, len(rec.Headers))
		for k, v := range rec.Headers {
			h[fit(k)] = fit(v)
		}
		rec.Headers = h
	}
	return rec, changed
}

// fitText makes s fit a text column: valid UTF-8 without NUL.
func fitText(s string) string {
	return strings.ToValidUTF8(strings.ReplaceAll(s, "\x00", "\uFFFD"), "\uFFFD")
}

func maxTime(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
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

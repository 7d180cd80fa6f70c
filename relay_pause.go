package postbox

import (
	"context"
	sqldriver "database/sql/driver"
	"errors"
	"io"
	"net"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/postbox-go/postbox/driver"
)

// pausedSet is a relay's copy of the paused topics, read again at most every RelayConfig.PausedRefresh so that
// claims, the hot path, never read the paused table themselves: with nothing paused a claim runs exactly the
// statement it runs without pausing.
type pausedSet struct {
	mu      sync.Mutex
	next    time.Time // when to read again; monotonic time, not the client's clock, which tests may stop
	topics  []string
	failing bool // the last read failed; logged once until a read succeeds
}

// skipTopics returns the topics the next claim skips, reading them first when the copy is older than
// PausedRefresh. A failed read keeps the last copy and is logged once: a relay whose table set lacks the paused
// table (migration 4 not run) or whose role may not read it goes on relaying everything. A read that failed
// because the database is unreachable is not logged: the relay logs the outage itself.
func (r *Relay) skipTopics(ctx context.Context) []string {
	pauser := r.client.pauser
	if pauser == nil {
		return nil
	}
	p := &r.paused
	p.mu.Lock()
	defer p.mu.Unlock()
	now := time.Now()
	if now.Before(p.next) {
		return p.topics
	}
	p.next = now.Add(r.cfg.PausedRefresh)
	rows, err := pauser.PausedTopics(ctx)
	switch {
	case err != nil && ctx.Err() != nil:
	case err != nil && lostConnection(err):
		// The database is down: the relay's own line says so (relay cannot work), and no migration or grant
		// would help, so the read is tried again silently.
	case err != nil:
		if !p.failing {
			r.log.WarnContext(ctx, "cannot read the paused topics; relaying every topic until it can (run Migrate, or grant SELECT on the paused table)",
				"err", err)
		}
		p.failing = true
	default:
		if p.failing {
			r.log.InfoContext(ctx, "reading the paused topics again")
		}
		p.failing = false
		p.topics = pausedNames(rows, p.topics)
	}
	return p.topics
}

// lostConnection reports whether err says the database could not be reached or dropped the connection, rather
// than refusing the read: a network error (refused, reset, timed out), a connection closed under the read, or a
// PostgreSQL connection exception, shutdown or start-up (SQLSTATE class 08, 57P01-57P03).
func lostConnection(err error) bool {
	var s interface{ SQLState() string }
	if errors.As(err, &s) {
		c := s.SQLState()
		return strings.HasPrefix(c, "08") || c == "57P01" || c == "57P02" || c == "57P03"
	}
	var ne net.Error
	return errors.As(err, &ne) || errors.Is(err, syscall.ECONNREFUSED) || errors.Is(err, syscall.ECONNRESET) ||
		errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, sqldriver.ErrBadConn) ||
		errors.Is(err, context.DeadlineExceeded)
}

// pausedNames returns the topics of rows, reusing prev when it holds the same ones, so that an unchanged set
// allocates nothing.
func pausedNames(rows []driver.PausedTopic, prev []string) []string {
	if len(rows) == 0 {
		return nil
	}
	same := len(rows) == len(prev)
	for i := 0; same && i < len(rows); i++ {
		same = rows[i].Topic == prev[i]
	}
	if same {
		return prev
	}
	out := make([]string, len(rows))
	for i, row := range rows {
		out[i] = row.Topic
	}
	return out
}

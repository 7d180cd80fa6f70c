package cli

import (
	"context"
	"database/sql/driver"
	"errors"
	"io"
	"log/slog"
	"net"
	"strings"
	"syscall"
	"time"
)

// A relay started while its database is down (a host rebooting, PostgreSQL in crash recovery, a deployment that
// starts everything at once) waits for it, as a running relay does, instead of exiting: an orchestrator restarting
// the process would only add its own, growing, delay. What waiting cannot fix is refused at once: a bad URL (found
// before any I/O), tables not migrated, a password or privilege the server refuses, a database that does not
// exist.

// awaitDatabase checks that the tables are migrated, waiting while the database does not answer: it tries again at
// pace (a refused connection or PostgreSQL's "not yet accepting connections" at its base, so that the relay starts
// within about 100 ms of the database accepting connections), each attempt bounded by attemptTimeout. It logs one
// line when it starts waiting and one when the database answers. It returns an error that waiting cannot fix, or
// ctx's error when ctx ends first.
func awaitDatabase(ctx context.Context, log *slog.Logger, o dbOptions, db database, pace reconnectPace, attemptTimeout time.Duration) error {
	start := time.Now()
	var t *time.Timer
	for attempt := 1; ; attempt++ {
		actx, cancel := context.WithTimeout(ctx, attemptTimeout)
		err := o.checkMigrated(actx, db)
		cancel()
		switch {
		case err == nil:
			if attempt > 1 {
				log.Info("database answered; relay starting", "db", RedactURL(o.url), "waited", time.Since(start).Round(time.Millisecond))
			}
			return nil
		case ctx.Err() != nil:
			return ctx.Err()
		case !unreachable(err):
			return err
		case attempt == 1:
			log.Warn("database unreachable at start; waiting for it (not ready until it answers)", "db", RedactURL(o.url),
				"err", oneLineErr(err), "retry_max", pace.max)
		}
		d := pace.delay(attempt, err)
		if t == nil {
			t = time.NewTimer(d)
			defer t.Stop()
		} else {
			t.Reset(d)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-t.C:
		}
	}
}

// unreachable reports whether err says the database cannot be reached now, which waiting may fix: a network
// error (refused, reset, timed out, a name not resolved yet), a connection the server closed, or a PostgreSQL
// connection exception (SQLSTATE class 08), shutdown or start-up (57P01, 57P02, 57P03) or too many connections
// (53300). A server's refusal of the credentials, of a privilege or of the database name is not: the server
// answered.
func unreachable(err error) bool {
	var s interface{ SQLState() string }
	if errors.As(err, &s) {
		switch c := s.SQLState(); {
		case strings.HasPrefix(c, "08"), c == "57P01", c == "57P02", c == "57P03", c == "53300":
			return true
		default:
			return false
		}
	}
	var ne net.Error
	return errors.As(err, &ne) || errors.Is(err, syscall.ECONNREFUSED) || errors.Is(err, syscall.ECONNRESET) ||
		errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, driver.ErrBadConn) ||
		errors.Is(err, context.DeadlineExceeded)
}

// oneLineErr flattens err's text to one line: some drivers join errors with newlines, which split a log record.
func oneLineErr(err error) string {
	return strings.Join(strings.Fields(strings.ReplaceAll(err.Error(), "\n", "; ")), " ")
}

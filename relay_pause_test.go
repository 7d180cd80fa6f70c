package postbox

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/postbox-go/postbox/driver"
)

// pausingStore is a store whose paused topics cannot be read: PausedTopics fails with err.
type pausingStore struct {
	peekStore
	err error
}

func (s *pausingStore) PauseTopic(context.Context, driver.PausedTopic) (bool, error) {
	return false, s.err
}
func (s *pausingStore) ResumeTopic(context.Context, string) (bool, error)          { return false, s.err }
func (s *pausingStore) PausedTopics(context.Context) ([]driver.PausedTopic, error) { return nil, s.err }

// TestPausedReadFailureHint: a paused table the relay may not read is logged once with what fixes it (Migrate, or
// a grant); a database that cannot be reached is not blamed on the paused table at all, since no migration or
// grant would help and the relay says the database is down in its own line.
func TestPausedReadFailureHint(t *testing.T) {
	for _, tc := range []struct {
		name     string
		err      error
		wantHint bool
	}{
		{"refused connection", fmt.Errorf("failed to connect: %w", syscall.ECONNREFUSED), false},
		{"starting up", sqlStateError("57P03"), false},
		{"permission denied", sqlStateError("42501"), true},
		{"no such table", errors.New(`relation "postbox_paused" does not exist (SQLSTATE 42P01)`), true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var logs bytes.Buffer
			store := &pausingStore{err: tc.err}
			c, err := NewClient[int](txDriver{storeDriver{store: store}}, &Config{DisableNotify: true})
			if err != nil {
				t.Fatal(err)
			}
			r, err := NewRelay(c, PublisherFunc(func(context.Context, []Record) error { return nil }),
				&RelayConfig{Logger: slog.New(slog.NewTextHandler(&logs, nil)), PausedRefresh: time.Nanosecond})
			if err != nil {
				t.Fatal(err)
			}
			for range 3 {
				r.paused.next = time.Time{} // due again at once
				r.skipTopics(context.Background())
			}
			hints := strings.Count(logs.String(), "run Migrate, or grant SELECT on the paused table")
			switch {
			case tc.wantHint && hints != 1:
				t.Errorf("%d lines with the hint over three failed reads; want one:\n%s", hints, logs.String())
			case !tc.wantHint && strings.Contains(logs.String(), "paused"):
				t.Errorf("a connection failure was blamed on the paused table:\n%s", logs.String())
			}
		})
	}
}

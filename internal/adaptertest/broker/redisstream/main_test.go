package redisstream_test

import (
	"context"
	"log/slog"
	"os"
	"strings"
	"sync"
	"testing"

	"github.com/redis/go-redis/v9"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// prefix names this package's streams, so that other packages' tests on the same server never touch them.
const prefix = "postbox-redisstream-test:"

// addr is the Redis server of the development machines, or POSTBOX_TEST_REDIS.
func addr() string {
	if a := os.Getenv("POSTBOX_TEST_REDIS"); a != "" {
		return a
	}
	return "127.0.0.1:6379"
}

// connect returns a client of the test server, failing the test when Redis does not answer.
func connect(t *testing.T) *redis.Client {
	t.Helper()
	rdb := redis.NewClient(&redis.Options{Addr: addr(), ContextTimeoutEnabled: true})
	t.Cleanup(func() { _ = rdb.Close() })
	if err := rdb.Ping(context.Background()).Err(); err != nil {
		t.Fatalf("Redis is not reachable at %s (the tests need it; start it with `make services` or set POSTBOX_TEST_REDIS): %v", addr(), err)
	}
	return rdb
}

// cleanup deletes keys at the end of the test.
func cleanup(t *testing.T, rdb redis.Cmdable, keys ...string) {
	t.Cleanup(func() { _ = rdb.Del(context.Background(), keys...).Err() })
}

func quietLogger() *slog.Logger { return slog.New(slog.DiscardHandler) }

// logRecorder keeps the messages of the records logged through it.
type logRecorder struct {
	mu   sync.Mutex
	recs []slog.Record
}

func (l *logRecorder) Enabled(context.Context, slog.Level) bool { return true }
func (l *logRecorder) Handle(_ context.Context, r slog.Record) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.recs = append(l.recs, r)
	return nil
}
func (l *logRecorder) WithAttrs([]slog.Attr) slog.Handler { return l }
func (l *logRecorder) WithGroup(string) slog.Handler      { return l }

// find returns the first record whose message contains msg.
func (l *logRecorder) find(msg string) (slog.Record, bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, r := range l.recs {
		if strings.Contains(r.Message, msg) {
			return r, true
		}
	}
	return slog.Record{}, false
}

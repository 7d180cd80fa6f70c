package redis_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	goredis "github.com/redis/go-redis/v9"
	"go.uber.org/goleak"

	idemredis "github.com/postbox-go/postbox/idempotency/redis"
)

// prefix is this package's own key space, so that other packages' tests may share the server.
const prefix = "postbox_test_idempotency_redis"

var addr = "127.0.0.1:6379"

func TestMain(m *testing.M) {
	if a := os.Getenv("POSTBOX_TEST_REDIS"); a != "" {
		addr = a
	}
	if err := reset(); err != nil {
		fmt.Fprintf(os.Stderr, "Redis is not usable at %s (start it with `make services`, or set POSTBOX_TEST_REDIS): %v\n", addr, err)
		os.Exit(1)
	}
	goleak.VerifyTestMain(m)
}

// reset deletes the keys earlier runs left under the package's prefix.
func reset() error {
	rdb := goredis.NewClient(&goredis.Options{Addr: addr})
	defer rdb.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	iter := rdb.Scan(ctx, 0, prefix+":*", 1000).Iterator()
	for iter.Next(ctx) {
		if err := rdb.Del(ctx, iter.Val()).Err(); err != nil {
			return err
		}
	}
	return iter.Err()
}

func client(t *testing.T) *goredis.Client {
	rdb := goredis.NewClient(&goredis.Options{Addr: addr})
	t.Cleanup(func() { rdb.Close() })
	return rdb
}

func store(t *testing.T, rdb *goredis.Client, ttl time.Duration) *idemredis.Store {
	t.Helper()
	s, err := idemredis.New(rdb, &idemredis.Config{Prefix: prefix, TTL: ttl})
	if err != nil {
		t.Fatal(err)
	}
	return s
}

var seq atomic.Int64

// messageID returns an ID no other test or run uses.
func messageID() string { return fmt.Sprintf("msg-%d-%d", time.Now().UnixNano(), seq.Add(1)) }

func TestConcurrentClaimsHaveOneWinner(t *testing.T) {
	ctx := context.Background()
	s := store(t, client(t), time.Hour)
	id := messageID()
	var wins atomic.Int64
	var wg sync.WaitGroup
	for range 32 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			c, err := s.Claim(ctx, "emails", id)
			if err != nil {
				t.Error(err)
				return
			}
			if c != nil {
				wins.Add(1)
			}
		}()
	}
	wg.Wait()
	if wins.Load() != 1 {
		t.Fatalf("%d of 32 concurrent claims won; want exactly 1", wins.Load())
	}
	// Claims are per consumer.
	if c, err := s.Claim(ctx, "sms", id); err != nil || c == nil {
		t.Fatalf("another consumer's claim of the same message = %v, %v; want it to win", c, err)
	}
}

func TestKeyAndTTL(t *testing.T) {
	ctx := context.Background()
	rdb := client(t)
	s := store(t, rdb, time.Hour)
	id := messageID() + ":with:colons"
	c, err := s.Claim(ctx, "emails", id)
	if err != nil || c == nil {
		t.Fatalf("Claim = %v, %v", c, err)
	}
	want := prefix + ":emails:" + id
	if c.Key() != want || s.Key("emails", id) != want {
		t.Fatalf("key %q; want %q", c.Key(), want)
	}
	ttl, err := rdb.PTTL(ctx, want).Result()
	if err != nil || ttl <= 0 || ttl > time.Hour {
		t.Fatalf("PTTL of %s = %v, %v; want an expiry of at most the configured hour", want, ttl, err)
	}
}

func TestKeysExpire(t *testing.T) {
	ctx := context.Background()
	rdb := client(t)
	s := store(t, rdb, 50*time.Millisecond)
	id := messageID()
	first, err := s.Claim(ctx, "emails", id)
	if err != nil || first == nil {
		t.Fatalf("Claim = %v, %v", first, err)
	}
	if c, err := s.Claim(ctx, "emails", id); err != nil || c != nil {
		t.Fatalf("claim before expiry = %v, %v; want a duplicate", c, err)
	}
	deadline := time.Now().Add(30 * time.Second) // a guard against hanging, not a measurement
	var second *idemredis.Claim
	for second == nil {
		if time.Now().After(deadline) {
			t.Fatal("the claim never expired")
		}
		time.Sleep(10 * time.Millisecond)
		if second, err = s.Claim(ctx, "emails", id); err != nil {
			t.Fatal(err)
		}
	}
	// The first claim expired: releasing it must not delete the second caller's.
	if err := first.Release(ctx); !errors.Is(err, idemredis.ErrNotHeld) {
		t.Fatalf("Release of an expired claim: %v; want ErrNotHeld", err)
	}
	if c, err := s.Claim(ctx, "emails", id); err != nil || c != nil {
		t.Fatalf("claim after a stale release = %v, %v; want the second claim still held", c, err)
	}
	if err := second.Release(ctx); err != nil {
		t.Fatalf("Release of the held claim: %v", err)
	}
}

func TestReleaseLetsRetryClaim(t *testing.T) {
	ctx := context.Background()
	s := store(t, client(t), time.Hour)
	id := messageID()
	c, err := s.Claim(ctx, "emails", id)
	if err != nil || c == nil {
		t.Fatalf("Claim = %v, %v", c, err)
	}
	if err := c.Release(ctx); err != nil {
		t.Fatal(err)
	}
	if again, err := s.Claim(ctx, "emails", id); err != nil || again == nil {
		t.Fatalf("claim after release = %v, %v; want it to win", again, err)
	}
	if err := c.Release(ctx); !errors.Is(err, idemredis.ErrNotHeld) {
		t.Fatalf("second release of the same claim: %v; want ErrNotHeld", err)
	}
}

func TestDo(t *testing.T) {
	ctx := context.Background()
	s := store(t, client(t), time.Hour)
	id := messageID()
	calls := 0
	failed := errors.New("smtp: 451 try again later")
	ran, err := s.Do(ctx, "emails", id, func(context.Context) error { calls++; return failed })
	if !ran || !errors.Is(err, failed) {
		t.Fatalf("Do with a failing effect = %v, %v; want ran and its error", ran, err)
	}
	ran, err = s.Do(ctx, "emails", id, func(context.Context) error { calls++; return nil })
	if !ran || err != nil {
		t.Fatalf("Do after a failure = %v, %v; want the claim released and the effect run again", ran, err)
	}
	ran, err = s.Do(ctx, "emails", id, func(context.Context) error { calls++; return nil })
	if ran || err != nil || calls != 2 {
		t.Fatalf("Do of a done message = %v, %v, %d calls; want a duplicate that does not run", ran, err, calls)
	}

	// The release runs even when the effect failed because ctx was cancelled.
	id2 := messageID()
	cctx, cancel := context.WithCancel(ctx)
	ran, err = s.Do(cctx, "emails", id2, func(ctx context.Context) error { cancel(); return ctx.Err() })
	if !ran || !errors.Is(err, context.Canceled) {
		t.Fatalf("Do cancelled during the effect = %v, %v", ran, err)
	}
	if ran, err := s.Do(ctx, "emails", id2, func(context.Context) error { return nil }); !ran || err != nil {
		t.Fatalf("Do after a cancelled attempt = %v, %v; want the claim released", ran, err)
	}
}

func TestInvalidInput(t *testing.T) {
	ctx := context.Background()
	rdb := client(t)
	if _, err := idemredis.New(nil, nil); !errors.Is(err, idemredis.ErrInvalidConfig) || !strings.Contains(err.Error(), "NewClient") {
		t.Errorf("New(nil): %v; want ErrInvalidConfig saying how to make a client", err)
	}
	if _, err := idemredis.New(rdb, &idemredis.Config{TTL: time.Microsecond}); !errors.Is(err, idemredis.ErrInvalidConfig) {
		t.Errorf("TTL of a microsecond: %v; want ErrInvalidConfig", err)
	}
	if _, err := idemredis.New(rdb, &idemredis.Config{TTL: -time.Second}); !errors.Is(err, idemredis.ErrInvalidConfig) {
		t.Errorf("negative TTL: %v; want ErrInvalidConfig", err)
	}
	s := store(t, rdb, time.Hour)
	for _, tc := range []struct{ consumer, id, want string }{
		{"", "m", "consumer name is empty"},
		{"a:b", "m", "contains ':'"},
		{"emails", "", "message ID is empty"},
	} {
		if _, err := s.Claim(ctx, tc.consumer, tc.id); !errors.Is(err, idemredis.ErrInvalidConfig) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("Claim(%q, %q): %v; want ErrInvalidConfig saying %q", tc.consumer, tc.id, err, tc.want)
		}
	}
	if _, err := s.Do(ctx, "emails", "m", nil); !errors.Is(err, idemredis.ErrInvalidConfig) {
		t.Errorf("Do(nil): %v; want ErrInvalidConfig", err)
	}
	d, err := idemredis.New(rdb, nil)
	if err != nil || d.Key("c", "m") != idemredis.DefaultPrefix+":c:m" {
		t.Errorf("default prefix: key %q, %v", d.Key("c", "m"), err)
	}
}

// Do runs a side effect outside the database once per message, and lets a failed attempt be retried.
func ExampleStore_Do() {
	rdb := goredis.NewClient(&goredis.Options{Addr: addr})
	defer rdb.Close()
	store, err := idemredis.New(rdb, &idemredis.Config{Prefix: prefix, TTL: 48 * time.Hour})
	if err != nil {
		panic(err)
	}
	id := messageID() // the broker's message ID, the same on every redelivery
	for range 2 {
		ran, err := store.Do(context.Background(), "receipts", id, func(ctx context.Context) error {
			fmt.Println("sending the receipt")
			return nil
		})
		fmt.Println("ran:", ran, "err:", err)
	}
	// Output:
	// sending the receipt
	// ran: true err: <nil>
	// ran: false err: <nil>
}

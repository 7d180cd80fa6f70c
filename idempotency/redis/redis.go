// Package redis is an idempotency store in Redis, for a consumer's side effects that are not in its database: an
// email sent, a payment provider called, a file uploaded. The database inbox (postbox.Process) makes database
// effects happen once; this store makes an outside effect happen at most once per TTL, for each consumer and
// message ID.
//
// A claim is one key, <prefix>:<consumer>:<message id>, set with SET NX and an expiry: the first caller gets it,
// every other caller sees a duplicate until the key expires. If the effect fails, release the claim so that a
// redelivery can try again; Do does both.
//
//	store, err := redis.New(rdb, &redis.Config{Prefix: "billing", TTL: 48 * time.Hour})
//	ran, err := store.Do(ctx, "emails", msg.ID, func(ctx context.Context) error {
//		return mailer.Send(ctx, receipt)
//	})
//
// Redis is not the database, so the claim and the effect do not commit together. A consumer that dies after the
// effect and before its ack leaves the claim in place: the redelivery is a duplicate, and the effect happened
// once. A consumer that dies during the effect leaves the claim in place too, whether or not the effect
// happened, and the effect is not retried until the claim expires: at most once, not exactly once. Choose a TTL
// longer than the broker's redelivery horizon, and prefer effects the receiving side can also deduplicate by the
// message ID.
//
// The package is named redis like the client it uses; import it under another name, such as idemredis, when a
// file imports both.
package redis

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"strings"
	"time"

	goredis "github.com/redis/go-redis/v9"
)

// Defaults for Config.
const (
	DefaultPrefix = "postbox:idempotency"
	DefaultTTL    = 7 * 24 * time.Hour
)

var (
	// ErrInvalidConfig is wrapped by every error about a configuration or argument New and the store's methods
	// refuse. Nothing was written.
	ErrInvalidConfig = errors.New("postbox/idempotency/redis: invalid config")
	// ErrNotHeld is returned by Release when the claim is no longer this caller's: it expired, and perhaps
	// another caller claimed the message since. Nothing was deleted.
	ErrNotHeld = errors.New("postbox/idempotency/redis: the claim is no longer held; it expired")
)

// Config configures a Store. The zero value is valid: every field has a default.
type Config struct {
	// Prefix starts every key. Keys are <Prefix>:<consumer>:<message id>. Default: DefaultPrefix
	// ("postbox:idempotency").
	Prefix string
	// TTL is how long a claim lasts. A message delivered again within the TTL is a duplicate; after it, the effect
	// may run again. It must exceed the broker's redelivery horizon and the longest the effect takes. Whole seconds
	// are set with EX, anything finer with PX. Default: DefaultTTL (7 days).
	TTL time.Duration
}

// Store claims message IDs in Redis. It is safe for concurrent use.
type Store struct {
	rdb    goredis.UniversalClient
	prefix string
	ttl    time.Duration
}

// New returns a store using rdb (a *redis.Client, *redis.ClusterClient or any UniversalClient). cfg may be nil
// for the defaults. It does no I/O.
func New(rdb goredis.UniversalClient, cfg *Config) (*Store, error) {
	if rdb == nil {
		return nil, fmt.Errorf("%w: the Redis client is nil; pass one such as redis.NewClient(&redis.Options{Addr: \"localhost:6379\"})", ErrInvalidConfig)
	}
	var c Config
	if cfg != nil {
		c = *cfg
	}
	if c.Prefix == "" {
		c.Prefix = DefaultPrefix
	}
	if c.TTL == 0 {
		c.TTL = DefaultTTL
	}
	if c.TTL < time.Millisecond {
		return nil, fmt.Errorf("%w: TTL is %v; use at least a millisecond, or 0 for the default (%v)", ErrInvalidConfig, c.TTL, DefaultTTL)
	}
	return &Store{rdb: rdb, prefix: c.Prefix, ttl: c.TTL}, nil
}

// Key returns the key that claims messageID for consumer.
func (s *Store) Key(consumer, messageID string) string {
	return s.prefix + ":" + consumer + ":" + messageID
}

func checkKey(consumer, messageID string) error {
	switch {
	case consumer == "":
		return fmt.Errorf("%w: the consumer name is empty; name the service or handler, such as \"emails\"", ErrInvalidConfig)
	case strings.Contains(consumer, ":"):
		// A colon would make <consumer>:<message id> ambiguous: "a:b" + "c" and "a" + "b:c" would share a key.
		return fmt.Errorf("%w: the consumer name %q contains ':', which separates the parts of the key; use another character", ErrInvalidConfig, consumer)
	case messageID == "":
		return fmt.Errorf("%w: the message ID is empty; pass the broker's message ID (the CloudEvents id)", ErrInvalidConfig)
	}
	return nil
}

// Claim is a message ID one caller holds.
type Claim struct {
	store *Store
	key   string
	token string // tells this claim from a later one of the same key
}

// Key returns the claim's Redis key.
func (c *Claim) Key() string { return c.key }

// Claim takes the message for consumer, with SET NX and the store's TTL. It returns nil and no error when
// another caller holds it: a duplicate.
func (s *Store) Claim(ctx context.Context, consumer, messageID string) (*Claim, error) {
	if err := checkKey(consumer, messageID); err != nil {
		return nil, err
	}
	var b [16]byte
	if _, err := rand.Read(b[:]); err != nil {
		return nil, err
	}
	c := &Claim{store: s, key: s.Key(consumer, messageID), token: hex.EncodeToString(b[:])}
	err := s.rdb.SetArgs(ctx, c.key, c.token, goredis.SetArgs{Mode: "NX", TTL: s.ttl}).Err()
	switch {
	case errors.Is(err, goredis.Nil):
		return nil, nil // the key exists: NX did not set it
	case err != nil:
		return nil, fmt.Errorf("postbox/idempotency/redis: claim %s: %w", c.key, err)
	}
	return c, nil
}

// release deletes the key only while it still holds this claim's token, so that a caller whose claim expired
// never deletes the claim of the caller who took the message after it.
var release = goredis.NewScript(`if redis.call("GET", KEYS[1]) == ARGV[1] then return redis.call("DEL", KEYS[1]) end return 0`)

// Release gives the claim up, so that a redelivery can claim the message again. Call it when the effect failed
// and did not happen. It returns ErrNotHeld when the claim had expired.
func (c *Claim) Release(ctx context.Context) error {
	n, err := release.Run(ctx, c.store.rdb, []string{c.key}, c.token).Int()
	if err != nil {
		return fmt.Errorf("postbox/idempotency/redis: release %s: %w", c.key, err)
	}
	if n == 0 {
		return fmt.Errorf("%w: %s", ErrNotHeld, c.key)
	}
	return nil
}

// Do runs fn unless the message was claimed for consumer already, and reports whether it ran. When fn fails, Do
// releases the claim, so that a redelivery runs fn again, and returns fn's error (joined with the release's error,
// if any). The release runs even when ctx is done.
func (s *Store) Do(ctx context.Context, consumer, messageID string, fn func(ctx context.Context) error) (bool, error) {
	if fn == nil {
		return false, fmt.Errorf("%w: Do needs a function to run", ErrInvalidConfig)
	}
	c, err := s.Claim(ctx, consumer, messageID)
	if err != nil || c == nil {
		return false, err
	}
	if err := fn(ctx); err != nil {
		if rerr := c.Release(context.WithoutCancel(ctx)); rerr != nil {
			return true, errors.Join(err, rerr)
		}
		return true, err
	}
	return true, nil
}

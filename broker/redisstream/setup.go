package redisstream

import (
	"context"
	"errors"
	"fmt"

	"github.com/redis/go-redis/v9"
)

// Start positions for EnsureGroup.
const (
	// StartOldest makes a new group read the stream from its first entry: nothing published before the group
	// existed is missed, and the inbox absorbs what other groups' consumers already handled.
	StartOldest = "0"
	// StartNew makes a new group read only entries added after it was created.
	StartNew = "$"
)

// EnsureGroup creates the consumer group on stream, and the stream if it does not exist (XGROUP CREATE …
// MKSTREAM). start is where a new group begins reading: StartOldest (the default when empty), StartNew or an
// entry ID. A group that exists already is left as it is, start included, so EnsureGroup is safe to call at
// every start-up. Subscribers never create groups on their own.
func EnsureGroup(ctx context.Context, rdb redis.Cmdable, stream, group, start string) error {
	if rdb == nil {
		return errors.New("redisstream: EnsureGroup needs a Redis client, such as redis.NewClient(&redis.Options{Addr: \"localhost:6379\"})")
	}
	if stream == "" || group == "" {
		return fmt.Errorf("redisstream: EnsureGroup needs a stream and a group name (got stream %q, group %q)", stream, group)
	}
	if start == "" {
		start = StartOldest
	}
	err := rdb.XGroupCreateMkStream(ctx, stream, group, start).Err()
	if err != nil && !redis.HasErrorPrefix(err, "BUSYGROUP") {
		return fmt.Errorf("redisstream: create group %s on stream %s: %w", group, stream, err)
	}
	return nil
}

package postbox

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"maps"
	"time"

	"github.com/postbox-go/postbox/driver"
)

// DefaultFindLimit is how many records FindByKey returns when given 0.
const DefaultFindLimit = 100

// FindMessage returns the record of the message with this ID in whatever state it is: pending, published (kept
// with RelayConfig.KeepPublished) or dead. It returns an error wrapping ErrNotFound when the outbox has no such
// record: never enqueued, or published and deleted, or cleaned up.
func (c *Client[TTx]) FindMessage(ctx context.Context, id string) (Record, error) {
	norm, err := parseUUID(id)
	if err != nil {
		return Record{}, fmt.Errorf("%w: find: %v", ErrInvalidConfig, err)
	}
	op, err := c.operator("find messages")
	if err != nil {
		return Record{}, err
	}
	rows, err := op.FindRecords(ctx, norm, "", 1)
	if err != nil {
		return Record{}, fmt.Errorf("postbox: find %s: %w", norm, err)
	}
	if len(rows) == 0 {
		return Record{}, fmt.Errorf("postbox: message %s: %w", norm, ErrNotFound)
	}
	return fromRows(rows)[0], nil
}

// FindByKey returns the records with this key in every state, newest first, at most limit (0 means
// DefaultFindLimit). The outbox indexes keys only for ordered table sets (Config.Ordered), and there only of
// unpublished records, so elsewhere the look-up reads the whole table: it is for an operator's search, not a
// page that loads often.
func (c *Client[TTx]) FindByKey(ctx context.Context, key string, limit int) ([]Record, error) {
	if key == "" {
		return nil, fmt.Errorf("%w: find: the key is empty", ErrInvalidConfig)
	}
	if err := checkOperatorText("find: key", key, MaxKeyLen); err != nil {
		return nil, err
	}
	if limit <= 0 {
		limit = DefaultFindLimit
	}
	op, err := c.operator("find messages")
	if err != nil {
		return nil, err
	}
	rows, err := op.FindRecords(ctx, "", key, limit)
	if err != nil {
		return nil, fmt.Errorf("postbox: find key %q: %w", key, err)
	}
	return fromRows(rows), nil
}

// ReplayFilter selects published messages to replay: those of Topic created (enqueued) in [From, To). Only
// messages kept with RelayConfig.KeepPublished and not yet cleaned up can be replayed.
type ReplayFilter struct {
	// Topic is required.
	Topic string
	// From and To bound the messages' creation time; either may be zero for an open end.
	From, To time.Time
	// Limit bounds how many messages one ReplayPublished call replays, oldest first; 0 means no limit. Call
	// again until it returns fewer to replay a large range in steps.
	Limit int
}

func (f ReplayFilter) check() error {
	if f.Topic == "" {
		return fmt.Errorf("%w: replay: the topic is empty; name the topic to replay", ErrInvalidConfig)
	}
	if err := checkOperatorText("replay: topic", f.Topic, MaxTopicLen); err != nil {
		return err
	}
	if f.Limit < 0 {
		return fmt.Errorf("%w: replay: limit is %d; use a positive number, or 0 for no limit", ErrInvalidConfig, f.Limit)
	}
	if !f.From.IsZero() && !f.To.IsZero() && !f.From.Before(f.To) {
		return fmt.Errorf("%w: replay: from %s is not before to %s", ErrInvalidConfig, f.From.Format(time.RFC3339), f.To.Format(time.RFC3339))
	}
	return nil
}

// ReplayPublished makes the published messages f selects pending again, with the same ID, attempts reset and
// available at once, so that a relay publishes them again; it returns how many. It logs the outcome with actor.
//
// The messages keep their IDs, as every redelivery does: a consumer that already processed one skips it as a
// duplicate through its inbox, and one that never saw it (a new consumer, or one whose inbox claims were cleaned
// up) processes it. Brokers that deduplicate by ID within a window (NATS JetStream's duplicate window) drop a
// replay made within that window. Replayed messages are published again in ID order among themselves, but after
// newer messages of the same key that were already published. To deliver a message as new to every consumer,
// send a copy with ResendEdited instead.
func (c *Client[TTx]) ReplayPublished(ctx context.Context, f ReplayFilter, actor string) (int64, error) {
	if err := f.check(); err != nil {
		return 0, err
	}
	if err := checkOperatorText("replay: actor", actor, MaxActorLen); err != nil {
		return 0, err
	}
	op, err := c.operator("replay published messages")
	if err != nil {
		return 0, err
	}
	n, err := op.ReplayPublished(ctx, driver.ReplayFilter(f), c.cfg.Clock.Now())
	if err != nil {
		return 0, fmt.Errorf("postbox: replay %s: %w", f.Topic, err)
	}
	c.logOp(ctx, "published messages replayed", actor, "count", n, "topic", f.Topic, "from", f.From, "to", f.To)
	return n, nil
}

// CountReplay counts the published messages f would replay (f.Limit aside), reading at most limit+1 of them (0
// means DefaultCountLimit).
func (c *Client[TTx]) CountReplay(ctx context.Context, f ReplayFilter, limit int64) (Count, error) {
	if err := f.check(); err != nil {
		return Count{}, err
	}
	op, err := c.operator("count published messages")
	if err != nil {
		return Count{}, err
	}
	limit = countLimit(limit)
	n, err := op.CountPublished(ctx, driver.ReplayFilter(f), limit)
	if err != nil {
		return Count{}, fmt.Errorf("postbox: count published %s: %w", f.Topic, err)
	}
	return capped(n, limit), nil
}

// HeaderReplayOf is the header ResendEdited sets on a copy: the ID of the message it replaces.
const HeaderReplayOf = "postbox-replay-of"

// HeaderEditedBy is the header ResendEdited sets on a copy: the actor who edited and sent it.
const HeaderEditedBy = "postbox-edited-by"

// ResendEdited enqueues m, in a transaction of its own, as a new message (a new ID unless m.ID is set) naming
// originalID in the header postbox-replay-of, and returns its ID. It is how an operator sends a corrected payload
// for a dead or published message: build m from the original record with the payload edited. The original is
// left as it is; purge it with PurgeDead when it is dead. m.AvailableAt is ignored: the copy is available at once.
// m is validated as Enqueue validates it, the client's event registry included. The copy carries actor in the
// header postbox-edited-by, and the log line says what changed: the topic, type and key, old and new, and the
// SHA-256 digests of the old and new payloads.
func (c *Client[TTx]) ResendEdited(ctx context.Context, originalID string, m Message, actor string) (string, error) {
	orig, err := parseUUID(originalID)
	if err != nil {
		return "", fmt.Errorf("%w: resend: original ID: %v", ErrInvalidConfig, err)
	}
	if err := checkOperatorText("resend: actor", actor, MaxActorLen); err != nil {
		return "", err
	}
	h := make(map[string]string, len(m.Headers)+2)
	maps.Copy(h, m.Headers)
	h[HeaderReplayOf] = orig
	if actor != "" {
		h[HeaderEditedBy] = actor
	}
	m.Headers = h
	var old Record
	if found, err := c.FindMessage(ctx, orig); err == nil {
		old = found
	}
	m.AvailableAt = time.Time{}
	var id string
	err = c.InTx(ctx, func(ctx context.Context, tx TTx) error {
		var err error
		id, err = c.Enqueue(ctx, tx, m)
		return err
	})
	if err != nil {
		return "", err
	}
	attrs := []any{"id", id, "replay_of", orig, "topic", m.Topic, "type", m.Type, "key", m.Key, "payload_sha256", digest(m.Payload)}
	if old.ID != "" {
		attrs = append(attrs, "old_topic", old.Topic, "old_type", old.Type, "old_key", old.Key, "old_payload_sha256", digest(old.Payload))
	}
	c.logOp(ctx, "edited message sent", actor, attrs...)
	return id, nil
}

// digest is the hex SHA-256 of b, for logs that say a payload changed without showing it.
func digest(b []byte) string {
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:])
}

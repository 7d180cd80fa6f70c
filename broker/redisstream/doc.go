// Package redisstream publishes Postbox messages to Redis streams and receives them as a consumer of a Redis
// consumer group, with github.com/redis/go-redis/v9. It needs Redis 6.2 or later (XAUTOCLAIM).
//
// # Wire format
//
// A message is one entry (XADD with an automatic ID) on stream StreamPrefix + topic. Its fields are the
// CloudEvents attributes with the prefix "ce_" (ce_specversion, ce_id = the message ID, ce_source, ce_type,
// ce_time, and ce_subject and ce_partitionkey = the key), the user headers under their own names, and the
// payload in ce_data, sorted by name with the payload last:
//
//	ce_id            0190a6c2-5b1e-7c4d-9a3f-2e8b1c0d4f6a
//	ce_partitionkey  order-42
//	ce_source        postbox
//	…
//	traceparent      00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01
//	ce_data          {"total":42}
//
// # Dedup
//
// Redis streams have no publish-side dedup: every XADD adds an entry, so a batch the relay publishes again after
// a crash between XADD and settle is stored twice. The message ID travels in ce_id for the consumers' inbox,
// which processes the second copy as a duplicate. (Newer Redis releases add idempotent XADD; this package does
// not use it, so that it runs on Redis 6.2 and 7.)
//
// # Order
//
// A stream keeps entries in the order XADD stored them; a batch goes out in one pipeline on one connection, so
// its records keep their order, and the relay's ordered mode publishes a key's messages one batch after another.
// A Subscriber hands one key's messages to its handler one at a time, in stream order. Order across consumers
// is not kept: a group gives each entry to whichever consumer reads next, so two consumers of a group may handle
// one key's messages at the same time. Run one consumer per group when per-key order matters. A message
// delivered again (after a Nack or ClaimIdle) comes after those read meanwhile.
//
// # Acks, redelivery and trimming
//
// An entry a consumer read stays in the group's pending list until XACK. Nack leaves it there and makes it
// claimable at once (or after the delay); every consumer of the group claims entries idle for ClaimIdle with
// XAUTOCLAIM, so the messages of a crashed consumer, or of a handler that hangs, are delivered again after
// ClaimIdle. Delivery.Attempt is the entry's delivery count (from XPENDING for claimed entries).
//
// MaxLen and MaxAge keep a stream's memory bounded by trimming old entries on each XADD, approximately (~) so
// trimming stays cheap. Trimming does not look at consumer groups: an entry trimmed before a group acknowledged
// it is gone for that group, and the subscriber logs the IDs it finds lost this way. Size the limits for the
// longest backlog the consumers must be able to catch up on, or leave them off and trim with XTRIM once every
// group is past an ID.
//
// # Setup
//
// Groups are created only when you ask, with EnsureGroup; NewPublisher and NewSubscriber do no I/O.
//
//	rdb := redis.NewClient(&redis.Options{Addr: "localhost:6379", ContextTimeoutEnabled: true})
//	pub, err := redisstream.NewPublisher(rdb, &redisstream.PublisherConfig{MaxLen: 1_000_000})
//	relay, err := postbox.NewRelay(client, pub, nil)
//
//	err = redisstream.EnsureGroup(ctx, rdb, "orders", "billing", redisstream.StartOldest)
//	sub, err := redisstream.NewSubscriber(rdb, &redisstream.SubscriberConfig{Group: "billing", Topics: []string{"orders"}})
//	err = broker.Consume(ctx, sub, consumer, handler, nil) // blocks until ctx is cancelled
package redisstream

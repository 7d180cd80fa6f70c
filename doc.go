// Package postbox implements the transactional outbox: an event is written in the same database transaction as
// the business change that caused it, and a relay publishes committed events to a message broker. An event exists
// if and only if its transaction committed, and once committed it reaches the broker even if the process dies a
// millisecond later.
//
// # Enqueue
//
// Make a Client from a driver (pgxv5.New(pool) for pgx, databasesql.New(db, dialect) for database/sql), run its
// migrations once, and call Enqueue inside the transaction that saves your data:
//
//	client, err := postbox.NewClient(pgxv5.New(pool), nil)
//	_, err = client.Migrate(ctx) // or apply client.Migrations() with your own tool
//
//	tx, err := pool.Begin(ctx)
//	_, err = tx.Exec(ctx, "INSERT INTO orders (id, total) VALUES ($1, $2)", id, total)
//	msgID, err := client.Enqueue(ctx, tx, postbox.Message{Topic: "orders", Key: id, Type: "order.created", Payload: body})
//	err = tx.Commit(ctx)
//
// Enqueue validates the message before writing anything, never commits or rolls back your transaction, and returns
// the message's ID (a UUIDv7 unless you set Message.ID), the key the broker and the consumers' inbox deduplicate by.
//
// # Relay
//
// A Relay claims batches of committed messages, publishes them through a Publisher and settles each batch in one
// statement. Run as many relays as you like on one table: claims skip rows other relays hold. If a relay dies,
// its claim's transaction ends with its connection and another relay publishes the batch again; that in-flight
// batch is the only source of duplicates, which the broker's dedup (the message ID) and the consumer's inbox
// absorb.
//
//	relay, err := postbox.NewRelay(client, publisher, &postbox.RelayConfig{BatchSize: 500})
//	err = relay.Run(ctx) // until ctx is cancelled; the in-flight batch settles first
//
// A client made with Config.Ordered makes its relays publish the messages of each key one at a time, in enqueue
// order.
//
// A failed publish is retried with exponential backoff and jitter; after RelayConfig.MaxAttempts, or at once for
// an error wrapped with Permanent, the message is parked as dead with its last error. A database or broker outage
// costs no attempt: the relay retries every second at most and resumes as soon as the database or broker answers
// (see RelayConfig.ErrorBackoffMax). Operators list, retry and
// purge dead messages with ListDead, RetryDead and PurgeDead, and watch Stats.
//
// A RelayGroup runs the relays of many databases (a database per tenant, shards) in one process, each source with
// its own relay, so that one that is down or slow delays no other; sources are added and removed while it runs.
//
// # Consume
//
// On the receiving side, the inbox makes each message's effects happen once although brokers deliver at least
// once. A Handler does its writes on the transaction it is given and returns the messages to enqueue in it.
// Process begins a transaction, claims the message ID for the consumer in the inbox table, runs the handler,
// enqueues what it returned, and commits; a message claimed before is a Duplicate and the handler does not run.
// It returns a Result whose Outcome says how to settle the message with the broker: ack Processed, Duplicate and
// Failed, nack Retry, reject Rejected (a message that can never be processed).
//
//	res, err := postbox.Process(ctx, client, "billing", m, func(ctx context.Context, tx pgx.Tx, m postbox.Message) ([]postbox.Message, error) {
//		// business writes on tx; the messages returned are enqueued in the same transaction
//		return []postbox.Message{{Topic: "payments", Key: m.Key, Type: "payment.charged", Payload: body}}, nil
//	})
//
// broker.Consume does that for every message a broker.Subscriber delivers, and settles each delivery by its
// outcome; it blocks until ctx is cancelled:
//
//	consumer, err := postbox.NewConsumer(client, "billing", &postbox.ConsumerConfig{MaxFailures: 5})
//	err = broker.Consume(ctx, sub, consumer, handle, nil)
//
// A Consumer adds a failure policy (give up on a message after MaxFailures, optionally to a dead-letter topic),
// caps on what a delivered message may carry, and an inbox scoped by source; its documentation states what the
// inbox trusts. JSONHandler decodes a JSON payload into a command type, ignoring fields the type does not know,
// and encodes the events the command handler returns.
package postbox

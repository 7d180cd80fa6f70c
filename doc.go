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
//	err = client.Enqueue(ctx, tx, postbox.Message{Topic: "orders", Key: id, Type: "order.created", Payload: body})
//	err = tx.Commit(ctx)
//
// Enqueue validates the message before writing anything and never commits or rolls back your transaction.
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
// A failed publish is retried with exponential backoff and jitter; after RelayConfig.MaxAttempts, or at once for
// an error wrapped with Permanent, the message is parked as dead with its last error. A database or broker outage
// costs no attempt: the relay retries every second at most and resumes as soon as the database or broker answers
// (see RelayConfig.ErrorBackoffMax). Operators list, retry and
// purge dead messages with ListDead, RetryDead and PurgeDead, and watch Stats.
package postbox

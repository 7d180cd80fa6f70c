// Package wal is an opt-in WAL mode for PostgreSQL 14 and later: a client writes each message into the
// write-ahead log with pg_logical_emit_message instead of inserting an outbox row, and a Relay reads the messages
// from a logical replication slot, decoded at commit and in commit order. There is no row to poll, delete or
// vacuum. A rolled-back transaction's messages are never decoded.
//
//	drv, err := wal.NewWithConfig(pool, &wal.Config{Secret: secret}) // signs every message
//	client, err := postbox.NewClient(drv, nil)                       // Enqueue and EnqueueBatch as usual
//	relay, err := wal.NewRelay(pool, client, publisher, &wal.RelayConfig{Secret: secret}) // creates the slot postbox_postbox_outbox
//	err = relay.Run(ctx)
//
// Every role may call pg_logical_emit_message unless it is revoked from PUBLIC, so the relay publishes only the
// messages signed with the secret its clients share (RelayConfig.Secret), and refuses to run without one while
// PUBLIC may call the function. docs/WAL.md, "Who can publish", gives the REVOKE and GRANT statements.
//
// The relay confirms a position to the server only once every message up to it is acknowledged by the broker or
// parked as dead: at least once, and a restarted relay resumes from the confirmed position. A message that fails
// for good is written into the outbox table as a dead row, where the dead-letter operations find it; a retried
// one is published by a table relay (postbox.NewRelay on the same tables), as is a message delayed with
// AvailableAt, which the client inserts as a row.
//
// The costs: the server needs wal_level = logical and the relay's role the REPLICATION attribute; the slot keeps
// WAL on the server's disk while no relay reads it (bound it with max_slot_wal_keep_size); and a slot lives on
// one server, so a failover needs care. docs/WAL.md says when to choose this mode.
//
// This package is a module of its own, so that users of the table mode do not download pglogrepl.
package wal

// Package chaos is Postbox's fault-injection suite, and the tools it is built from: a ledger that records every
// committed event and every effect, in the order each consumer ran them, and a nats-server, a RabbitMQ node and a
// PostgreSQL cluster of a test's own that it may stop and restart without disturbing shared servers. The TCP proxy
// that stalls and cuts connections is internal/testenv/tcpproxy, shared with the adapters' tests.
//
// The suite runs producers that enqueue in real PostgreSQL transactions, relays that publish to a real broker and
// consumers that process through the inbox, while it kills relay and consumer processes with SIGKILL, stops and
// restarts the broker (nats-server and RabbitMQ) and the database, breaks the network between relay and broker,
// and parks poison messages, in ordered mode too. Each scenario ends by printing
//
//	lost=N duplicates_published=N duplicate_effects=N
//
// and fails unless nothing committed was lost, no effect happened twice, and published duplicates stay within the
// scenario's bound. docs/GUARANTEES.md lists the scenarios and the promises they check.
//
// Run it from this directory: `go test ./...` at reduced sizes (a few minutes on two cores), or at full size
// (50,000 events under relay kills) with `POSTBOX_CHAOS_FULL=1 go test -v ./...`, `go test -v ./... -chaos.full`,
// or `make chaos` from the repository root. It needs PostgreSQL (127.0.0.1:5432, or POSTBOX_TEST_POSTGRES),
// RabbitMQ (POSTBOX_TEST_RABBITMQ), nats-server (on the PATH, at /usr/sbin/nats-server, or POSTBOX_NATS_SERVER),
// PostgreSQL's initdb and pg_ctl (on the PATH, in /usr/lib/postgresql/15/bin, or POSTBOX_PG_BIN) and RabbitMQ's
// rabbitmq-server script (at /usr/lib/rabbitmq/bin/rabbitmq-server, on the PATH, or POSTBOX_RABBITMQ_SERVER).
package chaos

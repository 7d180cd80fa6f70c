-- Places an order and enqueues its event in one PostgreSQL transaction, through Postbox's SQL API, from psql.
--
-- The outbox must have the SQL API (postbox migrate up --sql-api); a relay (postbox relay) publishes the event.
--
--   psql postgres://localhost/app -v order_id=order-42 -v topic=orders -f enqueue.sql
--
-- It prints the event's ID.
\set ON_ERROR_STOP on
CREATE TABLE IF NOT EXISTS orders (id text PRIMARY KEY, customer text NOT NULL, cents integer NOT NULL);
-- docs: psql
BEGIN;
INSERT INTO orders (id, customer, cents) VALUES (:'order_id', 'ada', 1250);
SELECT postbox_outbox_enqueue(
    topic   => :'topic',
    type    => 'order.created',
    payload => format('{"order_id":%s,"cents":%s}', to_json(:'order_id'::text), 1250),
    key     => :'order_id',
    headers => '{"tenant":"acme"}'
) AS id;
COMMIT;
-- docs: end

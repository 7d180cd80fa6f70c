// Places an order and enqueues its event in one PostgreSQL transaction, through Postbox's SQL API, with pg.
//
// The outbox must have the SQL API (postbox migrate up --sql-api); a relay (postbox relay) publishes the event.
//
//   npm ci && DATABASE_URL=postgres://localhost/app node enqueue_pg.js order-42
//
// Environment: DATABASE_URL (required), POSTBOX_TABLE (the outbox table, default postbox_outbox), POSTBOX_TOPIC
// (default orders). It prints the event's ID.
'use strict';
const { Client } = require('pg');

async function placeOrder(client, table, topic, orderId, cents) {
  // docs: node pg
  const payload = JSON.stringify({ order_id: orderId, cents });
  const enqueue = `SELECT ${client.escapeIdentifier(table + '_enqueue')}(topic => $1, type => $2,
    payload => $3::text, key => $4, headers => $5::jsonb) AS id`;
  await client.query('BEGIN');
  try {
    await client.query('INSERT INTO orders (id, customer, cents) VALUES ($1, $2, $3)', [orderId, 'ada', cents]);
    const { rows } = await client.query(enqueue,
      [topic, 'order.created', payload, orderId, JSON.stringify({ tenant: 'acme' })]);
    await client.query('COMMIT');
    return rows[0].id;
  } catch (err) {
    await client.query('ROLLBACK');
    throw err;
  }
  // docs: end
}

async function main() {
  if (process.argv.length !== 3) throw new Error('usage: node enqueue_pg.js ORDER_ID');
  const client = new Client({ connectionString: process.env.DATABASE_URL });
  await client.connect();
  try {
    await client.query('CREATE TABLE IF NOT EXISTS orders (id text PRIMARY KEY, customer text NOT NULL, cents integer NOT NULL)');
    console.log(await placeOrder(client, process.env.POSTBOX_TABLE || 'postbox_outbox',
      process.env.POSTBOX_TOPIC || 'orders', process.argv[2], 1250));
  } finally {
    await client.end();
  }
}

main().catch((err) => { console.error(err.message); process.exit(1); });

// Places an order and enqueues its event in one MySQL or MariaDB transaction, through Postbox's SQL API, with
// mysql2.
//
// The outbox must have the SQL API (postbox migrate up --sql-api, MySQL 8 or MariaDB 10.10+); a relay (postbox
// relay) publishes the event.
//
//   npm ci && MYSQL_URL=mysql://app:secret@localhost:3306/app node enqueue_mysql.js order-42
//
// Environment: MYSQL_URL (required), POSTBOX_TABLE (the outbox table, default postbox_outbox), POSTBOX_TOPIC
// (default orders). It prints the event's ID.
'use strict';
const mysql = require('mysql2/promise');

async function placeOrder(conn, table, topic, orderId, cents) {
  // docs: node mysql2
  const payload = JSON.stringify({ order_id: orderId, cents });
  await conn.beginTransaction();
  try {
    await conn.query('INSERT INTO orders (id, customer, cents) VALUES (?, ?, ?)', [orderId, 'ada', cents]);
    // topic, type, payload, key, headers (JSON), available_at (NULL: at once), then the ID it sets.
    await conn.query('CALL ??(?, ?, ?, ?, ?, NULL, @postbox_id)',
      [table + '_enqueue', topic, 'order.created', payload, orderId, JSON.stringify({ tenant: 'acme' })]);
    const [[{ id }]] = await conn.query('SELECT @postbox_id AS id');
    await conn.commit();
    return id;
  } catch (err) {
    await conn.rollback();
    throw err;
  }
  // docs: end
}

async function main() {
  if (process.argv.length !== 3) throw new Error('usage: node enqueue_mysql.js ORDER_ID');
  const conn = await mysql.createConnection(process.env.MYSQL_URL);
  try {
    await conn.query('CREATE TABLE IF NOT EXISTS orders (id VARCHAR(64) PRIMARY KEY, customer TEXT NOT NULL, cents INT NOT NULL)');
    console.log(await placeOrder(conn, process.env.POSTBOX_TABLE || 'postbox_outbox',
      process.env.POSTBOX_TOPIC || 'orders', process.argv[2], 1250));
  } finally {
    await conn.end();
  }
}

main().catch((err) => { console.error(err.message); process.exit(1); });

#!/usr/bin/env python3
"""Places an order and enqueues its event in one PostgreSQL transaction, through Postbox's SQL API.

The outbox must have the SQL API (postbox migrate up --sql-api); a relay (postbox relay) publishes the event.
It uses Debian's python3-psycopg2 (apt-get install python3-psycopg2) or psycopg2 from PyPI.

    DATABASE_URL=postgres://localhost/app python3 enqueue.py order-42

Environment: DATABASE_URL (required), POSTBOX_TABLE (the outbox table, default postbox_outbox), POSTBOX_TOPIC
(default orders). It prints the event's ID.
"""
import json
import os
import sys

import psycopg2
from psycopg2 import sql


def place_order(conn, table, topic, order_id, cents):
    # docs: python
    payload = json.dumps({"order_id": order_id, "cents": cents}, separators=(",", ":"))
    enqueue = sql.SQL(
        "SELECT {}(topic => %s, type => %s, payload => %s, key => %s, headers => %s)"
    ).format(sql.Identifier(table + "_enqueue"))
    with conn:  # one transaction: committed when the block ends, rolled back if it raises
        with conn.cursor() as cur:
            cur.execute("INSERT INTO orders (id, customer, cents) VALUES (%s, %s, %s)", (order_id, "ada", cents))
            cur.execute(enqueue, (topic, "order.created", payload, order_id, json.dumps({"tenant": "acme"})))
            return cur.fetchone()[0]
    # docs: end


def main():
    if len(sys.argv) != 2:
        sys.exit("usage: enqueue.py ORDER_ID")
    conn = psycopg2.connect(os.environ["DATABASE_URL"])
    try:
        with conn, conn.cursor() as cur:
            cur.execute("CREATE TABLE IF NOT EXISTS orders (id text PRIMARY KEY, customer text NOT NULL, cents integer NOT NULL)")
        event_id = place_order(conn, os.environ.get("POSTBOX_TABLE", "postbox_outbox"),
                               os.environ.get("POSTBOX_TOPIC", "orders"), sys.argv[1], 1250)
        print(event_id)
    finally:
        conn.close()


if __name__ == "__main__":
    main()

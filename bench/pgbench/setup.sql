-- Tables for run.sh: the bench's domain table, an outbox of Postbox's PostgreSQL layout, and two cheaper rows.
DROP TABLE IF EXISTS pgb_orders, pgb_outbox, pgb_tiny;
CREATE TABLE pgb_orders (id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY, customer text NOT NULL,
    amount bigint NOT NULL, created_at timestamptz NOT NULL DEFAULT now());
CREATE TABLE pgb_outbox (
    id           uuid        PRIMARY KEY,
    topic        text        NOT NULL,
    key          text        NOT NULL DEFAULT '',
    type         text        NOT NULL,
    payload      bytea       NOT NULL,
    headers      jsonb,
    status       text        NOT NULL DEFAULT 'pending' CHECK (status IN ('pending', 'published', 'dead')),
    attempts     integer     NOT NULL DEFAULT 0,
    last_error   text        NOT NULL DEFAULT '',
    available_at timestamptz NOT NULL,
    created_at   timestamptz NOT NULL,
    published_at timestamptz
);
CREATE INDEX ON pgb_outbox (id) WHERE status = 'pending';
CREATE INDEX ON pgb_outbox (topic, id) WHERE status = 'dead';
CREATE INDEX ON pgb_outbox (published_at) WHERE status = 'published';
CREATE TABLE pgb_tiny (id bigint);

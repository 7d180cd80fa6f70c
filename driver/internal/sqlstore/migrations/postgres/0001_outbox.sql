{{if .Schema}}CREATE SCHEMA IF NOT EXISTS {{.Schema}};
{{end}}{{if .Partitioned}}-- Partitioned by creation time (package partition maintains the partitions). A partitioned table's primary key
-- must hold the partition column, so the database enforces unique (id, created_at); Postbox's IDs are unique anyway.
CREATE TABLE IF NOT EXISTS {{.Outbox}} (
    id           uuid        NOT NULL,
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
    published_at timestamptz,
    PRIMARY KEY (id, created_at)
) PARTITION BY RANGE (created_at);
-- Rows no named partition covers land here, so an insert never fails; the maintainer moves them out when it
-- creates their partition.
CREATE TABLE IF NOT EXISTS {{.Partition "_default"}} PARTITION OF {{.Outbox}} DEFAULT;
{{else}}CREATE TABLE IF NOT EXISTS {{.Outbox}} (
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
{{end}}-- The claim scans this index in id (UUIDv7, time) order; it holds pending rows only, so it stays small.
CREATE INDEX IF NOT EXISTS {{.Index "_pending_idx"}} ON {{.Outbox}} (id) WHERE status = 'pending';
CREATE INDEX IF NOT EXISTS {{.Index "_dead_idx"}} ON {{.Outbox}} (topic, id) WHERE status = 'dead';
CREATE INDEX IF NOT EXISTS {{.Index "_published_idx"}} ON {{.Outbox}} (published_at) WHERE status = 'published';

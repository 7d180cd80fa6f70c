CREATE TABLE IF NOT EXISTS {{.Outbox}} (
    id           TEXT    PRIMARY KEY,
    topic        TEXT    NOT NULL,
    key          TEXT    NOT NULL DEFAULT '',
    type         TEXT    NOT NULL,
    payload      BLOB    NOT NULL,
    headers      TEXT,
    status       TEXT    NOT NULL DEFAULT 'pending' CHECK (status IN ('pending', 'published', 'dead')),
    attempts     INTEGER NOT NULL DEFAULT 0,
    last_error   TEXT    NOT NULL DEFAULT '',
    available_at INTEGER NOT NULL, -- Unix microseconds
    created_at   INTEGER NOT NULL, -- Unix microseconds
    published_at INTEGER           -- Unix microseconds
) WITHOUT ROWID;
CREATE INDEX IF NOT EXISTS {{.Index "_pending_idx"}} ON {{.Outbox}} (id) WHERE status = 'pending';
CREATE INDEX IF NOT EXISTS {{.Index "_dead_idx"}} ON {{.Outbox}} (topic, id) WHERE status = 'dead';
CREATE INDEX IF NOT EXISTS {{.Index "_published_idx"}} ON {{.Outbox}} (published_at) WHERE status = 'published';

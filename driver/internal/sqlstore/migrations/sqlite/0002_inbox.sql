-- One row per message a consumer has claimed, inserted in the consumer's transaction together with the handler's
-- writes. The primary key makes a second claim of the same message a no-op (INSERT ... ON CONFLICT DO NOTHING).
CREATE TABLE IF NOT EXISTS {{.Inbox}} (
    consumer    TEXT    NOT NULL,
    message_id  TEXT    NOT NULL,
    status      TEXT    NOT NULL DEFAULT 'processed' CHECK (status IN ('processed', 'failed')),
    received_at INTEGER NOT NULL, -- Unix microseconds
    failures    INTEGER NOT NULL DEFAULT 0,
    last_error  TEXT    NOT NULL DEFAULT '',
    PRIMARY KEY (consumer, message_id)
) WITHOUT ROWID;
CREATE INDEX IF NOT EXISTS {{.InboxIndex "_received_idx"}} ON {{.Inbox}} (received_at);
-- Failed deliveries are counted here, each in a short transaction of its own, because the failed delivery's
-- claim rolled back with its handler's writes.
CREATE TABLE IF NOT EXISTS {{.InboxTable "_failures"}} (
    consumer   TEXT    NOT NULL,
    message_id TEXT    NOT NULL,
    failures   INTEGER NOT NULL,
    last_error TEXT    NOT NULL DEFAULT '',
    updated_at INTEGER NOT NULL, -- Unix microseconds
    PRIMARY KEY (consumer, message_id)
) WITHOUT ROWID;
CREATE INDEX IF NOT EXISTS {{.InboxIndex "_failures_updated_idx"}} ON {{.InboxTable "_failures"}} (updated_at);

-- One row per message a consumer has claimed, inserted in the consumer's transaction together with the handler's
-- writes. The primary key makes a second claim of the same message a no-op (INSERT ... ON CONFLICT DO NOTHING).
CREATE TABLE IF NOT EXISTS {{.Inbox}} (
    consumer    text        NOT NULL,
    message_id  text        NOT NULL,
    status      text        NOT NULL DEFAULT 'processed' CHECK (status IN ('processed', 'failed')),
    received_at timestamptz NOT NULL,
    failures    integer     NOT NULL DEFAULT 0,
    last_error  text        NOT NULL DEFAULT '',
    PRIMARY KEY (consumer, message_id)
);
-- Cleanup deletes the oldest claims first.
CREATE INDEX IF NOT EXISTS {{.InboxIndex "_received_idx"}} ON {{.Inbox}} (received_at);
-- Failed deliveries are counted here, each in a short transaction of its own, because the failed delivery's
-- claim rolled back with its handler's writes.
CREATE TABLE IF NOT EXISTS {{.InboxTable "_failures"}} (
    consumer   text        NOT NULL,
    message_id text        NOT NULL,
    failures   integer     NOT NULL,
    last_error text        NOT NULL DEFAULT '',
    updated_at timestamptz NOT NULL,
    PRIMARY KEY (consumer, message_id)
);
CREATE INDEX IF NOT EXISTS {{.InboxIndex "_failures_updated_idx"}} ON {{.InboxTable "_failures"}} (updated_at);

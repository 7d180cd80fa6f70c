-- One row per message a consumer has claimed, inserted in the consumer's transaction together with the handler's
-- writes. The primary key makes a second claim of the same message a no-op (INSERT ... ON CONFLICT DO NOTHING).
{{- if .Partitioned}}
-- Partitioned by message ID, whose UUIDv7 text starts with the message's creation time, so the key holds the
-- partition column and a duplicate claim meets the first in the same partition (package partition maintains the
-- partitions). The column compares bytewise ("C"), as the bounds do: a collation that ignores '-' must not place
-- rows, and the primary key must use the partition key's collation.
CREATE TABLE IF NOT EXISTS {{.Inbox}} (
    consumer    text        NOT NULL,
    message_id  text        COLLATE "C" NOT NULL,
    status      text        NOT NULL DEFAULT 'processed' CHECK (status IN ('processed', 'failed')),
    received_at timestamptz NOT NULL,
    failures    integer     NOT NULL DEFAULT 0,
    last_error  text        NOT NULL DEFAULT '',
    PRIMARY KEY (consumer, message_id)
) PARTITION BY RANGE (message_id COLLATE "C");
-- Claims no named partition covers land here: those of messages made outside the maintained time range, and IDs
-- that are not UUIDv7. The maintainer never drops it; Client.InboxCleanup removes its old claims.
CREATE TABLE IF NOT EXISTS {{.InboxTable "_default"}} PARTITION OF {{.Inbox}} DEFAULT;
{{- else}}
CREATE TABLE IF NOT EXISTS {{.Inbox}} (
    consumer    text        NOT NULL,
    message_id  text        NOT NULL,
    status      text        NOT NULL DEFAULT 'processed' CHECK (status IN ('processed', 'failed')),
    received_at timestamptz NOT NULL,
    failures    integer     NOT NULL DEFAULT 0,
    last_error  text        NOT NULL DEFAULT '',
    PRIMARY KEY (consumer, message_id)
);
{{- end}}
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

-- Topics an operator paused (Client.PauseTopic): relays read this small table every few seconds and skip the
-- topics in it when they claim. Dead records are listed through claim_idx (status, id), which needs no new index.
-- Dead records of one key are found in that index too, reading the dead records in id order: MySQL has no partial
-- index, and an index by key would grow with every message enqueued, not only the dead ones.
CREATE TABLE IF NOT EXISTS {{.OutboxTable "_paused"}} (
    topic     VARCHAR(255) NOT NULL PRIMARY KEY,
    paused_at BIGINT       NOT NULL, -- Unix microseconds
    paused_by VARCHAR(255) NOT NULL DEFAULT ''
) ENGINE = InnoDB DEFAULT CHARSET = utf8mb4 COLLATE = utf8mb4_bin;
-- The inbox view lists a consumer's given-up messages, latest first, without reading its processed claims. MySQL
-- 8 has no CREATE INDEX IF NOT EXISTS, so the statement is built only when the catalogue lacks the index, which
-- keeps the migration safe to run twice. InnoDB adds an index without blocking writes.
SET @postbox_ddl = IF((SELECT COUNT(*) FROM information_schema.statistics WHERE table_schema = {{.SchemaName}}
    AND table_name = {{.InboxName}} AND index_name = 'failed_idx') = 0,
    'ALTER TABLE {{.Inbox}} ADD INDEX failed_idx (status, consumer, received_at)', 'DO 0');
PREPARE postbox_ddl FROM @postbox_ddl;
EXECUTE postbox_ddl;
DEALLOCATE PREPARE postbox_ddl;

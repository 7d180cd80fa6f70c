{{- if .Ordered}}
-- Only for table sets with Config.Ordered. Ordered mode claims a record only when no earlier unpublished record
-- of its key blocks it; this index answers that check with one probe. MySQL 8 has no CREATE INDEX IF NOT EXISTS,
-- so the statement is built only when the catalogue lacks the index, which keeps the migration safe to run twice.
-- An InnoDB key holds at most 3072 bytes: the key column takes its first 255 characters (1020 bytes in utf8mb4);
-- longer keys sharing them are told apart by the row.
SET @postbox_ddl = IF((SELECT COUNT(*) FROM information_schema.statistics WHERE table_schema = {{.SchemaName}}
    AND table_name = {{.OutboxName}} AND index_name = {{.IndexName "_key_idx"}}) = 0,
    'ALTER TABLE {{.Outbox}} ADD INDEX {{.Index "_key_idx"}} (`key`(255), status, id)', 'DO 0');
PREPARE postbox_ddl FROM @postbox_ddl;
EXECUTE postbox_ddl;
DEALLOCATE PREPARE postbox_ddl;
{{- end}}

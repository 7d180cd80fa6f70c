-- MySQL 8 and MariaDB 10.6+. IDs are UUIDv7 in BINARY(16); times are Unix microseconds (UTC) in BIGINT. Every
-- statement of a MySQL migration must be safe to run twice: DDL commits on its own, so a migration cut short
-- runs again from its start. Indexes are declared inside CREATE TABLE because MySQL 8 has no CREATE INDEX IF NOT
-- EXISTS. Statements end with a semicolon at the end of a line.
CREATE TABLE IF NOT EXISTS {{.Outbox}} (
    id           BINARY(16)    NOT NULL,
    topic        VARCHAR(255)  NOT NULL,
    `key`        VARCHAR(1024) NOT NULL DEFAULT '',
    type         VARCHAR(255)  NOT NULL,
    payload      LONGBLOB      NOT NULL,
    headers      JSON          NULL,
    status       ENUM('pending', 'published', 'dead') NOT NULL DEFAULT 'pending',
    attempts     INT           NOT NULL DEFAULT 0,
    last_error   VARCHAR(2000) NOT NULL DEFAULT '',
    available_at BIGINT        NOT NULL, -- Unix microseconds
    created_at   BIGINT        NOT NULL, -- Unix microseconds
    published_at BIGINT        NULL,     -- Unix microseconds
{{- if .Partitioned}}
    -- A partitioned table's primary key must hold the partition column.
    PRIMARY KEY (id, created_at),
{{- else}}
    PRIMARY KEY (id),
{{- end}}
    -- The claim reads pending rows in id (UUIDv7, time) order straight from this index: no filesort, and the
    -- published and dead rows before them are never visited.
    KEY claim_idx (status, id),
    KEY published_idx (status, published_at)
) ENGINE = InnoDB DEFAULT CHARSET = utf8mb4 COLLATE = utf8mb4_bin
{{- if .Partitioned}}
-- Ranged by creation time; package partition splits pmax into named partitions ahead of time and drops old
-- ones. pmax takes any row beyond the last named partition, so an insert never fails.
PARTITION BY RANGE (created_at) (PARTITION pmax VALUES LESS THAN MAXVALUE)
{{- end}};

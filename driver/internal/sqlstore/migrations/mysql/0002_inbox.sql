-- One row per message a consumer has claimed, inserted in the consumer's transaction together with the handler's
-- writes. The primary key makes a second claim of the same message a no-op (INSERT IGNORE, never a caught
-- duplicate-key error). Consumer names and message IDs are at most 255 bytes, so the key fits InnoDB's 3072-byte
-- limit in utf8mb4. Times are Unix microseconds (UTC).
CREATE TABLE IF NOT EXISTS {{.Inbox}} (
    consumer    VARCHAR(255)  NOT NULL,
    message_id  VARCHAR(255)  NOT NULL,
    status      ENUM('processed', 'failed') NOT NULL DEFAULT 'processed',
    received_at BIGINT        NOT NULL,
    failures    INT           NOT NULL DEFAULT 0,
    last_error  VARCHAR(2000) NOT NULL DEFAULT '',
    PRIMARY KEY (consumer, message_id),
    -- Cleanup deletes the oldest claims first.
    KEY received_idx (received_at)
) ENGINE = InnoDB DEFAULT CHARSET = utf8mb4 COLLATE = utf8mb4_bin
{{- if .Partitioned}}
-- Ranged by message ID, whose UUIDv7 text starts with the message's creation time, compared bytewise
-- (utf8mb4_bin); the key holds the partition column, so a duplicate claim meets the first in the same partition.
-- package partition splits pmax into named partitions ahead of time and drops old ones; pmax takes any ID beyond
-- the last named partition, so a claim never fails.
PARTITION BY RANGE COLUMNS (message_id) (PARTITION pmax VALUES LESS THAN (MAXVALUE))
{{- end}};
-- Failed deliveries are counted here, each in a short transaction of its own, because the failed delivery's
-- claim rolled back with its handler's writes.
CREATE TABLE IF NOT EXISTS {{.InboxTable "_failures"}} (
    consumer   VARCHAR(255)  NOT NULL,
    message_id VARCHAR(255)  NOT NULL,
    failures   INT           NOT NULL,
    last_error VARCHAR(2000) NOT NULL DEFAULT '',
    updated_at BIGINT        NOT NULL,
    PRIMARY KEY (consumer, message_id),
    KEY updated_idx (updated_at)
) ENGINE = InnoDB DEFAULT CHARSET = utf8mb4 COLLATE = utf8mb4_bin;
-- Claimers of one (consumer, message ID) queue on one of these rows (SELECT ... FOR UPDATE) before they insert the
-- claim. Without it, InnoDB deadlocks them: waiters on an uncommitted duplicate hold shared locks, and when the
-- inserting transaction rolls back they all try to upgrade at once. A pre-made row takes one exclusive lock, so
-- waiters just queue, and each learns the outcome of the one before, as PostgreSQL's ON CONFLICT waiters do.
CREATE TABLE IF NOT EXISTS {{.InboxTable "_stripes"}} (
    stripe SMALLINT UNSIGNED NOT NULL PRIMARY KEY
) ENGINE = InnoDB;
-- 4096 stripes: 64 x 64, keeping the recursion far below MySQL's default cte_max_recursion_depth of 1000.
INSERT IGNORE INTO {{.InboxTable "_stripes"}} (stripe)
WITH RECURSIVE d (n) AS (SELECT 0 UNION ALL SELECT n + 1 FROM d WHERE n < 63)
SELECT a.n * 64 + b.n FROM d AS a CROSS JOIN d AS b;

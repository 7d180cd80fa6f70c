-- The relays seen (Client.Relays): each running relay records a heartbeat every few seconds, with its health per
-- destination, so that operators' tools and the console can tell what is stuck and why from any process.
CREATE TABLE IF NOT EXISTS {{.OutboxTable "_relays"}} (
    instance   VARCHAR(255) NOT NULL PRIMARY KEY,
    started_at BIGINT       NOT NULL, -- Unix microseconds
    seen_at    BIGINT       NOT NULL, -- Unix microseconds
    version    VARCHAR(255) NOT NULL DEFAULT '',
    state      MEDIUMTEXT   NOT NULL
) ENGINE = InnoDB DEFAULT CHARSET = utf8mb4 COLLATE = utf8mb4_bin;

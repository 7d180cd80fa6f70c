-- The relays seen (Client.Relays): each running relay records a heartbeat every few seconds, with its health per
-- destination, so that operators' tools and the console can tell what is stuck and why from any process.
CREATE TABLE IF NOT EXISTS {{.OutboxTable "_relays"}} (
    instance   TEXT    PRIMARY KEY,
    started_at INTEGER NOT NULL, -- Unix microseconds
    seen_at    INTEGER NOT NULL, -- Unix microseconds
    version    TEXT    NOT NULL DEFAULT '',
    state      TEXT    NOT NULL DEFAULT '{}'
) WITHOUT ROWID;

-- The relays seen (Client.Relays): each running relay records a heartbeat every few seconds, with its health per
-- destination, so that operators' tools and the console can tell what is stuck and why from any process.
CREATE TABLE IF NOT EXISTS {{.OutboxTable "_relays"}} (
    instance   text        PRIMARY KEY,
    started_at timestamptz NOT NULL,
    seen_at    timestamptz NOT NULL,
    version    text        NOT NULL DEFAULT '',
    state      text        NOT NULL DEFAULT '{}'
);

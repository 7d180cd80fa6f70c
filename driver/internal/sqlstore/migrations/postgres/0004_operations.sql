-- Topics an operator paused (Client.PauseTopic): relays read this small table every few seconds and skip the
-- topics in it when they claim.
CREATE TABLE IF NOT EXISTS {{.OutboxTable "_paused"}} (
    topic     text        PRIMARY KEY,
    paused_at timestamptz NOT NULL,
    paused_by text        NOT NULL DEFAULT ''
);
-- Operators list dead records newest or oldest first across topics (Client.ListDead) and page through them.
CREATE INDEX IF NOT EXISTS {{.Index "_dead_id_idx"}} ON {{.Outbox}} (id) WHERE status = 'dead';
-- Operators look up the dead records of one key (ListDead and CountDead by key) without reading the others.
CREATE INDEX IF NOT EXISTS {{.Index "_dead_key_idx"}} ON {{.Outbox}} (key, id) WHERE status = 'dead';
-- The inbox view lists a consumer's given-up messages, latest first, without reading its processed claims.
CREATE INDEX IF NOT EXISTS {{.InboxIndex "_failed_idx"}} ON {{.Inbox}} (consumer, received_at) WHERE status = 'failed';

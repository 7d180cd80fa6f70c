{{- if .Ordered}}
-- Only for table sets with Config.Ordered. Ordered mode claims a record only when no earlier unpublished record
-- of its key blocks it; this index answers that check with one probe. Dead records are in it so that a dead
-- record can hold its key when asked to; records without a key are never ordered, so they stay out of it.
CREATE INDEX IF NOT EXISTS {{.Index "_key_idx"}} ON {{.Outbox}} (key, id) WHERE status <> 'published' AND key <> '';
{{- end}}

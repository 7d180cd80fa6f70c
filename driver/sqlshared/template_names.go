package sqlshared

import "github.com/postbox-go/postbox/driver"

// Names as SQL string literals, for migrations that look in the catalogue before changing it (MySQL has no CREATE
// INDEX IF NOT EXISTS). Every name is a validated identifier, so it needs no escaping inside the quotes.

// OutboxName is the outbox table's name as a string literal.
func (t templateData) OutboxName() string { return "'" + t.n.Outbox + "'" }

// IndexName is the name Index gives the outbox's index with the given suffix, as a string literal.
func (t templateData) IndexName(suffix string) string {
	return "'" + driver.Derived(t.n.Outbox, suffix) + "'"
}

// SchemaName is the schema's name as a string literal, or DATABASE() when there is none (MySQL).
func (t templateData) SchemaName() string {
	if t.n.Schema == "" {
		return "DATABASE()"
	}
	return "'" + t.n.Schema + "'"
}

package driver

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"regexp"
	"strings"
)

// MaxIdentifierLen is the longest identifier accepted, PostgreSQL's limit.
const MaxIdentifierLen = 63

var identRE = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)

// ValidateIdentifier reports whether s may be used as a schema or table name. what names the setting in the error.
func ValidateIdentifier(what, s string) error {
	if s == "" {
		return fmt.Errorf("postbox: %s is empty; set it or leave the whole config zero for the defaults", what)
	}
	if len(s) > MaxIdentifierLen {
		return fmt.Errorf("postbox: %s %q is %d characters; use at most %d", what, s, len(s), MaxIdentifierLen)
	}
	if !identRE.MatchString(s) {
		return fmt.Errorf("postbox: %s %q is not a valid identifier; use letters, digits and underscores, not starting with a digit", what, s)
	}
	return nil
}

// Names are the identifiers of one Postbox table set. They are validated by Validate before any SQL is built.
type Names struct {
	Schema string // optional
	Outbox string
	Inbox  string
	// Partitioned selects the layout migrations create: the outbox table partitioned by creation time and the
	// inbox by the time in its message IDs, so that old rows leave by dropping partitions (package partition)
	// rather than by deleting them. It changes no identifier.
	Partitioned bool
	// Ordered adds the migration that indexes records by key for ordered relays. It changes no identifier.
	Ordered bool
	// SQLAPI adds the migration that installs the SQL enqueue API (docs/SCHEMA.md): functions named after the
	// outbox table that validate, identify and insert a message, for producers written in any language. It
	// changes no identifier.
	SQLAPI bool
}

// ValidateFor checks every identifier, as Validate does, and that the database described by caps has what n asks
// for: a schema, partitioned tables. Drivers call it in Driver.Store.
func (n Names) ValidateFor(caps Capabilities) error {
	if err := n.Validate(); err != nil {
		return err
	}
	if n.Schema != "" && !caps.Schemas {
		return fmt.Errorf("postbox: schema %q is set but %s has no schemas; leave it empty", n.Schema, caps.Dialect)
	}
	if n.Partitioned && !caps.Partitions {
		return fmt.Errorf("postbox: partitioned tables are asked for but %s has no table partitioning", caps.Dialect)
	}
	return nil
}

// Validate checks every identifier.
func (n Names) Validate() error {
	if n.Schema != "" {
		if err := ValidateIdentifier("schema", n.Schema); err != nil {
			return err
		}
	}
	if err := ValidateIdentifier("outbox table", n.Outbox); err != nil {
		return err
	}
	if err := ValidateIdentifier("inbox table", n.Inbox); err != nil {
		return err
	}
	if n.Outbox == n.Inbox {
		return fmt.Errorf("postbox: outbox and inbox tables are both %q; give them different names", n.Outbox)
	}
	return nil
}

// QuoteIdent quotes one identifier with double quotes (ANSI SQL, PostgreSQL, SQLite). MySQL quotes with
// backticks instead.
func QuoteIdent(s string) string { return `"` + strings.ReplaceAll(s, `"`, `""`) + `"` }

// Derived returns an identifier derived from base with suffix, shortened with a hash when it would exceed
// MaxIdentifierLen, so that index names never get silently truncated by the database.
func Derived(base, suffix string) string {
	s := base + suffix
	if len(s) <= MaxIdentifierLen {
		return s
	}
	sum := sha256.Sum256([]byte(s))
	h := hex.EncodeToString(sum[:4])
	return base[:MaxIdentifierLen-len(suffix)-len(h)-1] + "_" + h + suffix
}

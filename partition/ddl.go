package partition

import (
	"context"
	"fmt"
	"hash/fnv"
	"regexp"
	"time"

	"github.com/postbox-go/postbox/driver"
)

// The partitioned layout (driver.Names.Partitioned) ranges the outbox by created_at and the inbox by message_id,
// whose UUIDv7 text starts with the message's creation time (see IDBound). Each named partition covers one period
// and is labelled by its start, pYYYYMM, pYYYYMMDD or pYYYYMMDDHH in UTC; on PostgreSQL the label ends the
// partition's table name (driver.Derived(table, "_"+label)), on MySQL it is the partition's name. A tail partition
// takes every row no named partition covers, so an insert never fails for want of a partition: pmax (VALUES LESS
// THAN MAXVALUE) on MySQL, the DEFAULT partition on PostgreSQL.
//
// The DDL of each database sits in a file of its own, postgres.go and mysql.go, behind ddl.

// ddl is the partition SQL of one database. Every method runs on a maintenance session, inside begin.
type ddl interface {
	// begin starts a maintenance run: it bounds how long each later statement waits for a table lock, so that
	// maintenance queued behind a long transaction gives up rather than stall producers behind it, and takes the
	// table set's partition lock without waiting. It reports whether it got the lock; when it did not, the run is
	// over and end must not be called.
	begin(ctx context.Context, s driver.Session, n driver.Names, lockTimeout time.Duration) (bool, error)
	// end ends a run begin started; cause is the run's error, if any.
	end(ctx context.Context, s driver.Session, n driver.Names, cause error) error
	// list reports the partitions of n's table t. It returns an error wrapping ErrNotPartitioned when the table
	// exists but is not partitioned.
	list(ctx context.Context, s driver.Session, n driver.Names, t Table) (Partitions, error)
	// oldestInTail returns the earliest created_at in the outbox's tail partition, and false when it is empty.
	oldestInTail(ctx context.Context, s driver.Session, n driver.Names, tail string) (time.Time, bool, error)
	// add creates the named partitions parts of n's table t, which are contiguous, ascending and after every
	// existing one, moving the rows in their ranges out of the tail partition.
	add(ctx context.Context, s driver.Session, n driver.Names, t Table, tail string, parts []partRange, hook ddlHook) error
	// dropInbox drops the inbox's named partition label, whatever its claims: they are past retention.
	dropInbox(ctx context.Context, s driver.Session, n driver.Names, label string, hook ddlHook) error
	// drop drops the outbox's named partition label unless it holds a pending row, or a dead row when keepDead is
	// set, and reports whether it dropped it. The check and the drop happen under a table lock, so no row can
	// become pending in between (an operator retrying a dead message, say).
	drop(ctx context.Context, s driver.Session, n driver.Names, label string, keepDead bool, hook ddlHook) (bool, error)
}

// ddlFor returns the partition SQL of the dialect named by driver.Capabilities, or false when the database has
// none.
func ddlFor(dialect string) (ddl, bool) {
	switch dialect {
	case "postgres":
		return postgres{}, true
	case "mysql":
		return mysql{}, true
	}
	return nil, false
}

// Table is a table of a set that the partitioned layout ranges.
type Table int

// The partitioned tables of a set.
const (
	// Outbox is the outbox, ranged by created_at.
	Outbox Table = iota
	// Inbox is the inbox, ranged by message_id: a claim lands in the partition of the time its message's UUIDv7
	// was made, so the key stays (consumer, message_id) and a duplicate claim meets the first.
	Inbox
)

// String returns "outbox" or "inbox".
func (t Table) String() string {
	if t == Inbox {
		return "inbox"
	}
	return "outbox"
}

// name returns the table's unquoted name in n.
func (t Table) name(n driver.Names) string {
	if t == Inbox {
		return n.Inbox
	}
	return n.Outbox
}

// column is the partition column.
func (t Table) column() string {
	if t == Inbox {
		return "message_id"
	}
	return "created_at"
}

// Partitions are the partitions of one table.
type Partitions struct {
	// Labels are the named partitions Postbox manages (pYYYYMM, pYYYYMMDD or pYYYYMMDDHH), oldest first.
	Labels []string
	// Tail is the name of the partition that takes rows beyond the named ones (pmax on MySQL, the DEFAULT
	// partition's table on PostgreSQL); empty when it is missing.
	Tail string
}

// partRange is one named partition to create.
type partRange struct {
	label      string    // pYYYYMM, pYYYYMMDD or pYYYYMMDDHH
	start, end time.Time // rows with start <= created_at < end, or message IDs made in that time
}

// ddlHook is called with each statement that changes the schema or moves rows, just before it runs.
type ddlHook func(ctx context.Context, stmt string)

var labelRE = regexp.MustCompile(`^p[0-9]{6}([0-9]{2}([0-9]{2})?)?$`)

// IDBound returns the inbox partition bound for time t: the text a UUIDv7 made at t starts with, its 48-bit Unix
// millisecond time as 8 hex digits, a hyphen and 4 more. IDs made at or after t sort bytewise at or after it, and
// IDs made before t sort before it.
func IDBound(t time.Time) string {
	ms := t.UnixMilli()
	return fmt.Sprintf("%08x-%04x", ms>>16, ms&0xffff)
}

// lockPurpose names the partition maintenance lock of a table set.
const lockPurpose = "partitions"

// lockKey is the PostgreSQL advisory lock key of purpose on the table set n, derived as the drivers derive theirs,
// so that maintainers of every version exclude each other.
func lockKey(n driver.Names, purpose string) int64 {
	h := fnv.New64a()
	fmt.Fprintf(h, "postbox\x00%s\x00%s\x00%s", n.Schema, n.Outbox, purpose)
	return int64(h.Sum64())
}

func missing(qualified string) error {
	return fmt.Errorf("postbox: table %s does not exist; run Migrate with Config.Partitioned first", qualified)
}

func notPartitioned(qualified string) error {
	return fmt.Errorf("%w: %s was created without Config.Partitioned; drop partitions only from a table migrated with it, or use postbox.Cleaner",
		ErrNotPartitioned, qualified)
}

// qualify returns the schema-qualified name of table, each part quoted by quote.
func qualify(quote func(string) string, n driver.Names, table string) string {
	if n.Schema != "" {
		return quote(n.Schema) + "." + quote(table)
	}
	return quote(table)
}

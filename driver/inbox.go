package driver

import (
	"context"
	"time"
)

// InboxStore holds the statements on the inbox tables: the claims, keyed by (consumer, message ID), and the count
// of failed deliveries per message.
type InboxStore[TTx any] interface {
	// InboxClaim inserts the claim for (consumer, messageID), received at now, inside the caller's transaction and
	// reports whether it is new. A message already claimed returns false and no error, without raising and
	// catching a unique violation, so the transaction stays usable (an error would abort it on PostgreSQL). A
	// claim inserted by a transaction still open elsewhere makes InboxClaim wait for that transaction's outcome.
	InboxClaim(ctx context.Context, tx TTx, consumer, messageID string, now time.Time) (bool, error)
	// InboxFail counts one failed delivery inside tx, which must not be the transaction the failed delivery rolled
	// back. When the count reaches f.MaxFailures, or f.Give is set, it records the message as failed in the
	// inbox, so that later deliveries are duplicates.
	InboxFail(ctx context.Context, tx TTx, f InboxFailure) (InboxFailResult, error)
}

// InboxFailure is one failed delivery to count.
type InboxFailure struct {
	Consumer  string
	MessageID string
	// LastError is the handler's error, truncated by the caller.
	LastError string
	Now       time.Time
	// MaxFailures is the count that records the message as failed; 0 means never.
	MaxFailures int
	// Give records the message as failed whatever the count, for an error no retry can fix.
	Give bool
}

// InboxFailResult is what InboxFail did.
type InboxFailResult struct {
	// Failures is the number of failed deliveries counted so far, this one included.
	Failures int
	// Failed is true when this call recorded the message as failed. It stays false when the message was already
	// claimed, by a delivery that succeeded meanwhile or one that recorded it first.
	Failed bool
}

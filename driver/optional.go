package driver

import (
	"context"
	"time"
)

// Optional capabilities. Postbox discovers them by type assertion on the Driver or the Store, so a driver
// implements only what its database can do.

// Notifier is implemented by stores that can wake listening relays. InsertNotify is Insert plus a wake-up, which
// the database delivers when, and only if, tx commits. The client calls it instead of Insert at most once per
// Config.NotifyInterval, because a notification in every transaction serialises commits.
type Notifier[TTx any] interface {
	InsertNotify(ctx context.Context, tx TTx, recs []Record) error
}

// Listener is implemented by drivers whose database pushes the wake-ups a Notifier sends (PostgreSQL LISTEN).
type Listener interface {
	// Listen listens on channel on a connection of its own. It calls ready once listening, then wake for each
	// notification, until ctx is done (it returns nil) or the connection fails (it returns the error; the caller
	// retries). Notifications sent while not listening are lost, which is why ready is called: the caller then
	// looks for records it may have missed.
	Listen(ctx context.Context, channel string, ready, wake func()) error
}

// OrderedClaimer is implemented by stores that can claim in per-key order.
type OrderedClaimer interface {
	// ClaimOrdered is Claim for ordered mode: it claims only records with no earlier pending record of the same
	// key, so each key has at most one record in flight and keys are published in enqueue (ID) order. A pending
	// record that is not yet available (it failed and backs off, or is delayed) holds back its key. With
	// deadHoldsKey, a dead record holds back its key as well, until an operator retries or purges it. Records
	// with an empty key are not ordered.
	ClaimOrdered(ctx context.Context, p ClaimParams, deadHoldsKey bool) (Claim, error)
}

// Peeker is implemented by stores that can tell whether anything is claimable more cheaply than a claim: an idle
// relay peeks instead of claiming, so that it sends one statement per poll instead of a transaction.
type Peeker interface {
	Claimable(ctx context.Context, now time.Time) (bool, error)
}

// Channel returns the name of the notification channel for the table set: the outbox table's name, qualified by
// the schema when there is one, as a single identifier.
func (n Names) Channel() string {
	base := n.Outbox
	if n.Schema != "" {
		base = n.Schema + "_" + n.Outbox
	}
	return Derived(base, "_wake")
}

// Pinger is implemented by drivers that can check cheaply that the database answers: a connection and an empty
// statement, no lock and no table read. A relay that cannot reach its database pings it between attempts, so that
// it claims again as soon as the database answers rather than at the end of a long delay.
type Pinger interface {
	Ping(ctx context.Context) error
}

package drivertest

import (
	"context"
	"fmt"
	"time"

	"github.com/postbox-go/postbox/driver"
)

// A wrapper that embeds a driver.Store hides the optional capabilities Postbox finds by type assertion; this one
// keeps the ones the wrapped store has.

// withStoreOptions returns s, a wrapper of inner, with inner's ordered claims, peeks and notifications.
func withStoreOptions[TTx any](s driver.Store[TTx], inner driver.Store[TTx]) driver.Store[TTx] {
	o := optionalStore[TTx]{Store: s, inner: inner}
	// Stores without them fail the suite's operator tests anyway: every driver of this repository has them.
	o.Operator, _ = inner.(driver.Operator)
	o.TopicPauser, _ = inner.(driver.TopicPauser)
	o.Heartbeater, _ = inner.(driver.Heartbeater)
	if _, ok := inner.(driver.Notifier[TTx]); ok {
		return notifyingStore[TTx]{o}
	}
	return o
}

type optionalStore[TTx any] struct {
	driver.Store[TTx]
	driver.Operator
	driver.TopicPauser
	driver.Heartbeater
	inner driver.Store[TTx]
}

func (s optionalStore[TTx]) ClaimOrdered(ctx context.Context, p driver.ClaimParams, deadHoldsKey bool) (driver.Claim, error) {
	oc, ok := s.inner.(driver.OrderedClaimer)
	if !ok {
		return nil, fmt.Errorf("drivertest: store %T cannot claim in order", s.inner)
	}
	return oc.ClaimOrdered(ctx, p, deadHoldsKey)
}

func (s optionalStore[TTx]) Claimable(ctx context.Context, now time.Time) (bool, error) {
	if p, ok := s.inner.(driver.Peeker); ok {
		return p.Claimable(ctx, now)
	}
	return true, nil // claim and see
}

type notifyingStore[TTx any] struct{ optionalStore[TTx] }

func (s notifyingStore[TTx]) InsertNotify(ctx context.Context, tx TTx, recs []driver.Record) error {
	return s.inner.(driver.Notifier[TTx]).InsertNotify(ctx, tx, recs)
}

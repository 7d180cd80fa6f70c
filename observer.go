package postbox

import (
	"context"
	"time"
)

// RelayObserver receives the outcome of every batch a relay claims, for metrics. Set it in
// RelayConfig.Observer; the otel module and the postbox daemon implement it. ObserveBatch is called from the
// relay's workers, so it must be safe for concurrent use and return quickly.
type RelayObserver interface {
	ObserveBatch(ctx context.Context, b BatchReport)
}

// BatchReport is the outcome of one claimed batch.
type BatchReport struct {
	// Records are the claimed records, oldest first.
	Records []Record
	// Errs has one entry per record: nil when the broker acknowledged it.
	Errs []error
	// Dead has one entry per record: true when the record was parked as dead.
	Dead []bool
	// Started is when the claim returned and SettledAt when the batch settled, both on the client's clock.
	Started   time.Time
	SettledAt time.Time
	// Err is the settle error. When it is set nothing was settled: the records are pending again and will be
	// published again.
	Err error
}

// Published returns how many records the broker acknowledged and that were settled as published.
func (b BatchReport) Published() int {
	if b.Err != nil {
		return 0
	}
	n := 0
	for _, err := range b.Errs {
		if err == nil {
			n++
		}
	}
	return n
}

// OutageObserver is an optional interface of a RelayObserver: a relay calls ObserveOutage when it stops being
// able to work (a claim or settle failed, or the broker refused a whole batch as unavailable) and again when it
// works again, so that a metric can count the time relays spend unable to work. The otel module implements it.
type OutageObserver interface {
	ObserveOutage(ctx context.Context, o Outage)
}

// Outage is a span of time during which a relay could not work.
type Outage struct {
	// Since is when the relay stopped being able to work, on the client's clock.
	Since time.Time
	// End is when it worked again; zero in the call that reports the start.
	End time.Time
	// Cause is "database" or "broker".
	Cause string
	// Err is the failure that began the outage; nil in the call that reports the end.
	Err error
}

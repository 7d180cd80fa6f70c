package partition

import (
	"fmt"
	"time"
)

// Period is the time span of one partition, in UTC.
type Period int

// The periods a partition may span.
const (
	// Daily partitions are labelled pYYYYMMDD. The default.
	Daily Period = iota
	// Hourly partitions are labelled pYYYYMMDDHH, for volumes where a day of rows is too much to keep.
	Hourly
	// Monthly partitions are labelled pYYYYMM.
	Monthly
)

// String returns "daily", "hourly" or "monthly".
func (p Period) String() string {
	switch p {
	case Daily:
		return "daily"
	case Hourly:
		return "hourly"
	case Monthly:
		return "monthly"
	}
	return fmt.Sprintf("Period(%d)", int(p))
}

func (p Period) valid() bool { return p == Daily || p == Hourly || p == Monthly }

// layout is the time layout of the period's labels, after the leading "p".
func (p Period) layout() string {
	switch p {
	case Hourly:
		return "2006010215"
	case Monthly:
		return "200601"
	}
	return "20060102"
}

// floor returns the start of the period holding t.
func (p Period) floor(t time.Time) time.Time {
	t = t.UTC()
	switch p {
	case Hourly:
		return time.Date(t.Year(), t.Month(), t.Day(), t.Hour(), 0, 0, 0, time.UTC)
	case Monthly:
		return time.Date(t.Year(), t.Month(), 1, 0, 0, 0, 0, time.UTC)
	}
	return time.Date(t.Year(), t.Month(), t.Day(), 0, 0, 0, 0, time.UTC)
}

// next returns the start of the period after the one starting at start.
func (p Period) next(start time.Time) time.Time {
	switch p {
	case Hourly:
		return start.Add(time.Hour)
	case Monthly:
		return start.AddDate(0, 1, 0)
	}
	return start.AddDate(0, 0, 1)
}

// label names the partition of the period starting at start.
func (p Period) label(start time.Time) string { return "p" + start.UTC().Format(p.layout()) }

// parseLabel returns the range a label names, whatever period made it, so that changing Period keeps the old
// partitions managed.
func parseLabel(label string) (start, end time.Time, ok bool) {
	for _, p := range []Period{Monthly, Daily, Hourly} {
		if len(label) != 1+len(p.layout()) || label[0] != 'p' {
			continue
		}
		t, err := time.Parse(p.layout(), label[1:])
		if err != nil {
			return time.Time{}, time.Time{}, false
		}
		return t, p.next(t), true
	}
	return time.Time{}, time.Time{}, false
}

package postbox

import (
	"testing"
	"time"
)

func TestCountString(t *testing.T) {
	for _, tc := range []struct {
		c    Count
		want string
	}{{Count{N: 42}, "42"}, {Count{N: 100000, More: true}, "more than 100000"}, {Count{}, "0"}} {
		if got := tc.c.String(); got != tc.want {
			t.Errorf("%+v.String() = %q, want %q", tc.c, got, tc.want)
		}
	}
}

// TestDeadFilterSelects: a filter with only the newer fields selects on purpose; paging fields and the actor
// alone select nothing, so that they cannot turn a retry into a retry of everything.
func TestDeadFilterSelects(t *testing.T) {
	now := time.Now()
	for _, f := range []DeadFilter{{Type: "t"}, {Key: "k"}, {ErrorContains: "e"}, {FailedFrom: now}, {FailedBefore: now}} {
		if f.Empty() {
			t.Errorf("%+v reported empty", f)
		}
	}
	for _, f := range []DeadFilter{{}, {After: NewID()}, {Newest: true}, {Limit: 5}, {Actor: "alice"}} {
		if !f.Empty() {
			t.Errorf("%+v reported selecting", f)
		}
	}
	f := DeadFilter{Topic: "orders", ErrorContains: `say "no"`, IDs: []string{NewID()}, FailedFrom: time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)}
	if got, want := f.String(), `topic="orders" error="say \"no\"" failed-from="2026-01-02T03:04:05Z" ids=1`; got != want {
		t.Errorf("String() = %s, want %s", got, want)
	}
}

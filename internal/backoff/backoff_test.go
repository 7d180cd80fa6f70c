package backoff

import (
	"math"
	"testing"
	"time"
)

func TestExponentialDoublesFromBaseUpToTheCap(t *testing.T) {
	base, limit := 100*time.Millisecond, time.Second
	want := []time.Duration{100, 100, 100, 200, 400, 800, 1000, 1000}
	for i, attempt := range []int{-1, 0, 1, 2, 3, 4, 5, 60} {
		if got := Exponential(base, limit, attempt); got != want[i]*time.Millisecond {
			t.Errorf("Exponential(%v, %v, %d) = %v, want %v", base, limit, attempt, got, want[i]*time.Millisecond)
		}
	}
}

func TestExponentialNeverOverflows(t *testing.T) {
	limit := time.Duration(math.MaxInt64)
	for attempt := 1; attempt < 200; attempt++ {
		if d := Exponential(time.Second, limit, attempt); d <= 0 {
			t.Fatalf("Exponential(1s, MaxInt64, %d) = %v: overflowed", attempt, d)
		}
	}
	if d := Exponential(time.Second, limit, math.MaxInt); d != limit {
		t.Fatalf("Exponential at attempt MaxInt = %v, want the cap", d)
	}
}

func TestExponentialCapBelowBaseIsBase(t *testing.T) {
	if d := Exponential(time.Second, time.Millisecond, 5); d != time.Second {
		t.Fatalf("got %v, want the base (1s)", d)
	}
}

func TestDelayStaysWithinEqualJitterBounds(t *testing.T) {
	for attempt := 1; attempt <= 8; attempt++ {
		hi := Exponential(time.Second, 30*time.Second, attempt)
		for range 1000 {
			d := Delay(time.Second, 30*time.Second, attempt)
			if d < hi/2 || d > hi {
				t.Fatalf("Delay(attempt %d) = %v, outside [%v, %v]", attempt, d, hi/2, hi)
			}
		}
	}
}

// Relays that failed at the same moment must not retry at the same moment: the draws spread over the whole
// window [d/2, d].
func TestJitterSpreadsRetries(t *testing.T) {
	const d = 10 * time.Second
	var lo, hi int
	seen := map[time.Duration]bool{}
	for range 2000 {
		j := Jitter(d)
		seen[j] = true
		switch {
		case j < 6*time.Second:
			lo++
		case j > 9*time.Second:
			hi++
		}
	}
	if len(seen) < 1900 || lo < 200 || hi < 200 {
		t.Fatalf("2000 draws: %d distinct, %d in [5s,6s), %d in (9s,10s]; want them spread over [5s,10s]", len(seen), lo, hi)
	}
}

func TestJitterOfNothingIsNothing(t *testing.T) {
	for _, d := range []time.Duration{0, -time.Second} {
		if j := Jitter(d); j != 0 {
			t.Errorf("Jitter(%v) = %v, want 0", d, j)
		}
	}
	if j := Jitter(1); j != 1 {
		t.Errorf("Jitter(1ns) = %v, want 1ns (at least half, rounded up)", j)
	}
}

func TestBackoffGrowsWithFailuresAndResets(t *testing.T) {
	b := Backoff{Base: time.Second, Max: 4 * time.Second}
	for i, hi := range []time.Duration{time.Second, 2 * time.Second, 4 * time.Second, 4 * time.Second} {
		d := b.Next()
		if d < hi/2 || d > hi {
			t.Fatalf("failure %d: Next() = %v, want within [%v, %v]", i+1, d, hi/2, hi)
		}
	}
	if b.Attempts() != 4 {
		t.Fatalf("Attempts() = %d after four failures", b.Attempts())
	}
	b.Reset()
	if b.Attempts() != 0 {
		t.Fatalf("Attempts() = %d after Reset", b.Attempts())
	}
	if d := b.Next(); d > time.Second {
		t.Fatalf("first Next() after Reset = %v, want at most the base (1s)", d)
	}
}

func TestAgainHoldsTheLevel(t *testing.T) {
	b := Backoff{Base: time.Second, Max: time.Minute}
	if d := b.Again(); d > time.Second {
		t.Fatalf("Again() with no failure = %v, want at most the base (1s)", d)
	}
	b.Next()
	b.Next()
	for range 100 {
		if d := b.Again(); d < time.Second || d > 2*time.Second {
			t.Fatalf("Again() after two failures = %v, want within [1s, 2s]", d)
		}
	}
	if b.Attempts() != 2 {
		t.Fatalf("Again() recorded a failure: Attempts() = %d, want 2", b.Attempts())
	}
}

package partition

import (
	"testing"
	"time"
)

// The inbox's partition bounds must sort bytewise exactly as the times they stand for, and every UUIDv7 made in
// [a, b) must fall in [IDBound(a), IDBound(b)).
func TestIDBound(t *testing.T) {
	at := time.UnixMilli(0x01978a3c1f00)
	if got := IDBound(at); got != "01978a3c-1f00" {
		t.Fatalf("IDBound(%d ms) = %q, want 01978a3c-1f00", at.UnixMilli(), got)
	}
	// Across the carry from the low 16 bits into the high 32.
	last := time.UnixMilli(0x01978a3cffff)
	next := last.Add(time.Millisecond)
	if a, b := IDBound(last), IDBound(next); a != "01978a3c-ffff" || b != "01978a3d-0000" || !(a < b) {
		t.Fatalf("IDBound across a carry: %q then %q; want 01978a3c-ffff < 01978a3d-0000", a, b)
	}
	// The greatest ID of the last millisecond before a bound sorts before it.
	if id := IDBound(last) + "-7fff-bfff-ffffffffffff"; !(id < IDBound(next)) {
		t.Fatalf("ID %q does not sort before the bound %q", id, IDBound(next))
	}
}

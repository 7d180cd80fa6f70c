package webhook

import (
	"hash"
	"sync/atomic"
	"testing"
)

// CountMACs makes every HMAC the package computes count in the returned counter until the test ends. Tests that
// call it must not run in parallel with others of the package.
func CountMACs(t testing.TB) *atomic.Int64 {
	var n atomic.Int64
	old := newMAC
	newMAC = func(key []byte) hash.Hash { n.Add(1); return old(key) }
	t.Cleanup(func() { newMAC = old })
	return &n
}

package broker

import (
	"hash/maphash"
	"sync"
	"sync/atomic"
)

// Lanes is a fixed set of handler goroutines for a subscriber. A message with a key always goes to the same lane,
// so the messages of one key are handled one at a time, in the order they were received; messages of different
// keys, and messages without a key, are handled in parallel.
//
// Adapters receive on one goroutine and hand each message to For(key); Close stops the lanes once the receiving
// has stopped.
type Lanes[T any] struct {
	chans []chan T
	seed  maphash.Seed
	next  atomic.Uint64 // where the search for the least busy lane starts, for keyless messages
	wg    sync.WaitGroup
}

// NewLanes starts n lanes (at least one), each with a buffer of buffer items, each calling handle for its items
// in order.
func NewLanes[T any](n, buffer int, handle func(T)) *Lanes[T] {
	l := &Lanes[T]{chans: make([]chan T, max(n, 1)), seed: maphash.MakeSeed()}
	for i := range l.chans {
		c := make(chan T, buffer)
		l.chans[i] = c
		l.wg.Go(func() {
			for item := range c {
				handle(item)
			}
		})
	}
	return l
}

// For returns the lane for a message with key: the key's own lane, or, for an empty key, the least busy lane
// (round robin among equally busy ones). Callers send on it in a select that also watches their context.
func (l *Lanes[T]) For(key string) chan<- T {
	n := uint64(len(l.chans))
	if key != "" {
		return l.chans[maphash.String(l.seed, key)%n]
	}
	start := l.next.Add(1) % n
	best := l.chans[start]
	for i := range n {
		if c := l.chans[(start+i)%n]; len(c) < len(best) {
			best = c
		}
	}
	return best
}

// Close lets each lane finish what it holds and waits for them. Nothing may be sent after Close.
func (l *Lanes[T]) Close() {
	for _, c := range l.chans {
		close(c)
	}
	l.wg.Wait()
}

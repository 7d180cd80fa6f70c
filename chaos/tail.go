package chaos

import (
	"bytes"
	"strings"
	"sync"
)

// Tail is an io.Writer that keeps the last lines written to it, for the logs of servers and child processes: a
// scenario shows them when it fails and stays quiet when it passes. It is safe for concurrent use.
type Tail struct {
	max     int
	mu      sync.Mutex
	lines   []string
	partial []byte
	count   int
}

// NewTail returns a Tail keeping the last max lines.
func NewTail(max int) *Tail { return &Tail{max: max} }

// Write stores p's complete lines and keeps an incomplete last line until the rest arrives.
func (t *Tail) Write(p []byte) (int, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.partial = append(t.partial, p...)
	for {
		i := bytes.IndexByte(t.partial, '\n')
		if i < 0 {
			break
		}
		t.lines = append(t.lines, string(t.partial[:i]))
		t.count++
		t.partial = t.partial[i+1:]
	}
	if over := len(t.lines) - t.max; over > 0 {
		t.lines = append(t.lines[:0], t.lines[over:]...)
	}
	return len(p), nil
}

// String returns the kept lines.
func (t *Tail) String() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	return strings.Join(append(t.lines, string(t.partial)), "\n")
}

// Count returns the number of lines written so far, kept or not.
func (t *Tail) Count() int {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.count
}

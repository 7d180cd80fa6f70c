package broker_test

import (
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/postbox-go/postbox/broker"
)

func TestLanesKeepKeyOrder(t *testing.T) {
	type msg struct {
		key string
		seq int
	}
	var mu sync.Mutex
	got := map[string][]int{}
	lanes := broker.NewLanes(4, 2, func(m msg) {
		mu.Lock()
		defer mu.Unlock()
		got[m.key] = append(got[m.key], m.seq)
	})
	const keys, each = 10, 200
	for i := range each {
		for k := range keys {
			key := fmt.Sprint("k", k)
			lanes.For(key) <- msg{key, i}
		}
	}
	lanes.Close() // waits for every lane to finish what it holds
	for k := range keys {
		key := fmt.Sprint("k", k)
		if len(got[key]) != each {
			t.Fatalf("key %s: handled %d messages, want %d", key, len(got[key]), each)
		}
		for i, seq := range got[key] {
			if seq != i {
				t.Fatalf("key %s: message %d handled in position %d; one key's messages must stay in order", key, seq, i)
			}
		}
	}
}

// TestLanesSpreadKeylessMessages: keyless messages go to idle lanes, so n of them are handled at once by n lanes.
func TestLanesSpreadKeylessMessages(t *testing.T) {
	const n = 4
	started := make(chan int, n)
	release := make(chan struct{})
	lanes := broker.NewLanes(n, 0, func(i int) {
		started <- i
		<-release
	})
	// Each lane blocks in its handler, so n keyless messages are only all accepted when each went to its own lane.
	// The sends run on a goroutine of their own, so that a second message sent to a busy lane blocks it, not the
	// test; releasing the handlers lets every lane finish, and the sender with them.
	sent := make(chan struct{})
	go func() {
		defer close(sent)
		for i := range n {
			lanes.For("") <- i
		}
	}()
	defer func() {
		close(release)
		select {
		case <-sent:
			lanes.Close()
		case <-time.After(10 * time.Second):
			t.Error("a keyless message was not accepted within 10s of releasing the handlers")
		}
	}()
	deadline := time.After(10 * time.Second)
	for handled := 0; handled < n; handled++ {
		select {
		case <-started:
		case <-deadline:
			t.Fatalf("%d of %d keyless messages handled at once within 10s: a keyless message went to a busy lane while another was idle", handled, n)
		}
	}
}

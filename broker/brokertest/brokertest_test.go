package brokertest_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/postbox-go/postbox"
	"github.com/postbox-go/postbox/broker"
	"github.com/postbox-go/postbox/broker/brokertest"
	"github.com/postbox-go/postbox/broker/internal/adapterkit"
)

// memBroker is a minimal in-memory broker with every feature the suite tests: one queue per topic shared by the
// topic's subscribers, ID dedup, nack delays and an ack timeout. It lets the suite run, and be read as a
// reference of the semantics, without a broker server.
type memBroker struct {
	mu     sync.Mutex
	queues map[string]*queue
}

type queue struct {
	entries []*entry
	seen    map[string]bool
}

type entry struct {
	h          map[string]string
	body       []byte
	topic      string
	deliveries int
	acked      bool
	readyAt    time.Time // zero: ready; in flight until then otherwise
}

const ackTimeout = 300 * time.Millisecond

var codec = broker.CloudEvents{Prefix: broker.PrefixHTTP}

func (b *memBroker) Publish(ctx context.Context, batch []postbox.Record) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	errs, failed := make([]error, len(batch)), false
	for i, r := range batch {
		q := b.queues[r.Topic]
		h, body, err := codec.Encode(r)
		switch {
		case q == nil:
			errs[i], failed = fmt.Errorf("no queue for topic %q", r.Topic), true
		case err != nil:
			errs[i], failed = postbox.Permanent(err), true
		case !q.seen[r.ID]:
			q.seen[r.ID] = true
			q.entries = append(q.entries, &entry{h: h, body: body, topic: r.Topic})
		}
	}
	if failed {
		return &postbox.BatchError{Errs: errs}
	}
	return nil
}

type memSub struct {
	b       *memBroker
	topic   string
	running adapterkit.Running
}

// next takes the earliest deliverable entry, marking it in flight, and returns a copy and the entry.
func (s *memSub) next() (entry, *entry) {
	s.b.mu.Lock()
	defer s.b.mu.Unlock()
	now := time.Now()
	for _, e := range s.b.queues[s.topic].entries {
		if !e.acked && !e.readyAt.After(now) {
			e.deliveries++
			e.readyAt = now.Add(ackTimeout)
			return *e, e
		}
	}
	return entry{}, nil
}

func (s *memSub) Receive(ctx context.Context, handle broker.DeliveryHandler) error {
	done, err := s.running.Start(ctx, "memsub", handle, "")
	if done == nil {
		return err
	}
	defer done()
	tick := time.NewTicker(5 * time.Millisecond)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-tick.C:
		}
		for e, p := s.next(); p != nil && ctx.Err() == nil; e, p = s.next() {
			ev, err := codec.Decode(e.h, e.body)
			if err != nil {
				return err
			}
			ev.Message.Topic = e.topic
			broker.Dispatch(ctx, broker.NewDelivery(ev, e.deliveries, &memAcker{b: s.b, e: p}), handle)
		}
	}
}

type memAcker struct {
	b *memBroker
	e *entry
}

func (a *memAcker) Ack(context.Context) error {
	a.b.mu.Lock()
	defer a.b.mu.Unlock()
	a.e.acked = true
	return nil
}

func (a *memAcker) Nack(_ context.Context, delay time.Duration) error {
	a.b.mu.Lock()
	defer a.b.mu.Unlock()
	a.e.readyAt = time.Now().Add(delay)
	return nil
}

func TestExerciseInMemory(t *testing.T) {
	b := &memBroker{queues: map[string]*queue{}}
	brokertest.Exercise(t, brokertest.Features{PerKeyOrder: true, Redelivery: true, Dedup: true, Unroutable: true,
		AckTimeout: true, AckWait: ackTimeout, Attempts: true, Timeout: 10 * time.Second,
		Unreachable: func(t *testing.T) postbox.Publisher {
			return postbox.PublisherFunc(func(ctx context.Context, batch []postbox.Record) error {
				return errors.New("dial tcp 127.0.0.1:1: connection refused")
			})
		}},
		func(t *testing.T, topic string) (postbox.Publisher, broker.Subscriber) {
			b.mu.Lock()
			defer b.mu.Unlock()
			if b.queues[topic] == nil {
				b.queues[topic] = &queue{seen: map[string]bool{}}
			}
			return b, &memSub{b: b, topic: topic}
		})
}

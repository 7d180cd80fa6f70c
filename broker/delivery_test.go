package broker_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/postbox-go/postbox"
	"github.com/postbox-go/postbox/broker"
)

// settlements records what a delivery's Acker was told, the way a broker would see it.
type settlements struct {
	mu     sync.Mutex
	calls  []string
	ackErr error
}

func (s *settlements) add(c string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.calls = append(s.calls, c)
}

func (s *settlements) Ack(ctx context.Context) error {
	s.add(fmt.Sprintf("ack ctxerr=%v", ctx.Err()))
	return s.ackErr
}

func (s *settlements) Nack(ctx context.Context, d time.Duration) error {
	s.add(fmt.Sprintf("nack %v ctxerr=%v", d, ctx.Err()))
	return nil
}

func (s *settlements) got() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]string(nil), s.calls...)
}

type rejecting struct{ settlements }

func (r *rejecting) Reject(ctx context.Context) error { r.add("reject"); return nil }

func delivery(a broker.Acker, attempt int) *broker.Delivery {
	return broker.NewDelivery(broker.Event{Message: postbox.Message{ID: "m1", Topic: "t", Type: "x"}}, attempt, a)
}

func want(t *testing.T, got []string, want ...string) {
	t.Helper()
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("broker saw %q, want %q", got, want)
	}
}

func TestDeliverySettlesOnce(t *testing.T) {
	ctx := context.Background()
	s := &settlements{}
	d := delivery(s, 1)
	if err := d.Ack(ctx); err != nil {
		t.Fatal(err)
	}
	if err := d.Nack(ctx, 0); !errors.Is(err, broker.ErrSettled) {
		t.Fatalf("Nack after Ack: %v, want ErrSettled", err)
	}
	if err := d.Ack(ctx); !errors.Is(err, broker.ErrSettled) {
		t.Fatalf("second Ack: %v, want ErrSettled", err)
	}
	want(t, s.got(), "ack ctxerr=<nil>")
}

func TestRejectUnsupportedLeavesDeliveryOpen(t *testing.T) {
	s := &settlements{}
	d := delivery(s, 1)
	if err := d.Reject(context.Background()); !errors.Is(err, errors.ErrUnsupported) {
		t.Fatalf("Reject on a broker without reject: %v, want errors.ErrUnsupported", err)
	}
	if d.Settled() {
		t.Fatal("a failed Reject settled the delivery; the caller could no longer Nack it")
	}
}

func TestDispatchNacksUnsettled(t *testing.T) {
	s := &settlements{}
	ctx, cancel := context.WithCancel(context.Background())
	cancel() // a stopping subscriber: the nack must still reach the broker
	broker.Dispatch(ctx, delivery(s, 1), func(context.Context, *broker.Delivery) {})
	want(t, s.got(), "nack 0s ctxerr=<nil>")

	s = &settlements{}
	broker.Dispatch(context.Background(), delivery(s, 1), func(ctx context.Context, d *broker.Delivery) { _ = d.Ack(ctx) })
	want(t, s.got(), "ack ctxerr=<nil>")
}

func TestDispatchNacksOnPanic(t *testing.T) {
	s := &settlements{}
	func() {
		defer func() { _ = recover() }()
		broker.Dispatch(context.Background(), delivery(s, 1), func(context.Context, *broker.Delivery) { panic("boom") })
	}()
	want(t, s.got(), "nack 0s ctxerr=<nil>")
}

func TestAckAfter(t *testing.T) {
	fail := errors.New("db down")
	quiet := broker.AckPolicy{Logger: discard()}
	for name, tc := range map[string]struct {
		err     error
		attempt int
		reject  bool
		ctxDone bool
		want    string
	}{
		"success acks":                       {want: "ack ctxerr=<nil>"},
		"error nacks with backoff":           {err: fail, attempt: 1, want: "nack 1s ctxerr=<nil>"},
		"backoff grows":                      {err: fail, attempt: 4, want: "nack 8s ctxerr=<nil>"},
		"backoff is capped":                  {err: fail, attempt: 40, want: "nack 1m0s ctxerr=<nil>"},
		"permanent rejects":                  {err: postbox.Permanent(fail), attempt: 1, reject: true, want: "reject"},
		"permanent without reject nacks":     {err: postbox.Permanent(fail), attempt: 1, want: "nack 1s ctxerr=<nil>"},
		"error while stopping nacks at once": {err: context.Canceled, attempt: 3, ctxDone: true, want: "nack 0s ctxerr=<nil>"},
		"success while stopping still acks":  {ctxDone: true, want: "ack ctxerr=<nil>"},
	} {
		t.Run(name, func(t *testing.T) {
			var s interface {
				broker.Acker
				got() []string
			} = &settlements{}
			if tc.reject {
				s = &rejecting{}
			}
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			var got postbox.Message
			h := quiet.Wrap(func(ctx context.Context, m postbox.Message) error {
				got = m
				if tc.ctxDone {
					cancel() // Receive stops while the handler commits
				}
				return tc.err
			})
			broker.Dispatch(ctx, delivery(s, tc.attempt), h)
			if got.ID != "m1" {
				t.Fatalf("handler got %+v", got)
			}
			want(t, s.got(), tc.want)
		})
	}
}

func TestAckAfterCustomDelay(t *testing.T) {
	s := &settlements{}
	p := broker.AckPolicy{Logger: discard(), NackDelay: func(attempt int) time.Duration { return time.Duration(attempt) * time.Millisecond }}
	broker.Dispatch(context.Background(), delivery(s, 7), p.Wrap(func(context.Context, postbox.Message) error { return errors.New("x") }))
	want(t, s.got(), "nack 7ms ctxerr=<nil>")
}

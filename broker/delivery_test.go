package broker_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
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

type ackless struct{ settlements }

// TestConsumeSettlesByOutcome: Consume acks what committed or can be dropped, nacks what may succeed later and
// rejects what never can, with no glue in the user's handler.
func TestConsumeSettlesByOutcome(t *testing.T) {
	fail := errors.New("db down")
	bad := postbox.Permanent(fmt.Errorf("%w: message ID is 300 bytes", postbox.ErrInvalidMessage))
	cfg := &broker.ConsumeConfig{Logger: discard(), NackDelay: func(attempt int) time.Duration { return time.Duration(attempt) * time.Second }}
	for name, tc := range map[string]struct {
		outcome  postbox.Outcome
		err      error
		attempt  int
		reject   bool
		noReject bool
		ctxDone  bool
		want     string
	}{
		"processed acks":                      {outcome: postbox.Processed, want: "ack ctxerr=<nil>"},
		"duplicate acks":                      {outcome: postbox.Duplicate, want: "ack ctxerr=<nil>"},
		"failed acks":                         {outcome: postbox.Failed, want: "ack ctxerr=<nil>"},
		"retry nacks with the delay":          {outcome: postbox.Retry, err: fail, attempt: 4, want: "nack 4s ctxerr=<nil>"},
		"rejected rejects":                    {outcome: postbox.Rejected, err: bad, attempt: 1, reject: true, want: "reject"},
		"rejected without reject acks":        {outcome: postbox.Rejected, err: bad, attempt: 1, noReject: true, want: "ack ctxerr=<nil>"},
		"retry while stopping nacks at once":  {outcome: postbox.Retry, err: context.Canceled, attempt: 3, ctxDone: true, want: "nack 0s ctxerr=<nil>"},
		"processed while stopping still acks": {outcome: postbox.Processed, ctxDone: true, want: "ack ctxerr=<nil>"},
	} {
		t.Run(name, func(t *testing.T) {
			var s interface {
				broker.Acker
				got() []string
			} = &settlements{}
			if tc.reject {
				s = &rejecting{}
			}
			if tc.noReject {
				s = &ackless{}
			}
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			var got *broker.Delivery
			var seen postbox.Outcome = -1
			cfg := *cfg
			cfg.OnOutcome = func(_ context.Context, d *broker.Delivery, res postbox.Result, err error) {
				if d.Settled() {
					t.Error("OnOutcome called after the delivery was settled")
				}
				seen = res.Outcome
			}
			h := broker.ConsumeHandler(&cfg, func(ctx context.Context, d *broker.Delivery) (postbox.Result, error) {
				got = d
				if tc.ctxDone {
					cancel() // Receive stops while the delivery commits
				}
				return postbox.Result{Outcome: tc.outcome, Err: tc.err}, tc.err
			})
			broker.Dispatch(ctx, delivery(s, tc.attempt), h)
			if got == nil || got.Message.ID != "m1" {
				t.Fatalf("process got %+v", got)
			}
			want(t, s.got(), tc.want)
			if seen != tc.outcome {
				t.Errorf("OnOutcome saw %v; want %v", seen, tc.outcome)
			}
		})
	}
}

func TestConsumeDefaultNackDelay(t *testing.T) {
	for attempt, full := range map[int]time.Duration{0: time.Second, 1: time.Second, 2: 2 * time.Second, 4: 8 * time.Second, 40: time.Minute} {
		for range 50 {
			if d := broker.NackDelay(attempt); d > full || d < full/2 {
				t.Fatalf("default NackDelay(%d) = %v; want within the upper half of %v", attempt, d, full)
			}
		}
	}
}

func TestConsumeRefusesMissingArguments(t *testing.T) {
	ctx := context.Background()
	for name, err := range map[string]error{
		"subscriber": broker.Consume[struct{}](ctx, nil, nil, nil, nil),
		"consumer":   broker.Consume[struct{}](ctx, &subscriber{}, nil, nil, nil),
	} {
		if !errors.Is(err, postbox.ErrInvalidConfig) || !strings.Contains(err.Error(), name) {
			t.Errorf("Consume without a %s: %v; want ErrInvalidConfig naming it", name, err)
		}
	}
}

type subscriber struct{}

func (*subscriber) Receive(context.Context, broker.DeliveryHandler) error { return nil }

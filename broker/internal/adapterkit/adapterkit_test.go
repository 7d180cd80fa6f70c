package adapterkit

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/postbox-go/postbox"
	"github.com/postbox-go/postbox/broker"
)

func TestRunningLetsOneReceiveRun(t *testing.T) {
	var r Running
	noop := func(context.Context, *broker.Delivery) {}
	if done, err := r.Start(context.Background(), "x", nil, ""); done != nil || err == nil || !strings.Contains(err.Error(), "needs a handler") {
		t.Fatalf("Start with a nil handler = %v, %v", done != nil, err)
	}
	done, err := r.Start(context.Background(), "x", noop, "")
	if done == nil || err != nil {
		t.Fatalf("first Start = %v", err)
	}
	if d, err := r.Start(context.Background(), "x", noop, "busy"); d != nil || err == nil || !strings.Contains(err.Error(), "already running on this subscriber; busy") {
		t.Fatalf("second Start = %v", err)
	}
	done()
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if d, err := r.Start(ctx, "x", noop, ""); d != nil || err != nil {
		t.Fatalf("Start with an ended context = %v, %v; want nothing to run and no error", d != nil, err)
	}
	if d, err := r.Start(context.Background(), "x", noop, ""); d == nil || err != nil {
		t.Fatalf("Start after the ended context = %v; the guard must be free again", err)
	}
}

func TestClosedAndResult(t *testing.T) {
	errClosed := ErrClosed("x")
	var c Closed
	if skip, err := c.Skip(errClosed, 0); !skip || err != nil {
		t.Errorf("empty batch: %v %v", skip, err)
	}
	if skip, _ := c.Skip(errClosed, 1); skip {
		t.Error("an open publisher skipped a batch")
	}
	_ = c.Close()
	if skip, err := c.Skip(errClosed, 1); !skip || !errors.Is(err, errClosed) {
		t.Errorf("closed: %v %v", skip, err)
	}
	if err := Result(context.Background(), nil, []error{nil, nil}); err != nil {
		t.Errorf("Result of successes = %v", err)
	}
	var be *postbox.BatchError
	if err := Result(context.Background(), nil, []error{nil, errClosed}); !errors.As(err, &be) || be.Errs[1] != errClosed {
		t.Errorf("Result with a failure = %v", err)
	}
}

func TestMessagesMarksRefusedAndLateRecords(t *testing.T) {
	batch := []postbox.Record{{Message: postbox.Message{ID: "a"}}, {Message: postbox.Message{ID: "bad"}}, {Message: postbox.Message{ID: "c"}}}
	errs := make([]error, len(batch))
	build := func(r postbox.Record) (string, error) {
		if r.ID == "bad" {
			return "", errors.New("refused")
		}
		return r.ID, nil
	}
	var got []string
	for i, m := range Messages(context.Background(), "x", batch, errs, build) {
		got = append(got, m)
		if batch[i].ID != m {
			t.Errorf("index %d yielded %q", i, m)
		}
	}
	if strings.Join(got, ",") != "a,c" || errs[0] != nil || errs[2] != nil || !postbox.IsPermanent(errs[1]) {
		t.Errorf("got %v, errs %v", got, errs)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	errs = make([]error, len(batch))
	for range Messages(ctx, "x", batch, errs, build) {
		t.Error("a record was yielded after the context ended")
	}
	for i, err := range errs {
		if !errors.Is(err, context.Canceled) || postbox.IsPermanent(err) {
			t.Errorf("record %d after the context ended: %v", i, err)
		}
	}
}

package drivertest

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/postbox-go/postbox"
	"github.com/postbox-go/postbox/postboxtest"
)

func testSettle[TTx any](t *testing.T, newDriver NewDriver[TTx]) {
	drv := newDriver(t)

	t.Run("ErrorTextWithNULAndInvalidUTF8", func(t *testing.T) {
		// PostgreSQL text holds neither NUL nor invalid UTF-8. A broker error carrying them must still settle as
		// a failure, or the batch would be republished for ever.
		c := Client(t, drv, nil)
		enqueue(t, c, messages(2, "orders")...)
		rec := &postboxtest.Recorder{Fail: func(postbox.Record) error { return errors.New("broker said \x00no \xff") }}
		r := relay(t, c, rec, &postbox.RelayConfig{Backoff: func(int) time.Duration { return 0 }})
		if n, err := r.RunOnce(context.Background()); n != 2 || err != nil {
			t.Fatalf("RunOnce = %d, %v; want the failures settled", n, err)
		}
		if st := r.Stats(); st.Failed != 2 {
			t.Fatalf("relay stats %+v, want 2 failed", st)
		}
		rec.Fail = func(postbox.Record) error { return postbox.Permanent(errors.New("broker said \x00no \xff")) }
		drain(t, r)
		dead, err := c.ListDead(context.Background(), postbox.DeadFilter{All: true})
		if err != nil || len(dead) != 2 || !strings.Contains(dead[0].LastError, "broker said") || strings.ContainsRune(dead[0].LastError, 0) {
			t.Fatalf("dead = %+v, %v; want both, with the error text cleaned", dead, err)
		}
	})
}

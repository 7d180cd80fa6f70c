package drivertest

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/postbox-go/postbox"
	"github.com/postbox-go/postbox/driver"
	"github.com/postbox-go/postbox/postboxtest"
)

func testWake[TTx any](t *testing.T, newDriver NewDriver[TTx]) {
	drv := newDriver(t)
	_, listens := drv.(driver.Listener)

	if listens {
		t.Run("NotificationWakesIdleRelay", func(t *testing.T) {
			// The relay polls once an hour, and after activity looks again an hour later too (RecheckDelay), so no
			// poll or warm-idle peek comes within the test's time: only a wake-up makes it claim. Each message is
			// enqueued once the one before was published, so each needs a wake-up of its own, and every transaction
			// sends one (NotifyInterval 1ns). The relay has a client of its own, as in another process, so that
			// the producing client cannot wake it in the process.
			cfg := Tables(nil)
			cfg.NotifyInterval = time.Nanosecond
			c := Client(t, drv, cfg)
			rec := &postboxtest.Recorder{}
			r := relay(t, elsewhere(t, drv, c), rec, &postbox.RelayConfig{PollInterval: time.Hour, RecheckDelay: time.Hour})
			stop := run(t, r)
			waitListening(t, r)
			enqueueEach(t, c, rec, 5, func(i int) string {
				return fmt.Sprintf("message %d was not published within 30s: the relay was not woken (stats %+v)", i, r.Stats())
			})
			stop()
			if st := r.Stats(); st.Wakeups != 5 || st.Errors != 0 {
				t.Fatalf("relay stats %+v; want the 5 wake-ups that delivered the 5 messages, and no errors", st)
			}
		})

		t.Run("NotificationsAreCoalesced", func(t *testing.T) {
			// One wake-up per NotifyInterval per client: with an hour, only the first transaction notifies.
			cfg := Tables(nil)
			cfg.NotifyInterval = time.Hour
			c := Client(t, drv, cfg)
			rec := &postboxtest.Recorder{}
			r := relay(t, elsewhere(t, drv, c), rec, &postbox.RelayConfig{PollInterval: 20 * time.Millisecond})
			stop := run(t, r)
			waitListening(t, r)
			enqueueEach(t, c, rec, 5, func(i int) string { return fmt.Sprintf("message %d was not published", i) })
			stop()
			if st := r.Stats(); st.Wakeups != 1 {
				t.Fatalf("relay received %d wake-ups from 5 transactions within one NotifyInterval, want 1", st.Wakeups)
			}
		})
	}

	t.Run("DisableNotify", func(t *testing.T) {
		cfg := Tables(nil)
		cfg.DisableNotify = true
		c := Client(t, drv, cfg)
		rec := &postboxtest.Recorder{}
		r := relay(t, elsewhere(t, drv, c), rec, &postbox.RelayConfig{PollInterval: 20 * time.Millisecond})
		stop := run(t, r)
		enqueueEach(t, c, rec, 3, func(i int) string { return fmt.Sprintf("message %d was not published by polling", i) })
		stop()
		if st := r.Stats(); st.Wakeups != 0 {
			t.Fatalf("relay received %d wake-ups from a client with DisableNotify", st.Wakeups)
		}
	})

	t.Run("DisableListenPolls", func(t *testing.T) {
		c := Client(t, drv, nil)
		rec := &postboxtest.Recorder{}
		r := relay(t, elsewhere(t, drv, c), rec, &postbox.RelayConfig{PollInterval: 20 * time.Millisecond, DisableListen: true})
		stop := run(t, r)
		enqueueEach(t, c, rec, 3, func(i int) string { return fmt.Sprintf("message %d was not published by polling", i) })
		stop()
		if st := r.Stats(); st.Wakeups != 0 || st.Errors != 0 || st.Listening {
			t.Fatalf("relay stats %+v; a relay with DisableListen must not listen", st)
		}
	})

	t.Run("InTxWakesRelayOfSameClient", func(t *testing.T) {
		// No poll and no notification comes within the test's time: only the client waking its own relay after
		// each commit makes it claim.
		cfg := Tables(nil)
		cfg.DisableNotify = true
		c := Client(t, drv, cfg)
		rec := &postboxtest.Recorder{}
		r := relay(t, c, rec, &postbox.RelayConfig{PollInterval: time.Hour, RecheckDelay: time.Hour, DisableListen: true})
		stop := run(t, r)
		enqueueEach(t, c, rec, 3, func(i int) string {
			return fmt.Sprintf("message %d was not published within 30s: the client did not wake its relay after the commit (stats %+v)", i, r.Stats())
		})
		stop()
	})

	t.Run("EnqueueInCallerTxMakesRelayLook", func(t *testing.T) {
		// The caller commits: the client cannot tell when, but its Enqueue makes its relay look soon after.
		cfg := Tables(nil)
		cfg.DisableNotify = true
		c := Client(t, drv, cfg)
		rec := &postboxtest.Recorder{}
		r := relay(t, c, rec, &postbox.RelayConfig{PollInterval: time.Hour, DisableListen: true})
		stop := run(t, r)
		// Once the first message is published the relay runs, and so hears its client's enqueues.
		enqueueEach(t, c, rec, 1, func(int) string { return "the first message was not published within 30s" })
		ctx := context.Background()
		for i := 2; i <= 4; i++ {
			tx, err := drv.Begin(ctx)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := c.Enqueue(ctx, tx, messages(1, "orders")[0]); err != nil {
				t.Fatal(err)
			}
			if err := drv.Commit(ctx, tx); err != nil {
				t.Fatal(err)
			}
			if !rec.WaitDistinct(ctx, i, 30*time.Second) {
				t.Fatalf("message %d was not published within 30s: the relay did not look after its client enqueued", i)
			}
		}
		stop()
	})

	t.Run("RelayLooksSoonAfterActivity", func(t *testing.T) {
		// The producer is another client, as in another process, and sends no notification; the relay polls once
		// an hour. After publishing the first message it keeps looking, ever less often, and so finds the second.
		cfg := Tables(nil)
		cfg.DisableNotify = true
		producer := Client(t, drv, cfg)
		enqueue(t, producer, messages(1, "orders")...)
		rec := &postboxtest.Recorder{}
		r := relay(t, elsewhere(t, drv, producer), rec, &postbox.RelayConfig{PollInterval: time.Hour, DisableListen: true})
		stop := run(t, r)
		if !rec.WaitDistinct(context.Background(), 1, 30*time.Second) {
			t.Fatal("the relay's first claim did not publish the message waiting")
		}
		time.Sleep(50 * time.Millisecond) // a quiet spell
		enqueue(t, producer, messages(1, "orders")...)
		if !rec.WaitDistinct(context.Background(), 2, 30*time.Second) {
			t.Fatalf("a message committed 50ms after the last was not published within 30s: the idle relay stopped looking (stats %+v)", r.Stats())
		}
		stop()
	})

	t.Run("PeekSeesOnlyClaimable", func(t *testing.T) {
		clock := postboxtest.NewClock(time.Now())
		c := Client(t, drv, Tables(clock))
		peeker, ok := storeOf(t, drv, c).(driver.Peeker)
		if !ok {
			return // optional: an idle relay claims instead
		}
		ctx := context.Background()
		if found, err := peeker.Claimable(ctx, clock.Now()); err != nil || found {
			t.Fatalf("Claimable on an empty outbox = %v, %v", found, err)
		}
		enqueue(t, c, postbox.Message{Topic: "orders", Type: "order.created", AvailableAt: clock.Now().Add(time.Minute)})
		if found, err := peeker.Claimable(ctx, clock.Now()); err != nil || found {
			t.Fatalf("Claimable with only a delayed message = %v, %v; want false", found, err)
		}
		if found, err := peeker.Claimable(ctx, clock.Now().Add(time.Minute)); err != nil || !found {
			t.Fatalf("Claimable once the message is due = %v, %v; want true", found, err)
		}
	})
}

// elsewhere returns a client on c's tables that shares nothing else with c, as a relay in another process has:
// c's enqueues do not wake its relays in this process.
func elsewhere[TTx any](t *testing.T, drv driver.Driver[TTx], c *postbox.Client[TTx]) *postbox.Client[TTx] {
	t.Helper()
	cfg := c.Config()
	other, err := postbox.NewClient(drv, &cfg)
	if err != nil {
		t.Fatal(err)
	}
	return other
}

// enqueueEach enqueues n messages on "orders" one at a time, each once rec has seen the one before published, and
// fails the test with failure(i) when message i is not published within 30s.
func enqueueEach[TTx any](t *testing.T, c *postbox.Client[TTx], rec *postboxtest.Recorder, n int, failure func(i int) string) {
	t.Helper()
	for i := 1; i <= n; i++ {
		enqueue(t, c, messages(1, "orders")...)
		if !rec.WaitDistinct(context.Background(), i, 30*time.Second) {
			t.Fatal(failure(i))
		}
	}
}

// run starts r in the background and returns a function that stops it and waits for Run to return.
func run(t *testing.T, r *postbox.Relay) (stop func()) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- r.Run(ctx) }()
	stopped := false
	stop = func() {
		if stopped {
			return
		}
		stopped = true
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Run: %v", err)
		}
	}
	t.Cleanup(stop)
	return stop
}

// waitListening waits until r listens for wake-ups, so that no notification the test sends is lost.
func waitListening(t *testing.T, r *postbox.Relay) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for !r.Stats().Listening {
		if time.Now().After(deadline) {
			t.Fatalf("relay not listening after 30s: %+v", r.Stats())
		}
		time.Sleep(5 * time.Millisecond)
	}
}

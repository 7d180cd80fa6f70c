package drivertest

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/postbox-go/postbox"
	"github.com/postbox-go/postbox/postboxtest"
)

// Roles are clients on one table set, each connected as the database role of one job in docs/SECURITY.md.
type Roles[TTx any] struct {
	Migrator, App, Relay, Maintainer *postbox.Client[TTx]
	// Denied reports whether err is the database refusing a statement for lack of a privilege.
	Denied func(err error) bool
}

// ExerciseLeastPrivilege does each job as its role, after the migrator has migrated the tables and the grants of
// docs/SECURITY.md are in place: the application enqueues and consumes through the inbox with its failure policy,
// the relay publishes and parks, the maintainer inspects, revives, purges and cleans up. Then it checks that each
// role is refused what its grants leave out: no role but the migrator migrates, the application cannot claim or
// delete outbox rows, the relay and the maintainer cannot enqueue, the relay cannot touch the inbox.
func ExerciseLeastPrivilege[TTx any](t *testing.T, r Roles[TTx]) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	app, relayC, maint := r.App, r.Relay, r.Maintainer

	msgs := []postbox.Message{{Topic: "orders", Type: "order.created"}, {Topic: "poison", Type: "order.created"}}
	if err := app.InTx(ctx, func(ctx context.Context, tx TTx) error { return app.EnqueueBatch(ctx, tx, msgs) }); err != nil {
		t.Fatalf("Enqueue as the application: %v", err)
	}
	apply := func(ctx context.Context, tx TTx, m postbox.Message) ([]postbox.Message, error) {
		return []postbox.Message{{Topic: "invoices", Type: "invoice.due"}}, nil
	}
	for _, want := range []postbox.Outcome{postbox.Processed, postbox.Duplicate} {
		if res, err := postbox.Process(ctx, app, "billing", msgs[0], apply); err != nil || res.Outcome != want {
			t.Fatalf("Process as the application: %v, %v; want %v", res.Outcome, err, want)
		}
	}
	consumer, err := postbox.NewConsumer(app, "billing", &postbox.ConsumerConfig{MaxFailures: 2, DeadLetterTopic: "billing.dead"})
	if err != nil {
		t.Fatal(err)
	}
	refuse := func(context.Context, TTx, postbox.Message) ([]postbox.Message, error) {
		return nil, errors.New("refused")
	}
	for i, want := range []postbox.Outcome{postbox.Retry, postbox.Failed} {
		if res, err := consumer.Process(ctx, msgs[1], refuse); res.Outcome != want {
			t.Fatalf("failing delivery %d as the application: outcome %v (%v), want %v", i+1, res.Outcome, err, want)
		}
	}

	rec := &postboxtest.Recorder{}
	pub := postbox.PublisherFunc(func(ctx context.Context, batch []postbox.Record) error {
		errs := make([]error, len(batch))
		for i, rc := range batch {
			if rc.Topic == "poison" {
				errs[i] = postbox.Permanent(errors.New("refused"))
			}
		}
		if err := rec.Publish(ctx, batch); err != nil {
			return err
		}
		return &postbox.BatchError{Errs: errs}
	})
	relay, err := postbox.NewRelay(relayC, pub, nil)
	if err != nil {
		t.Fatal(err)
	}
	if n, err := relay.RunOnce(ctx); err != nil || n != 4 {
		t.Fatalf("RunOnce as the relay: %d, %v; want the 4 messages (2 enqueued, 1 output, 1 dead letter)", n, err)
	}
	if _, err := relayC.Stats(ctx); err != nil {
		t.Fatalf("Stats as the relay: %v", err)
	}

	if s, err := maint.Stats(ctx); err != nil || s.Dead != 1 {
		t.Fatalf("Stats as the maintainer: %+v, %v; want 1 dead", s, err)
	}
	if dead, err := maint.ListDead(ctx, postbox.DeadFilter{All: true}); err != nil || len(dead) != 1 {
		t.Fatalf("ListDead as the maintainer: %d, %v", len(dead), err)
	}
	if n, err := maint.RetryDead(ctx, postbox.DeadFilter{All: true}); err != nil || n != 1 {
		t.Fatalf("RetryDead as the maintainer: %d, %v", n, err)
	}
	if _, err := relay.RunOnce(ctx); err != nil {
		t.Fatalf("RunOnce as the relay: %v", err)
	}
	if n, err := maint.PurgeDead(ctx, postbox.DeadFilter{Topic: "poison"}); err != nil || n != 1 {
		t.Fatalf("PurgeDead as the maintainer: %d, %v", n, err)
	}
	if changed, err := maint.PauseTopic(ctx, "orders", "ops"); err != nil || !changed {
		t.Fatalf("PauseTopic as the maintainer: %v, %v", changed, err)
	}
	if p, err := relayC.PausedTopics(ctx); err != nil || len(p) != 1 {
		t.Fatalf("PausedTopics as the relay: %+v, %v; want orders", p, err)
	}
	if changed, err := maint.ResumeTopic(ctx, "orders", "ops"); err != nil || !changed {
		t.Fatalf("ResumeTopic as the maintainer: %v, %v", changed, err)
	}
	if o, err := maint.Overview(ctx, 0); err != nil || o.Pending.N != 0 {
		t.Fatalf("Overview as the maintainer: %+v, %v", o, err)
	}
	if v, err := maint.InboxView(ctx, "billing", time.Time{}, 0); err != nil || len(v.GivenUp) != 1 {
		t.Fatalf("InboxView as the maintainer: %+v, %v; want the message given up", v, err)
	}
	if done, err := maint.RetryInbox(ctx, "billing", msgs[1].ID, "ops"); err != nil || !done {
		t.Fatalf("RetryInbox as the maintainer: %v, %v", done, err)
	}
	if _, err := cleaner(t, maint, &postbox.CleanupConfig{InboxRetention: time.Nanosecond}).RunOnce(ctx); err != nil {
		t.Fatalf("cleanup of the outbox and inbox as the maintainer: %v", err)
	}
	if status, err := maint.MigrationStatus(ctx); err != nil || len(status) == 0 || !status[len(status)-1].Applied {
		t.Fatalf("MigrationStatus as the maintainer: %+v, %v", status, err)
	}

	denied := func(what string, err error) {
		t.Helper()
		if err == nil || !r.Denied(err) {
			t.Errorf("%s: %v; want the database to refuse it for lack of a privilege", what, err)
		}
	}
	for name, c := range map[string]*postbox.Client[TTx]{"the application": app, "the relay": relayC, "the maintainer": maint} {
		_, err := c.Migrate(ctx)
		denied(name+" migrating", err)
	}
	appRelay, err := postbox.NewRelay(app, pub, nil)
	if err != nil {
		t.Fatal(err)
	}
	_, err = appRelay.RunOnce(ctx)
	denied("the application claiming outbox rows", err)
	_, err = app.PurgeDead(ctx, postbox.DeadFilter{All: true})
	denied("the application deleting outbox rows", err)
	for name, c := range map[string]*postbox.Client[TTx]{"the relay": relayC, "the maintainer": maint} {
		err := c.InTx(ctx, func(ctx context.Context, tx TTx) error {
			_, err := c.Enqueue(ctx, tx, postbox.Message{Topic: "orders", Type: "forged"})
			return err
		})
		denied(name+" enqueuing", err)
	}
	_, err = relayC.PauseTopic(ctx, "orders", "relay")
	denied("the relay pausing a topic", err)
	_, err = postbox.Process(ctx, relayC, "billing", postbox.Message{ID: postbox.NewID(), Topic: "orders", Type: "x"}, apply)
	denied("the relay claiming in the inbox", err)
	_, err = cleaner(t, relayC, &postbox.CleanupConfig{InboxRetention: time.Nanosecond}).RunOnce(ctx)
	denied("the relay deleting inbox rows", err)
}

package redisstream_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/postbox-go/postbox"
	"github.com/postbox-go/postbox/broker"
	"github.com/postbox-go/postbox/broker/brokertest"
	"github.com/postbox-go/postbox/broker/redisstream"
	"github.com/redis/go-redis/v9"
)

// stream returns a fresh stream name with a group on it, deleted at the end of the test.
func stream(t *testing.T, rdb *redis.Client, group string) (topic, name string) {
	t.Helper()
	topic = brokertest.Topic()
	name = prefix + topic
	if err := redisstream.EnsureGroup(context.Background(), rdb, name, group, redisstream.StartOldest); err != nil {
		t.Fatal(err)
	}
	cleanup(t, rdb, name)
	return topic, name
}

func newSub(t *testing.T, rdb *redis.Client, group string, topics []string, cfg *redisstream.SubscriberConfig) *redisstream.Subscriber {
	t.Helper()
	if cfg == nil {
		cfg = &redisstream.SubscriberConfig{}
	}
	cfg.StreamPrefix, cfg.Group, cfg.Topics = prefix, group, topics
	if cfg.Block == 0 {
		cfg.Block = 100 * time.Millisecond
	}
	if cfg.Logger == nil {
		cfg.Logger = quietLogger()
	}
	sub, err := redisstream.NewSubscriber(rdb, cfg)
	if err != nil {
		t.Fatal(err)
	}
	return sub
}

func newPub(t *testing.T, rdb *redis.Client, cfg *redisstream.PublisherConfig) *redisstream.Publisher {
	t.Helper()
	if cfg == nil {
		cfg = &redisstream.PublisherConfig{}
	}
	cfg.StreamPrefix = prefix
	pub, err := redisstream.NewPublisher(rdb, cfg)
	if err != nil {
		t.Fatal(err)
	}
	return pub
}

func ack(ctx context.Context, d *broker.Delivery) { _ = d.Ack(context.WithoutCancel(ctx)) }

func TestWireFormat(t *testing.T) {
	rdb := connect(t)
	ctx := context.Background()
	topic := brokertest.Topic()
	cleanup(t, rdb, prefix+topic)
	rec := brokertest.Records(topic, 2, 2)[1] // key "clé-ü-1", with headers
	if err := newPub(t, rdb, &redisstream.PublisherConfig{Source: "/billing"}).Publish(ctx, []postbox.Record{rec}); err != nil {
		t.Fatal(err)
	}
	entries, err := rdb.XRange(ctx, prefix+topic, "-", "+").Result()
	if err != nil || len(entries) != 1 {
		t.Fatalf("XRANGE of stream %s = %v, %v; want the one entry", prefix+topic, entries, err)
	}
	want := map[string]any{
		"ce_specversion": "1.0", "ce_id": rec.ID, "ce_source": "/billing", "ce_type": rec.Type,
		"ce_time": rec.CreatedAt.UTC().Format(time.RFC3339Nano), "ce_subject": rec.Key, "ce_partitionkey": rec.Key,
		"ce_data": string(rec.Payload),
	}
	for k, v := range rec.Headers {
		want[k] = v
	}
	if got := entries[0].Values; fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("entry fields\n got %v\nwant %v", got, want)
	}
}

func TestPublishErrors(t *testing.T) {
	rdb := connect(t)
	ctx := context.Background()
	topic, _ := stream(t, rdb, "g")
	missing, occupied := brokertest.Topic(), brokertest.Topic()
	cleanup(t, rdb, prefix+missing, prefix+occupied)
	if err := rdb.Set(ctx, prefix+occupied, "a string", time.Hour).Err(); err != nil {
		t.Fatal(err)
	}
	pub := newPub(t, rdb, &redisstream.PublisherConfig{RequireStream: true})
	recs := brokertest.Records(topic, 6, 1)
	recs[1].Topic = ""
	recs[2].Headers = map[string]string{"ce_data": "x"} // would overwrite the payload field
	recs[3].Topic = occupied
	recs[4].Topic = missing
	err := pub.Publish(ctx, recs)
	brokertest.CheckBatch(t, err,
		[]brokertest.Outcome{{}, {Err: "no topic", Permanent: true}, {Err: "ce_data", Permanent: true}, {Err: "something other than a stream", Permanent: true}, {Err: "does not exist"}, {}})
	if be := (*postbox.BatchError)(nil); !errors.As(err, &be) || !errors.Is(be.Errs[4], redisstream.ErrNoStream) {
		t.Errorf("publishing to a missing stream with RequireStream: %v, want ErrNoStream", err)
	}
	if n, err := rdb.Exists(ctx, prefix+missing).Result(); err != nil || n != 0 {
		t.Errorf("RequireStream created stream %s", prefix+missing)
	}
	if n, err := rdb.XLen(ctx, prefix+topic).Result(); err != nil || n != 2 {
		t.Errorf("stream has %d entries (%v), want the 2 good records", n, err)
	}
}

// TestPublishFailsWhenLoginFails: a password Redis refuses fails every record, retryably, and stores nothing. The
// client reports such a failure only from the pipeline as a whole, not on its commands.
func TestPublishFailsWhenLoginFails(t *testing.T) {
	rdb := connect(t)
	ctx := context.Background()
	topic, name := stream(t, rdb, "g")
	user := prefix + "user-" + topic
	if err := rdb.Do(ctx, "ACL", "SETUSER", user, "reset", "on", ">right-password", "~*", "+@all").Err(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { rdb.Do(context.Background(), "ACL", "DELUSER", user) })
	wrong := redis.NewClient(&redis.Options{Addr: addr(), Username: user, Password: "wrong-password", ContextTimeoutEnabled: true})
	t.Cleanup(func() { _ = wrong.Close() })
	pub := newPub(t, wrong, nil)
	recs := brokertest.Records(topic, 3, 1)
	err := pub.Publish(ctx, recs)
	var be *postbox.BatchError
	if !errors.As(err, &be) || len(be.Errs) != len(recs) {
		t.Fatalf("Publish with a refused password = %v, want a BatchError with %d entries", err, len(recs))
	}
	for i, e := range be.Errs {
		if e == nil || !strings.Contains(e.Error(), "WRONGPASS") || postbox.IsPermanent(e) {
			t.Errorf("record %d: %v; want a retryable error saying WRONGPASS", i, e)
		}
	}
	if n, err := rdb.XLen(ctx, name).Result(); err != nil || n != 0 {
		t.Errorf("stream has %d entries (%v), want none", n, err)
	}
}

func TestMaxLenBoundsTheStream(t *testing.T) {
	rdb := connect(t)
	ctx := context.Background()
	topic := brokertest.Topic()
	cleanup(t, rdb, prefix+topic)
	pub := newPub(t, rdb, &redisstream.PublisherConfig{MaxLen: 100})
	recs := brokertest.Records(topic, 1000, 3)
	for i := 0; i < len(recs); i += 50 {
		if err := pub.Publish(ctx, recs[i:i+50]); err != nil {
			t.Fatal(err)
		}
	}
	n, err := rdb.XLen(ctx, prefix+topic).Result()
	if err != nil {
		t.Fatal(err)
	}
	// MAXLEN ~ trims whole nodes of at most stream-node-max-entries (100 by default), so it keeps between MaxLen
	// and MaxLen + 99 entries.
	if n < 100 || n >= 200 {
		t.Fatalf("stream holds %d entries after 1000 publishes with MaxLen 100; want 100 to 199", n)
	}
	last, err := rdb.XRevRangeN(ctx, prefix+topic, "+", "-", 1).Result()
	if err != nil || len(last) != 1 || last[0].Values["ce_id"] != recs[len(recs)-1].ID {
		t.Fatalf("newest entry %v, %v; want the last record published", last, err)
	}
}

func TestMaxAgeTrimsOldEntries(t *testing.T) {
	rdb := connect(t)
	ctx := context.Background()
	topic := brokertest.Topic()
	name := prefix + topic
	cleanup(t, rdb, name)
	// 300 entries from 1970: three whole nodes that MINID ~ may drop.
	for i := 1; i <= 300; i++ {
		if err := rdb.XAdd(ctx, &redis.XAddArgs{Stream: name, ID: fmt.Sprintf("%d-0", i), Values: []string{"old", "1"}}).Err(); err != nil {
			t.Fatal(err)
		}
	}
	pub := newPub(t, rdb, &redisstream.PublisherConfig{MaxAge: time.Hour})
	recs := brokertest.Records(topic, 1, 1)
	if err := pub.Publish(ctx, recs); err != nil {
		t.Fatal(err)
	}
	entries, err := rdb.XRange(ctx, name, "-", "+").Result()
	if err != nil {
		t.Fatal(err)
	}
	if len(entries) >= 301 {
		t.Fatalf("stream holds all %d entries; MaxAge should have trimmed those older than an hour", len(entries))
	}
	if entries[len(entries)-1].Values["ce_id"] != recs[0].ID {
		t.Fatalf("newest entry %v; want the record just published", entries[len(entries)-1])
	}
}

func TestTrimmedPendingEntriesAreReported(t *testing.T) {
	rdb := connect(t)
	ctx := context.Background()
	topic, name := stream(t, rdb, "g")
	pub := newPub(t, rdb, nil)
	lost := brokertest.Records(topic, 3, 1)
	if err := pub.Publish(ctx, lost); err != nil {
		t.Fatal(err)
	}
	// A consumer reads them and dies without acking; then trimming removes them.
	if err := rdb.XReadGroup(ctx, &redis.XReadGroupArgs{Group: "g", Consumer: "crashed", Streams: []string{name, ">"}, Block: -1}).Err(); err != nil {
		t.Fatal(err)
	}
	later := brokertest.Records(topic, 1, 1)
	if err := rdb.XTrimMaxLen(ctx, name, 0).Err(); err != nil {
		t.Fatal(err)
	}
	if err := pub.Publish(ctx, later); err != nil {
		t.Fatal(err)
	}
	logs := &logRecorder{}
	sub := newSub(t, rdb, "g", []string{topic}, &redisstream.SubscriberConfig{ClaimIdle: time.Millisecond, Logger: slog.New(logs)})
	got := brokertest.ReceiveN(t, sub, 1, ack)
	if got[0].Message.ID != later[0].ID {
		t.Fatalf("delivered %s, want only %s", got[0].Message.ID, later[0].ID)
	}
	r, ok := logs.find("lost to this group")
	if !ok {
		t.Fatal("no warning about the pending entries that were trimmed")
	}
	var ids []string
	r.Attrs(func(a slog.Attr) bool {
		if a.Key == "ids" || a.Key == "id" {
			ids = append(ids, fmt.Sprint(a.Value.Any()))
		}
		return true
	})
	if len(ids) == 0 {
		t.Fatalf("warning %q names no entry IDs", r.Message)
	}
	if pend, err := rdb.XPending(ctx, name, "g").Result(); err != nil || pend.Count != 0 {
		t.Fatalf("pending entries after the claim: %+v, %v; want none", pend, err)
	}
}

func TestCrashedConsumersEntriesAreClaimed(t *testing.T) {
	rdb := connect(t)
	ctx := context.Background()
	topic, name := stream(t, rdb, "g")
	recs := brokertest.Records(topic, 5, 2)
	if err := newPub(t, rdb, nil).Publish(ctx, recs); err != nil {
		t.Fatal(err)
	}
	if err := rdb.XReadGroup(ctx, &redis.XReadGroupArgs{Group: "g", Consumer: "crashed", Streams: []string{name, ">"}, Block: -1}).Err(); err != nil {
		t.Fatal(err)
	}
	sub := newSub(t, rdb, "g", []string{topic}, &redisstream.SubscriberConfig{ClaimIdle: 50 * time.Millisecond})
	attempts := map[string]int{}
	for _, d := range brokertest.ReceiveN(t, sub, len(recs), ack) {
		attempts[d.Message.ID] = d.Attempt
	}
	for _, r := range recs {
		if attempts[r.ID] != 2 {
			t.Errorf("message %s: attempt %d; want it delivered with attempt 2 (the crashed consumer had the first)", r.ID, attempts[r.ID])
		}
	}
	if pend, err := rdb.XPending(ctx, name, "g").Result(); err != nil || pend.Count != 0 {
		t.Fatalf("pending entries after the acks: %+v, %v; want none", pend, err)
	}
}

func TestNackDelayIsCappedAtClaimIdle(t *testing.T) {
	rdb := connect(t)
	topic, _ := stream(t, rdb, "g")
	recs := brokertest.Records(topic, 1, 1)
	if err := newPub(t, rdb, nil).Publish(context.Background(), recs); err != nil {
		t.Fatal(err)
	}
	sub := newSub(t, rdb, "g", []string{topic}, &redisstream.SubscriberConfig{ClaimIdle: 200 * time.Millisecond})
	got := brokertest.ReceiveN(t, sub, 2, func(ctx context.Context, d *broker.Delivery) {
		if d.Attempt == 1 {
			_ = d.Nack(ctx, time.Hour)
			return
		}
		ack(ctx, d)
	})
	if got[1].Message.ID != recs[0].ID || got[1].Attempt != 2 {
		t.Fatalf("second delivery %s attempt %d; want the message nacked for an hour again after ClaimIdle", got[1].Message.ID, got[1].Attempt)
	}
}

func TestSeveralTopics(t *testing.T) {
	rdb := connect(t)
	ctx := context.Background()
	a, _ := stream(t, rdb, "g")
	b, _ := stream(t, rdb, "g")
	pub := newPub(t, rdb, nil)
	recs := append(brokertest.Records(a, 3, 1), brokertest.Records(b, 3, 1)...)
	if err := pub.Publish(ctx, recs); err != nil {
		t.Fatal(err)
	}
	sub := newSub(t, rdb, "g", []string{a, b}, nil)
	topics := map[string]string{}
	for _, d := range brokertest.ReceiveN(t, sub, len(recs), ack) {
		topics[d.Message.ID] = d.Message.Topic
	}
	for _, r := range recs {
		if topics[r.ID] != r.Topic {
			t.Errorf("message %s arrived with topic %q, want %q (the stream name without the prefix)", r.ID, topics[r.ID], r.Topic)
		}
	}
}

func TestForeignEntriesAreDropped(t *testing.T) {
	rdb := connect(t)
	ctx := context.Background()
	topic, name := stream(t, rdb, "g")
	if err := rdb.XAdd(ctx, &redis.XAddArgs{Stream: name, Values: []string{"plain", "not a CloudEvent"}}).Err(); err != nil {
		t.Fatal(err)
	}
	recs := brokertest.Records(topic, 1, 1)
	if err := newPub(t, rdb, nil).Publish(ctx, recs); err != nil {
		t.Fatal(err)
	}
	logs := &logRecorder{}
	sub := newSub(t, rdb, "g", []string{topic}, &redisstream.SubscriberConfig{Logger: slog.New(logs)})
	if got := brokertest.ReceiveN(t, sub, 1, ack); got[0].Message.ID != recs[0].ID {
		t.Fatalf("handler got %s, want only the Postbox message", got[0].Message.ID)
	}
	if pend, err := rdb.XPending(ctx, name, "g").Result(); err != nil || pend.Count != 0 {
		t.Fatalf("pending entries: %+v, %v; the foreign entry should be acknowledged", pend, err)
	}
	if _, ok := logs.find("not a Postbox CloudEvent"); !ok {
		t.Fatal("the dropped entry was not logged")
	}
}

func TestConsumerLeavesGroupWhenNothingPending(t *testing.T) {
	rdb := connect(t)
	ctx := context.Background()
	topic, name := stream(t, rdb, "g")
	pub := newPub(t, rdb, nil)
	consumers := func() []string {
		cs, err := rdb.XInfoConsumers(ctx, name, "g").Result()
		if err != nil {
			t.Fatal(err)
		}
		var names []string
		for _, c := range cs {
			names = append(names, c.Name)
		}
		return names
	}

	done := newSub(t, rdb, "g", []string{topic}, nil)
	if err := pub.Publish(ctx, brokertest.Records(topic, 1, 1)); err != nil {
		t.Fatal(err)
	}
	brokertest.ReceiveN(t, done, 1, ack)
	if cs := consumers(); len(cs) != 0 {
		t.Fatalf("consumers %v after a subscriber that acked everything stopped; want none", cs)
	}

	// A consumer still holding an entry stays, or the entry could never be claimed.
	holding := newSub(t, rdb, "g", []string{topic}, &redisstream.SubscriberConfig{Consumer: "holding"})
	if err := pub.Publish(ctx, brokertest.Records(topic, 1, 1)); err != nil {
		t.Fatal(err)
	}
	brokertest.ReceiveN(t, holding, 1, func(ctx context.Context, d *broker.Delivery) { _ = d.Nack(context.WithoutCancel(ctx), time.Hour) })
	if cs := consumers(); len(cs) != 1 || cs[0] != "holding" {
		t.Fatalf("consumers %v; want the one holding a pending entry", cs)
	}
}

func TestReceiveFailsWithoutGroup(t *testing.T) {
	rdb := connect(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	topic := brokertest.Topic()
	cleanup(t, rdb, prefix+topic)
	sub := newSub(t, rdb, "never-made", []string{topic}, nil)
	if err := sub.Receive(ctx, ack); err == nil || !strings.Contains(err.Error(), "EnsureGroup") {
		t.Fatalf("Receive without a group = %v; want an error pointing to EnsureGroup", err)
	}

	// A group destroyed while Receive runs.
	topic, name := stream(t, rdb, "g")
	if err := newPub(t, rdb, nil).Publish(ctx, brokertest.Records(topic, 1, 1)); err != nil {
		t.Fatal(err)
	}
	sub = newSub(t, rdb, "g", []string{topic}, nil)
	started := make(chan struct{})
	var once sync.Once
	done := make(chan error, 1)
	go func() {
		done <- sub.Receive(ctx, func(ctx context.Context, d *broker.Delivery) {
			ack(ctx, d)
			once.Do(func() { close(started) })
		})
	}()
	<-started
	if err := sub.Receive(ctx, ack); err == nil || !strings.Contains(err.Error(), "already running") {
		t.Fatalf("second concurrent Receive = %v, want an error saying it is already running", err)
	}
	if err := rdb.XGroupDestroy(ctx, name, "g").Err(); err != nil {
		t.Fatal(err)
	}
	if err := <-done; err == nil || !strings.Contains(err.Error(), "NOGROUP") {
		t.Fatalf("Receive = %v after its group was destroyed; want a NOGROUP error before the context ends", err)
	}
}

func TestEnsureGroupIsIdempotent(t *testing.T) {
	rdb := connect(t)
	ctx := context.Background()
	topic, name := stream(t, rdb, "g")
	recs := brokertest.Records(topic, 2, 1)
	if err := newPub(t, rdb, nil).Publish(ctx, recs); err != nil {
		t.Fatal(err)
	}
	// Again, asking for new entries only: the existing group keeps its position.
	if err := redisstream.EnsureGroup(ctx, rdb, name, "g", redisstream.StartNew); err != nil {
		t.Fatalf("EnsureGroup on an existing group: %v", err)
	}
	// A new group from StartNew sees only later entries.
	if err := redisstream.EnsureGroup(ctx, rdb, name, "late", redisstream.StartNew); err != nil {
		t.Fatal(err)
	}
	got := brokertest.ReceiveN(t, newSub(t, rdb, "g", []string{topic}, nil), 2, ack)
	if got[0].Message.ID != recs[0].ID || got[1].Message.ID != recs[1].ID {
		t.Fatalf("group g got %s, %s; want both messages published before EnsureGroup was called again", got[0].Message.ID, got[1].Message.ID)
	}
	later := brokertest.Records(topic, 1, 1)
	if err := newPub(t, rdb, nil).Publish(ctx, later); err != nil {
		t.Fatal(err)
	}
	if got := brokertest.ReceiveN(t, newSub(t, rdb, "late", []string{topic}, nil), 1, ack); got[0].Message.ID != later[0].ID {
		t.Fatalf("group made with StartNew got %s first, want %s", got[0].Message.ID, later[0].ID)
	}
}

func TestConfigErrors(t *testing.T) {
	rdb := connect(t)
	ctx := context.Background()
	for _, cfg := range []*redisstream.PublisherConfig{{MaxLen: -1}, {MaxAge: -time.Second}, {MaxLen: 10, MaxAge: time.Hour}, {MaxAge: time.Microsecond}} {
		if _, err := redisstream.NewPublisher(rdb, cfg); !errors.Is(err, postbox.ErrInvalidConfig) {
			t.Errorf("NewPublisher(%+v) = %v, want ErrInvalidConfig", *cfg, err)
		}
	}
	if _, err := redisstream.NewPublisher(nil, nil); !errors.Is(err, postbox.ErrInvalidConfig) {
		t.Errorf("NewPublisher(nil) = %v", err)
	}
	for _, c := range []struct {
		rdb redis.UniversalClient
		cfg *redisstream.SubscriberConfig
	}{
		{nil, &redisstream.SubscriberConfig{Group: "g", Topics: []string{"t"}}},
		{rdb, nil},
		{rdb, &redisstream.SubscriberConfig{Topics: []string{"t"}}},
		{rdb, &redisstream.SubscriberConfig{Group: "g"}},
		{rdb, &redisstream.SubscriberConfig{Group: "g", Topics: []string{"t", ""}}},
		{rdb, &redisstream.SubscriberConfig{Group: "g", Topics: []string{"t", "t"}}},
		{rdb, &redisstream.SubscriberConfig{Group: "g", Topics: []string{"t"}, Concurrency: -1}},
		{rdb, &redisstream.SubscriberConfig{Group: "g", Topics: []string{"t"}, Block: time.Microsecond}},
		{rdb, &redisstream.SubscriberConfig{Group: "g", Topics: []string{"t"}, ClaimIdle: -time.Second}},
	} {
		if _, err := redisstream.NewSubscriber(c.rdb, c.cfg); !errors.Is(err, postbox.ErrInvalidConfig) {
			t.Errorf("NewSubscriber(%+v) = %v, want ErrInvalidConfig", c.cfg, err)
		}
	}
	if err := redisstream.EnsureGroup(ctx, rdb, "", "g", ""); err == nil {
		t.Error("EnsureGroup accepted an empty stream name")
	}
	if err := redisstream.EnsureGroup(ctx, rdb, prefix+"x", "", ""); err == nil {
		t.Error("EnsureGroup accepted an empty group name")
	}
	sub, err := redisstream.NewSubscriber(rdb, &redisstream.SubscriberConfig{Group: "g", Topics: []string{"t"}})
	if err != nil {
		t.Fatal(err)
	}
	if err := sub.Receive(ctx, nil); err == nil {
		t.Error("Receive accepted a nil handler")
	}
	other, _ := redisstream.NewSubscriber(rdb, &redisstream.SubscriberConfig{Group: "g", Topics: []string{"t"}})
	if sub.Consumer() == "" || sub.Consumer() == other.Consumer() {
		t.Errorf("generated consumer names %q and %q; want distinct names", sub.Consumer(), other.Consumer())
	}
}

package kafkabroker_test

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
	"github.com/postbox-go/postbox/broker/brokertest"
	kafkabroker "github.com/postbox-go/postbox/broker/kafkabroker"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/twmb/franz-go/pkg/sasl/plain"
)

// env is a cluster with one single-partition topic, a publisher and a subscriber config for a group.
type env struct {
	brokers []string
	cl      *kgo.Client
	topic   string
	pub     *kafkabroker.Publisher
	cfg     kafkabroker.SubscriberConfig
}

func newEnv(t *testing.T, partitions int32) *env {
	t.Helper()
	brokers := cluster(t)
	cl := client(t, brokers)
	topic := brokertest.Topic()
	if err := kafkabroker.EnsureTopic(context.Background(), cl, kafkabroker.TopicConfig{Name: topic, Partitions: partitions}); err != nil {
		t.Fatal(err)
	}
	pub, err := kafkabroker.NewPublisher(cl, nil)
	if err != nil {
		t.Fatal(err)
	}
	return &env{brokers: brokers, cl: cl, topic: topic, pub: pub, cfg: kafkabroker.SubscriberConfig{Brokers: brokers,
		Group: "g-" + topic, Topics: []string{topic}, CommitInterval: 20 * time.Millisecond, Logger: quietLogger()}}
}

func (e *env) publish(t *testing.T, recs []postbox.Record) {
	t.Helper()
	if err := e.pub.Publish(context.Background(), recs); err != nil {
		t.Fatal(err)
	}
}

func (e *env) subscriber(t *testing.T) *kafkabroker.Subscriber {
	t.Helper()
	sub, err := kafkabroker.NewSubscriber(&e.cfg)
	if err != nil {
		t.Fatal(err)
	}
	return sub
}

// committed returns the group's committed offset of each partition of the topic (absent: none committed).
func (e *env) committed(t *testing.T) map[int32]int64 {
	t.Helper()
	resp, err := kadm.NewClient(e.cl).FetchOffsets(context.Background(), e.cfg.Group)
	if err != nil {
		t.Fatal(err)
	}
	out := map[int32]int64{}
	resp.Each(func(o kadm.OffsetResponse) {
		if o.Topic == e.topic && o.Err == nil && o.At >= 0 {
			out[o.Partition] = o.At
		}
	})
	return out
}

// delivery is what a test handler saw.
type delivery struct {
	id      string
	attempt int
}

// running is a Receive running in the background.
type running struct {
	cancel context.CancelFunc
	done   chan error
}

func start(sub broker.Subscriber, handle broker.DeliveryHandler) *running {
	ctx, cancel := context.WithCancel(context.Background())
	r := &running{cancel: cancel, done: make(chan error, 1)}
	go func() { r.done <- sub.Receive(ctx, handle) }()
	return r
}

func (r *running) stop(t *testing.T) {
	t.Helper()
	r.cancel()
	if err := <-r.done; err != nil {
		t.Fatalf("Receive: %v", err)
	}
}

// TestNackHoldsItsPartition: a nacked message comes again, with a higher Attempt, before any later message of
// its partition.
func TestNackHoldsItsPartition(t *testing.T) {
	e := newEnv(t, 1)
	recs := brokertest.Records(e.topic, 3, 1)
	e.publish(t, recs)
	var mu sync.Mutex
	var got []delivery
	all := make(chan struct{})
	r := start(e.subscriber(t), func(ctx context.Context, d *broker.Delivery) {
		mu.Lock()
		got = append(got, delivery{d.Message.ID, d.Attempt})
		mu.Unlock()
		if d.Message.ID == recs[1].ID && d.Attempt < 3 {
			_ = d.Nack(ctx, 10*time.Millisecond)
			return
		}
		_ = d.Ack(ctx)
		if d.Message.ID == recs[2].ID {
			close(all)
		}
	})
	<-all
	r.stop(t)
	want := []delivery{{recs[0].ID, 1}, {recs[1].ID, 1}, {recs[1].ID, 2}, {recs[1].ID, 3}, {recs[2].ID, 1}}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("deliveries (id attempt):\n got %v\nwant %v", got, want)
	}
	if c := e.committed(t); c[0] != 3 {
		t.Fatalf("committed offset %v after all three were acked, want 3", c)
	}
}

// TestStopCommitsOnlyPastSettled: a subscriber stopped while a handler holds a message commits the offset of
// that message, so the next Receive starts with it.
func TestStopCommitsOnlyPastSettled(t *testing.T) {
	e := newEnv(t, 1)
	recs := brokertest.Records(e.topic, 3, 1)
	e.publish(t, recs)
	sub := e.subscriber(t)
	holding := make(chan struct{})
	r := start(sub, func(ctx context.Context, d *broker.Delivery) {
		if d.Message.ID == recs[1].ID {
			close(holding)
			<-ctx.Done() // returns unsettled: Dispatch nacks it
			return
		}
		_ = d.Ack(ctx)
	})
	<-holding
	r.stop(t)
	if c := e.committed(t); c[0] != 1 {
		t.Fatalf("committed offsets %v; want partition 0 at 1, the unsettled message", c)
	}

	var got []delivery
	done := make(chan struct{})
	r = start(sub, func(ctx context.Context, d *broker.Delivery) {
		got = append(got, delivery{d.Message.ID, d.Attempt})
		_ = d.Ack(ctx)
		if len(got) == 2 {
			close(done)
		}
	})
	<-done
	r.stop(t)
	want := []delivery{{recs[1].ID, 1}, {recs[2].ID, 1}}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("after the restart: got %v, want %v", got, want)
	}
}

// TestRejectSkips: a rejected message, and a record that is not a Postbox message, are committed past and
// never delivered again.
func TestRejectSkips(t *testing.T) {
	e := newEnv(t, 1)
	if err := e.cl.ProduceSync(context.Background(), &kgo.Record{Topic: e.topic, Value: []byte("plain, not a CloudEvent")}).FirstErr(); err != nil {
		t.Fatal(err)
	}
	recs := brokertest.Records(e.topic, 3, 1)
	e.publish(t, recs[:2])
	sub := e.subscriber(t)
	var mu sync.Mutex
	var got []string
	done := make(chan struct{})
	r := start(sub, func(ctx context.Context, d *broker.Delivery) {
		mu.Lock()
		defer mu.Unlock()
		got = append(got, d.Message.ID)
		if d.Message.ID == recs[0].ID {
			_ = d.Reject(ctx) // cannot ever handle this
			return
		}
		close(done)
		_ = d.Ack(ctx)
	})
	<-done
	r.stop(t)
	if c := e.committed(t); c[0] != 3 {
		t.Fatalf("committed offsets %v; want partition 0 at 3, past the foreign record and the rejected message", c)
	}
	if want := []string{recs[0].ID, recs[1].ID}; fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("handled %v, want %v (the foreign record never reaches the handler)", got, want)
	}

	e.publish(t, recs[2:])
	first := make(chan string, 1)
	r = start(sub, func(ctx context.Context, d *broker.Delivery) {
		select {
		case first <- d.Message.ID:
		default:
		}
		_ = d.Ack(ctx)
	})
	id := <-first
	r.stop(t)
	if id != recs[2].ID {
		t.Fatalf("after a restart the first delivery was %s, want the new message %s", id, recs[2].ID)
	}
}

// TestSmallPrefetch: fetching pauses and resumes around a full lane without losing or reordering messages.
func TestSmallPrefetch(t *testing.T) {
	e := newEnv(t, 1)
	e.cfg.Prefetch = 2
	recs := brokertest.Records(e.topic, 60, 1)
	e.publish(t, recs)
	var got []string
	done := make(chan struct{})
	r := start(e.subscriber(t), func(ctx context.Context, d *broker.Delivery) {
		got = append(got, d.Message.ID)
		_ = d.Ack(ctx)
		if len(got) == len(recs) {
			close(done)
		}
	})
	<-done
	r.stop(t)
	for i, id := range got {
		if id != recs[i].ID {
			t.Fatalf("delivery %d is %s, want %s", i, id, recs[i].ID)
		}
	}
}

// TestRebalanceCommitsRevokedPartitions: when a second member joins, the first commits what it settled in the
// partitions it gives up, so no message is handled twice.
func TestRebalanceCommitsRevokedPartitions(t *testing.T) {
	e := newEnv(t, 8)
	e.cfg.CommitInterval = time.Hour // only the revoke and the stop commit
	var mu sync.Mutex
	seen := map[string]int{}
	byMember := map[string]int{}
	changed := make(chan struct{}, 1)
	handle := func(member string) broker.DeliveryHandler {
		return func(ctx context.Context, d *broker.Delivery) {
			if d.Ack(ctx) != nil {
				return
			}
			mu.Lock()
			seen[d.Message.ID]++
			byMember[member]++
			mu.Unlock()
			select {
			case changed <- struct{}{}:
			default:
			}
		}
	}
	waitAll := func(recs []postbox.Record) {
		t.Helper()
		deadline := time.After(30 * time.Second)
		for {
			mu.Lock()
			n := 0
			for _, r := range recs {
				if seen[r.ID] > 0 {
					n++
				}
			}
			mu.Unlock()
			if n == len(recs) {
				return
			}
			select {
			case <-changed:
			case <-deadline:
				t.Fatalf("%d of %d messages handled", n, len(recs))
			}
		}
	}
	first := brokertest.Records(e.topic, 100, 16)
	e.publish(t, first)
	a := start(e.subscriber(t), handle("a"))
	waitAll(first)
	b := start(e.subscriber(t), handle("b"))
	// Publish until the second member has joined and handled something, and a while after.
	var second []postbox.Record
	deadline := time.After(30 * time.Second)
	for more := 10; more > 0; {
		recs := brokertest.Records(e.topic, 20, 16)
		e.publish(t, recs)
		second = append(second, recs...)
		mu.Lock()
		if byMember["b"] > 0 {
			more--
		}
		mu.Unlock()
		select {
		case <-time.After(20 * time.Millisecond):
		case <-deadline:
			t.Fatal("the second member handled no message within 30s; the group did not rebalance")
		}
	}
	waitAll(second)
	a.stop(t)
	b.stop(t)
	t.Logf("handled by member: %v", byMember)
	for id, n := range seen {
		if n != 1 {
			t.Errorf("message %s handled %d times", id, n)
		}
	}
}

// TestReceiveFailsWhenRefused: a consumer the cluster does not authorize for its group cannot go on, so Receive
// returns an error instead of retrying until its context ends.
func TestReceiveFailsWhenRefused(t *testing.T) {
	topic := brokertest.Topic()
	read := func(r kmsg.ACLResourceType, name string, op kmsg.ACLOperation) kfake.ACL {
		return kfake.ACL{Resource: r, Name: name, Pattern: kmsg.ACLResourcePatternTypeLiteral, Operation: op, Allow: true}
	}
	brokers := cluster(t, kfake.EnableSASL(), kfake.EnableACLs(), kfake.SeedTopics(1, topic),
		kfake.Superuser("PLAIN", "admin", "secret"),
		kfake.User("PLAIN", "bob", "pw", read(kmsg.ACLResourceTypeTopic, topic, kmsg.ACLOperationRead),
			read(kmsg.ACLResourceTypeTopic, topic, kmsg.ACLOperationDescribe))) // no access to any group
	sub, err := kafkabroker.NewSubscriber(&kafkabroker.SubscriberConfig{Brokers: brokers, Group: "not-bobs", Topics: []string{topic},
		Logger: quietLogger(), Options: []kgo.Opt{kgo.SASL(plain.Auth{User: "bob", Pass: "pw"}.AsMechanism())}})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	err = sub.Receive(ctx, func(context.Context, *broker.Delivery) {})
	if err == nil || ctx.Err() != nil || !errors.Is(err, kerr.GroupAuthorizationFailed) {
		t.Fatalf("Receive without access to its group = %v; want GROUP_AUTHORIZATION_FAILED before the context ends", err)
	}
}

func TestSubscriberConfigErrors(t *testing.T) {
	ok := kafkabroker.SubscriberConfig{Brokers: []string{"127.0.0.1:1"}, Group: "g", Topics: []string{"t"}}
	for name, change := range map[string]func(*kafkabroker.SubscriberConfig){
		"no brokers":            func(c *kafkabroker.SubscriberConfig) { c.Brokers = nil },
		"no group":              func(c *kafkabroker.SubscriberConfig) { c.Group = "" },
		"no topics":             func(c *kafkabroker.SubscriberConfig) { c.Topics = nil },
		"bad topic":             func(c *kafkabroker.SubscriberConfig) { c.Topics = []string{"a/b"} },
		"bad prefix":            func(c *kafkabroker.SubscriberConfig) { c.TopicPrefix = "a b." },
		"negative Concurrency":  func(c *kafkabroker.SubscriberConfig) { c.Concurrency = -1 },
		"negative Prefetch":     func(c *kafkabroker.SubscriberConfig) { c.Prefetch = -1 },
		"negative CommitInterv": func(c *kafkabroker.SubscriberConfig) { c.CommitInterval = -time.Second },
	} {
		c := ok
		change(&c)
		if _, err := kafkabroker.NewSubscriber(&c); !errors.Is(err, postbox.ErrInvalidConfig) {
			t.Errorf("NewSubscriber with %s = %v, want ErrInvalidConfig", name, err)
		}
	}

	// Options that contradict the subscriber's commit handling are refused by Receive.
	bad := ok
	bad.Options = []kgo.Opt{kgo.AutoCommitMarks()}
	sub, err := kafkabroker.NewSubscriber(&bad)
	if err != nil {
		t.Fatal(err)
	}
	if err := sub.Receive(context.Background(), func(context.Context, *broker.Delivery) {}); err == nil {
		t.Error("Receive with kgo.AutoCommitMarks succeeded")
	}
	if err := sub.Receive(context.Background(), nil); err == nil || !strings.Contains(err.Error(), "handler") {
		t.Errorf("Receive with a nil handler = %v", err)
	}
}

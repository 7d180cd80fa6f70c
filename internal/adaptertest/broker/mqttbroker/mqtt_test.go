package mqttbroker_test

import (
	"context"
	"errors"
	"net"
	"net/url"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/eclipse/paho.golang/autopaho"
	"github.com/eclipse/paho.golang/paho"
	"github.com/postbox-go/postbox"
	"github.com/postbox-go/postbox/broker"
	"github.com/postbox-go/postbox/broker/brokertest"
	mqttbroker "github.com/postbox-go/postbox/broker/mqttbroker"
	"github.com/postbox-go/postbox/internal/testenv/tcpproxy"
)

// raw connects a plain paho client (clean session, automatic acks) that calls onMsg for what it receives on
// filter, if set.
func raw(t *testing.T, filter string, onMsg func(*paho.Publish)) *autopaho.ConnectionManager {
	t.Helper()
	u, _ := url.Parse(serverURL)
	cfg := autopaho.ClientConfig{ServerUrls: []*url.URL{u}, KeepAlive: 30, CleanStartOnInitialConnection: true,
		ClientConfig: paho.ClientConfig{ClientID: clientPrefix + "raw-" + brokertest.Topic()}}
	if onMsg != nil {
		cfg.OnPublishReceived = []func(paho.PublishReceived) (bool, error){
			func(pr paho.PublishReceived) (bool, error) { onMsg(pr.Packet); return true, nil },
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cm, err := autopaho.NewConnection(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cm.Disconnect(context.Background()) })
	if err := cm.AwaitConnection(ctx); err != nil {
		t.Fatalf("connect to %s: %v", serverURL, err)
	}
	if filter != "" {
		if _, err := cm.Subscribe(ctx, &paho.Subscribe{Subscriptions: []paho.SubscribeOptions{{Topic: filter, QoS: 1}}}); err != nil {
			t.Fatal(err)
		}
	}
	return cm
}

// delivery is one handler call.
type delivery struct {
	msg     postbox.Message
	attempt int
}

// receiveUntil runs Receive, calling h for each delivery (nil: ack), until done says the deliveries so far are
// enough, and returns them.
func receiveUntil(t *testing.T, sub broker.Subscriber, h broker.DeliveryHandler, done func([]delivery) bool) []delivery {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var mu sync.Mutex
	var got []delivery
	err := sub.Receive(ctx, func(ctx context.Context, d *broker.Delivery) {
		mu.Lock()
		got = append(got, delivery{d.Message, d.Attempt})
		if done(got) {
			cancel()
		}
		mu.Unlock()
		if h != nil {
			h(ctx, d)
		} else {
			_ = d.Ack(ctx)
		}
	})
	if err != nil {
		t.Fatalf("Receive: %v", err)
	}
	mu.Lock()
	defer mu.Unlock()
	if !done(got) {
		t.Fatalf("Receive stopped after %d deliveries: %v", len(got), ids(got))
	}
	return got
}

func ids(got []delivery) []string {
	out := make([]string, len(got))
	for i, g := range got {
		out[i] = g.msg.ID
	}
	return out
}

func count(got []delivery, id string) int {
	n := 0
	for _, g := range got {
		if g.msg.ID == id {
			n++
		}
	}
	return n
}

func TestWireFormat(t *testing.T) {
	topic := "orders/" + brokertest.Topic()
	got := make(chan *paho.Publish, 1)
	raw(t, topic, func(p *paho.Publish) { got <- p })
	rec := brokertest.Records(topic, 2, 2)[1] // key "clé-ü-1", JSON payload
	if err := publisher(t, mqttbroker.PublisherConfig{Source: "/billing"}).Publish(context.Background(), []postbox.Record{rec}); err != nil {
		t.Fatal(err)
	}
	var p *paho.Publish
	select {
	case p = <-got:
	case <-time.After(30 * time.Second):
		t.Fatal("the message did not arrive")
	}
	if p.Topic != topic || p.QoS != 1 || p.Retain || string(p.Payload) != string(rec.Payload) {
		t.Errorf("topic %q, QoS %d, retain %v, payload %q", p.Topic, p.QoS, p.Retain, p.Payload)
	}
	if p.Properties.ContentType != "application/json" {
		t.Errorf("Content Type %q, want application/json", p.Properties.ContentType)
	}
	want := map[string]string{
		"specversion":  "1.0",
		"id":           rec.ID,
		"type":         rec.Type,
		"source":       "/billing",
		"time":         rec.CreatedAt.Format(time.RFC3339Nano),
		"subject":      rec.Key,
		"partitionkey": rec.Key,
		"traceparent":  rec.Headers["traceparent"],
		"X-Tenant":     "acme",
	}
	for k, v := range want {
		if got := p.Properties.User.Get(k); got != v {
			t.Errorf("user property %s = %q, want %q", k, got, v)
		}
	}
	if p.Properties.User.Get("content-type") != "" {
		t.Error("content-type travels as a user property as well as the Content Type property")
	}
}

func TestPublishRefusesWhatNoRetryFixes(t *testing.T) {
	topic := brokertest.Topic()
	raw(t, topic, nil) // a subscription, so that the good records are routable
	recs := brokertest.Records(topic, 7, 0)
	recs[1].Topic = topic + "/+"
	recs[2].Topic = "$SYS/" + topic
	recs[3].Topic = ""
	recs[4].Headers = map[string]string{"X-Bad": "\xff\xfe"}
	recs[5].Headers = map[string]string{"id": "forged"}
	brokertest.CheckRefused(t, publisher(t, mqttbroker.PublisherConfig{}).Publish(context.Background(), recs),
		[]string{"", "wildcards", "reserves", "empty", "UTF-8", "CloudEvents attribute", ""})
}

func TestNoSubscribers(t *testing.T) {
	recs := brokertest.Records(brokertest.Topic(), 2, 1) // one key
	err := publisher(t, mqttbroker.PublisherConfig{}).Publish(context.Background(), recs)
	var be *postbox.BatchError
	if !errors.As(err, &be) || len(be.Errs) != 2 {
		t.Fatalf("Publish with no subscription = %v, want a BatchError", err)
	}
	// The second record is held back, so that a retry publishes the two in order.
	for i, want := range []string{"no matching subscribers", "failed before it"} {
		if e := be.Errs[i]; e == nil || postbox.IsPermanent(e) || !strings.Contains(e.Error(), want) {
			t.Errorf("record %d: %v; want a retryable error mentioning %q", i, e, want)
		}
	}
	if err := publisher(t, mqttbroker.PublisherConfig{AllowNoSubscribers: true}).Publish(context.Background(), recs); err != nil {
		t.Errorf("Publish with AllowNoSubscribers = %v", err)
	}
}

func TestNackRedeliversThroughTheSession(t *testing.T) {
	topic := brokertest.Topic()
	sub := subscriber(t, mqttbroker.SubscriberConfig{ClientID: clientPrefix + topic, Topics: []string{topic}})
	recs := brokertest.Records(topic, 3, 1)
	if err := publisher(t, mqttbroker.PublisherConfig{}).Publish(context.Background(), recs); err != nil {
		t.Fatal(err)
	}
	first := recs[0].ID
	got := receiveUntil(t, sub, func(ctx context.Context, d *broker.Delivery) {
		if d.Message.ID == first && d.Attempt == 1 {
			_ = d.Nack(ctx, 0)
			return
		}
		_ = d.Ack(ctx)
	}, func(got []delivery) bool { return count(got, first) == 2 && count(got, recs[2].ID) >= 1 })
	if got[0].msg.ID != first || got[0].attempt != 1 {
		t.Fatalf("first delivery %s attempt %d, want %s attempt 1", got[0].msg.ID, got[0].attempt, first)
	}
	for _, g := range got[1:] {
		if g.msg.ID == first && g.attempt != 0 {
			t.Errorf("redelivered message has Attempt %d, want 0 (MQTT only flags a redelivery)", g.attempt)
		}
	}
}

func TestUnackedMessagesComeBackAfterRestart(t *testing.T) {
	topic := brokertest.Topic()
	sub := subscriber(t, mqttbroker.SubscriberConfig{ClientID: clientPrefix + topic, Topics: []string{topic}})
	pub := publisher(t, mqttbroker.PublisherConfig{})
	recs := brokertest.Records(topic, 2, 0)
	if err := pub.Publish(context.Background(), recs[:1]); err != nil {
		t.Fatal(err)
	}
	// The handler is still running when Receive stops; its delivery stays unacknowledged in the session.
	receiveUntil(t, sub, func(ctx context.Context, d *broker.Delivery) { <-ctx.Done() },
		func(got []delivery) bool { return len(got) == 1 })
	// Published while no Receive runs: the session keeps it.
	if err := pub.Publish(context.Background(), recs[1:]); err != nil {
		t.Fatal(err)
	}
	got := receiveUntil(t, sub, nil, func(got []delivery) bool { return count(got, recs[0].ID) == 1 && count(got, recs[1].ID) == 1 })
	for _, g := range got {
		if want := map[string]int{recs[0].ID: 0, recs[1].ID: 1}[g.msg.ID]; g.attempt != want {
			t.Errorf("message %s has Attempt %d, want %d (0: redelivered)", g.msg.ID, g.attempt, want)
		}
	}
}

func TestForeignMessagesAreDropped(t *testing.T) {
	topic := brokertest.Topic()
	// With a Receive Maximum of 1 the server sends nothing more until the message in flight is acknowledged.
	sub := subscriber(t, mqttbroker.SubscriberConfig{ClientID: clientPrefix + topic, Topics: []string{topic}, Prefetch: 1})
	cm := raw(t, "", nil)
	if _, err := cm.Publish(context.Background(), &paho.Publish{QoS: 1, Topic: topic, Payload: []byte("plain")}); err != nil {
		t.Fatal(err)
	}
	pub := publisher(t, mqttbroker.PublisherConfig{})
	recs := brokertest.Records(topic, 1, 1)
	if err := pub.Publish(context.Background(), recs); err != nil {
		t.Fatal(err)
	}
	// The Postbox message arrives only once the foreign one before it was acknowledged.
	got := receiveUntil(t, sub, nil, func(got []delivery) bool { return len(got) == 1 })
	if got[0].msg.ID != recs[0].ID {
		t.Fatalf("handler got %v, want only the Postbox message", ids(got))
	}
}

func TestGroups(t *testing.T) {
	topic := brokertest.Topic()
	recs := brokertest.Records(topic, 20, 0)
	shared := []*mqttbroker.Subscriber{
		subscriber(t, mqttbroker.SubscriberConfig{ClientID: clientPrefix + topic + "-s1", Group: "g", Topics: []string{topic}}),
		subscriber(t, mqttbroker.SubscriberConfig{ClientID: clientPrefix + topic + "-s2", Group: "g", Topics: []string{topic}}),
	}
	fanout := subscriber(t, mqttbroker.SubscriberConfig{ClientID: clientPrefix + topic + "-f", Topics: []string{topic}})
	if err := publisher(t, mqttbroker.PublisherConfig{}).Publish(context.Background(), recs); err != nil {
		t.Fatal(err)
	}

	// The group splits the messages: each goes to one member.
	var mu sync.Mutex
	seen := map[string]int{}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var wg sync.WaitGroup
	for _, sub := range shared {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := sub.Receive(ctx, func(ctx context.Context, d *broker.Delivery) {
				_ = d.Ack(ctx)
				mu.Lock()
				defer mu.Unlock()
				seen[d.Message.ID]++
				if len(seen) == len(recs) {
					cancel()
				}
			}); err != nil {
				t.Errorf("Receive: %v", err)
			}
		}()
	}
	wg.Wait()
	for _, r := range recs {
		if seen[r.ID] != 1 {
			t.Errorf("message %s went to %d members of the group, want 1", r.ID, seen[r.ID])
		}
	}

	// A subscriber outside the group gets every message.
	got := receiveUntil(t, fanout, nil, func(got []delivery) bool { return len(got) == len(recs) })
	for _, r := range recs {
		if count(got, r.ID) != 1 {
			t.Fatalf("subscriber without a group got %v; want every message once", ids(got))
		}
	}
}

func TestDeleteSession(t *testing.T) {
	topic := brokertest.Topic()
	cfg := mqttbroker.SubscriberConfig{ConnConfig: conn(), ClientID: clientPrefix + topic, Topics: []string{topic}}
	sub, err := mqttbroker.NewSubscriber(&cfg)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if err := sub.EnsureSession(ctx); err != nil {
		t.Fatal(err)
	}
	pub := publisher(t, mqttbroker.PublisherConfig{})
	if err := pub.Publish(ctx, brokertest.Records(topic, 1, 0)); err != nil {
		t.Fatalf("Publish to a topic with a session subscribed: %v", err)
	}
	if err := sub.DeleteSession(ctx); err != nil {
		t.Fatal(err)
	}
	if err := pub.Publish(ctx, brokertest.Records(topic, 1, 0)); err == nil || !strings.Contains(err.Error(), "no matching subscribers") {
		t.Fatalf("Publish after the only session was deleted = %v; want no matching subscribers", err)
	}
}

func TestSubscriberRecovers(t *testing.T) {
	topic := brokertest.Topic()
	px := tcpproxy.Start(t, "127.0.0.1:1883")
	sub := subscriber(t, mqttbroker.SubscriberConfig{ClientID: clientPrefix + topic, Topics: []string{topic},
		ConnConfig: mqttbroker.ConnConfig{URL: "mqtt://" + px.Addr(), MinReconnectDelay: 10 * time.Millisecond}})
	pub := publisher(t, mqttbroker.PublisherConfig{})
	recs := brokertest.Records(topic, 2, 0)
	if err := pub.Publish(context.Background(), recs[:1]); err != nil {
		t.Fatal(err)
	}
	holding, cut := make(chan struct{}), make(chan struct{})
	got := receiveUntil(t, sub, func(ctx context.Context, d *broker.Delivery) {
		if d.Message.ID == recs[0].ID && d.Attempt == 1 {
			close(holding)
			<-cut
			_ = d.Ack(ctx) // lost with its connection, or sent too late: the message comes again
			return
		}
		_ = d.Ack(ctx)
	}, func(got []delivery) bool {
		if len(got) == 1 {
			go func() {
				<-holding
				px.Cut()
				close(cut)
				if err := pub.Publish(context.Background(), recs[1:]); err != nil {
					t.Errorf("Publish: %v", err)
				}
			}()
		}
		return count(got, recs[0].ID) == 2 && count(got, recs[1].ID) == 1
	})
	if !slices.Contains(ids(got), recs[1].ID) {
		t.Errorf("deliveries %v", ids(got))
	}
}

func TestConfigErrors(t *testing.T) {
	for name, cfg := range map[string]*mqttbroker.PublisherConfig{
		"nil":       nil,
		"no URL":    {},
		"scheme":    {ConnConfig: mqttbroker.ConnConfig{URL: "http://localhost"}},
		"keepalive": {ConnConfig: mqttbroker.ConnConfig{URL: serverURL, KeepAlive: 70000 * time.Second}},
		"negative":  {ConnConfig: mqttbroker.ConnConfig{URL: serverURL, ConnectTimeout: -1}},
	} {
		if _, err := mqttbroker.NewPublisher(cfg); !errors.Is(err, postbox.ErrInvalidConfig) {
			t.Errorf("NewPublisher with %s: %v", name, err)
		}
	}
	ok := mqttbroker.SubscriberConfig{ConnConfig: conn(), ClientID: "c", Topics: []string{"t"}}
	for name, change := range map[string]func(*mqttbroker.SubscriberConfig){
		"no client ID": func(c *mqttbroker.SubscriberConfig) { c.ClientID = "" },
		"no topics":    func(c *mqttbroker.SubscriberConfig) { c.Topics = nil },
		"bad filter":   func(c *mqttbroker.SubscriberConfig) { c.Topics = []string{"a/#/b"} },
		"bad plus":     func(c *mqttbroker.SubscriberConfig) { c.Topics = []string{"a+"} },
		"bad group":    func(c *mqttbroker.SubscriberConfig) { c.Group = "a/b" },
		"prefetch":     func(c *mqttbroker.SubscriberConfig) { c.Prefetch = 70000 },
		"concurrency":  func(c *mqttbroker.SubscriberConfig) { c.Concurrency = -1 },
	} {
		c := ok
		change(&c)
		if _, err := mqttbroker.NewSubscriber(&c); !errors.Is(err, postbox.ErrInvalidConfig) {
			t.Errorf("NewSubscriber with %s: %v", name, err)
		}
	}
	if _, err := mqttbroker.NewSubscriber(nil); !errors.Is(err, postbox.ErrInvalidConfig) {
		t.Errorf("NewSubscriber(nil): %v", err)
	}
	for _, f := range []string{"a", "a/+/b", "#", "a/#", "+"} {
		c := ok
		c.Topics = []string{f}
		if _, err := mqttbroker.NewSubscriber(&c); err != nil {
			t.Errorf("NewSubscriber with filter %q: %v", f, err)
		}
	}
	if got := mqttbroker.SharedFilter("g", "orders/#"); got != "$share/g/orders/#" {
		t.Errorf("SharedFilter = %q", got)
	}
}

// TestPublisherRetriesARefusedConnectionAtItsMinimumDelay: while nothing listens on the server's port (a server
// restarting), the publisher's connection manager tries again every MinReconnectDelay instead of doubling its
// wait up to MaxReconnectDelay, so that it finds the server soon after it listens again.
func TestPublisherRetriesARefusedConnectionAtItsMinimumDelay(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	_ = ln.Close() // nothing listens there now: connections are refused
	pub, err := mqttbroker.NewPublisher(&mqttbroker.PublisherConfig{ClientID: clientPrefix + brokertest.Topic(),
		ConnConfig: mqttbroker.ConnConfig{URL: "mqtt://" + addr, MinReconnectDelay: 20 * time.Millisecond, MaxReconnectDelay: time.Minute}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = pub.Close() })
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	start := time.Now()
	const attempts = 12
	for range attempts { // each Ping returns when the next attempt fails
		if err := pub.Ping(ctx); !errors.Is(err, syscall.ECONNREFUSED) {
			t.Fatalf("Ping with nothing listening: %v; want a refused connection", err)
		}
	}
	if took := time.Since(start); took > 5*time.Second {
		t.Errorf("%d refused attempts took %v; want the wait to stay at MinReconnectDelay (20ms) while connections are refused", attempts, took)
	}
}

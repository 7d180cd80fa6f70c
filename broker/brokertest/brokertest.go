// Package brokertest is the conformance suite every Postbox broker adapter passes, against a real broker (or the
// broker's own in-process fake where no server can run). An adapter's test file is a few lines:
//
//	func TestConformance(t *testing.T) {
//		brokertest.Exercise(t, brokertest.Features{PerKeyOrder: true, Dedup: true},
//			func(t *testing.T, topic string) (postbox.Publisher, broker.Subscriber) {
//				// make a stream/queue/group for topic, register cleanups on t
//				return pub, sub
//			})
//	}
//
// Every test uses topics of its own (random names starting with "pbt"), so several packages can share one
// broker.
package brokertest

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"strings"
	"testing"
	"time"

	"github.com/postbox-go/postbox"
	"github.com/postbox-go/postbox/broker"
)

// Constructor returns a publisher and a subscriber for topic on the broker under test. Unless Features.NoBacklog
// is set, the subscriber must receive every message published to topic after Constructor returns, even before
// Receive is first called (make the durable consumer, queue binding or group now). Subscribers made for the same topic share one consumer
// group: they compete for messages, and a message one of them leaves unacked goes to another. Constructor may be
// called several times per test; it registers its cleanups on t.
type Constructor func(t *testing.T, topic string) (postbox.Publisher, broker.Subscriber)

// Features says what the broker under test promises. The suite tests every promise and nothing more.
type Features struct {
	// PerKeyOrder: messages with the same key, published in one or several batches, are delivered in publish
	// order (when none is nacked).
	PerKeyOrder bool
	// NoBacklog: the subscriber receives only while Receive runs, and publishing fails otherwise (webhooks: the
	// receiver is the broker). The suite then skips the test that publishes before receiving.
	NoBacklog bool
	// Redelivery: a nacked message is delivered again, and a message a stopped subscriber never settled is
	// delivered to another subscriber of its group. Implies NackRedelivery.
	Redelivery bool
	// NackRedelivery: a nacked message is delivered again. Set it without Redelivery for a broker that keeps a
	// stopped subscriber's unsettled messages for that subscriber's return instead of handing them to another
	// member of the group (MQTT sessions).
	NackRedelivery bool
	// Dedup: publishing a message ID again within the broker's dedup window does not deliver it twice. The test
	// relies on PerKeyOrder to know that no duplicate is still on its way.
	Dedup bool
	// Unroutable: publishing to a topic Constructor was never called for fails that message (its entry in a
	// *postbox.BatchError), not the rest of the batch.
	Unroutable bool
	// CaseInsensitiveHeaders: the transport does not keep the case of header names (HTTP). The suite then
	// compares header names in lower case.
	CaseInsensitiveHeaders bool
	// AckTimeout: a message held unsettled by a hung handler is delivered again (to any subscriber of the group)
	// once the broker's ack timeout passes, and an acked message is not. The Constructor should configure a
	// short ack timeout (a second or two) and give it in AckWait.
	AckTimeout bool
	// AckWait is the ack timeout the Constructor configures; required with AckTimeout.
	AckWait time.Duration
	// Attempts: Delivery.Attempt counts deliveries (1, then 2 after a redelivery) instead of being 0.
	Attempts bool
	// Unreachable, if set, returns a publisher configured for a broker address where nothing listens. The suite
	// checks that Publish fails with a retryable error within Timeout.
	Unreachable func(t *testing.T) postbox.Publisher
	// ErrClosed: the publisher has a Close method, after which Publish fails with an error wrapping ErrClosed
	// (retryable), and Close may be called twice. The suite closes a publisher the Constructor returned after
	// every other test, so a Constructor may return one shared publisher.
	ErrClosed error
	// Reconnect, if set, returns a publisher for topic whose connection goes through a network path the test
	// can cut, and the function that cuts it (a TCP proxy from internal/testenv/tcpproxy, for one). The suite
	// checks that the publisher reconnects on its own: after the cut, Publish fails retryably at most until
	// then, and every message it confirmed is delivered.
	Reconnect func(t *testing.T, topic string) (pub postbox.Publisher, cut func())
	// Messages is how many messages the bulk tests publish. Default 200.
	Messages int
	// Timeout bounds each wait for deliveries; hitting it fails the test with what is missing. It guards against
	// hangs and is not a performance assertion. Default 30s.
	Timeout time.Duration
}

func (f Features) withDefaults() Features {
	if f.Messages <= 0 {
		f.Messages = 200
	}
	if f.Timeout <= 0 {
		f.Timeout = 30 * time.Second
	}
	f.NackRedelivery = f.NackRedelivery || f.Redelivery
	return f
}

// Exercise runs the conformance tests the features call for.
func Exercise(t *testing.T, f Features, newPubSub Constructor) {
	f = f.withDefaults()
	s := &suite{f: f, new: newPubSub}
	t.Run("PublishReceive", s.testPublishReceive)
	t.Run("ConcurrentPublish", s.testConcurrentPublish)
	if !f.NoBacklog {
		t.Run("Backlog", s.testBacklog)
	}
	t.Run("EmptyBatch", s.testEmptyBatch)
	t.Run("CancelledPublish", s.testCancelledPublish)
	t.Run("ReceiveStops", s.testReceiveStops)
	t.Run("NackThenAck", s.testNackThenAck)
	t.Run("ReceiveOnce", s.testReceiveOnce)
	t.Run("Ping", s.testPing)
	if f.Reconnect != nil {
		t.Run("Reconnect", s.testReconnect)
	}
	if f.PerKeyOrder {
		t.Run("PerKeyOrder", s.testPerKeyOrder)
	}
	if f.NackRedelivery {
		t.Run("RedeliverNacked", s.testRedeliverNacked)
	}
	if f.Redelivery {
		t.Run("RedeliverUnsettled", s.testRedeliverUnsettled)
	}
	if f.AckTimeout {
		if f.AckWait <= 0 {
			t.Fatal("brokertest: Features.AckTimeout needs Features.AckWait, the ack timeout the Constructor configures")
		}
		t.Run("AckTimeout", s.testAckTimeout)
		t.Run("AckIsFinal", s.testAckIsFinal)
	}
	if f.Dedup {
		t.Run("Dedup", s.testDedup)
	}
	if f.Unroutable {
		t.Run("Unroutable", s.testUnroutable)
	}
	if f.Unreachable != nil {
		t.Run("Unreachable", s.testUnreachable)
	}
	if f.ErrClosed != nil {
		t.Run("Close", s.testClose) // last: a Constructor may hand the same publisher to every test
	}
}

type suite struct {
	f   Features
	new Constructor
}

// Topic returns a topic name no other test uses: "pbt" and 16 hex digits, valid on every supported broker.
func Topic() string {
	b := make([]byte, 8)
	_, _ = rand.Read(b)
	return "pbt" + hex.EncodeToString(b)
}

func (s *suite) headerName(n string) string {
	if s.f.CaseInsensitiveHeaders {
		return strings.ToLower(n)
	}
	return n
}

func ctxTimeout(t *testing.T, d time.Duration) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	t.Cleanup(cancel)
	return ctx
}

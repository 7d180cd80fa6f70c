package sqsbroker_test

import (
	"testing"
	"time"

	"github.com/postbox-go/postbox"
	"github.com/postbox-go/postbox/broker/brokertest"
	"github.com/postbox-go/postbox/broker/sqsbroker"
)

// unreachable returns a publisher whose client talks to a port where nothing listens.
func unreachable(t *testing.T) postbox.Publisher {
	pub, err := sqsbroker.NewPublisher(client("http://127.0.0.1:1"), &sqsbroker.PublisherConfig{QueueURL: "http://127.0.0.1:1/000000000000/none"})
	if err != nil {
		t.Fatal(err)
	}
	return pub
}

// TestConformance runs the suite against fauxqs, on standard queues and on FIFO queues (which add per-key order
// and dedup by message ID).
func TestConformance(t *testing.T) {
	c := server(t)
	f := brokertest.Features{Redelivery: true, Attempts: true, Unroutable: true, Unreachable: unreachable, ErrClosed: sqsbroker.ErrClosed}
	t.Run("Standard", func(t *testing.T) {
		brokertest.Exercise(t, f, (&harness{c: c, queues: map[string]string{}}).new)
	})
	t.Run("FIFO", func(t *testing.T) {
		f := f
		f.PerKeyOrder, f.Dedup = true, true
		brokertest.Exercise(t, f, (&harness{c: c, suffix: ".fifo", queues: map[string]string{}}).new)
	})
	t.Run("AckTimeout", func(t *testing.T) {
		f := brokertest.Features{AckTimeout: true, AckWait: 2 * time.Second}
		brokertest.Exercise(t, f, (&harness{c: c, queues: map[string]string{}, subCfg: sqsbroker.SubscriberConfig{VisibilityTimeout: 2 * time.Second}}).new)
	})
}

package sqsbroker_test

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"sync"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/postbox-go/postbox"
	"github.com/postbox-go/postbox/broker"
	"github.com/postbox-go/postbox/broker/sqsbroker"
	"github.com/postbox-go/postbox/internal/testenv"
	"go.uber.org/goleak"
)

// emulator is the fauxqs process every test of the package uses, started by TestMain; startErr says why it is
// missing (the tests that need it then fail under CI=true and skip otherwise).
var (
	emulator *testenv.Fauxqs
	startErr error
)

func TestMain(m *testing.M) {
	emulator, startErr = testenv.StartFauxqs()
	code := m.Run()
	if emulator != nil {
		emulator.Stop()
	}
	if code == 0 {
		// The SDK's HTTP client keeps idle connections to the emulator, each with its read and write loops.
		if err := goleak.Find(goleak.IgnoreTopFunction("net/http.(*persistConn).readLoop"),
			goleak.IgnoreTopFunction("net/http.(*persistConn).writeLoop")); err != nil {
			fmt.Fprintln(os.Stderr, "goleak:", err)
			code = 1
		}
	}
	os.Exit(code)
}

func quietLogger() *slog.Logger { return slog.New(slog.DiscardHandler) }

// client returns an SQS client for endpoint, with static credentials (fauxqs checks none).
func client(endpoint string) *sqs.Client {
	return sqs.New(sqs.Options{
		Region:       "us-east-1",
		BaseEndpoint: aws.String(endpoint),
		Credentials: aws.CredentialsProviderFunc(func(context.Context) (aws.Credentials, error) {
			return aws.Credentials{AccessKeyID: "test", SecretAccessKey: "test", Source: "test"}, nil
		}),
	})
}

// server returns a client for the package's fauxqs, failing or skipping the test when it did not start.
func server(t *testing.T) *sqs.Client {
	t.Helper()
	testenv.NeedFauxqs(t, startErr)
	return client(emulator.Endpoint)
}

func ensureQueue(t *testing.T, c *sqs.Client, name string, attrs map[string]string) string {
	t.Helper()
	url, err := sqsbroker.EnsureQueue(context.Background(), c, name, attrs)
	if err != nil {
		t.Fatal(err)
	}
	return url
}

// harness makes a queue per topic (FIFO with suffix ".fifo") and a subscriber per call, all sharing one
// publisher.
type harness struct {
	c       *sqs.Client
	suffix  string
	visible string // the queues' VisibilityTimeout in seconds; "" for SQS's 30
	subCfg  sqsbroker.SubscriberConfig

	mu     sync.Mutex
	pub    *sqsbroker.Publisher
	queues map[string]string
}

func (h *harness) new(t *testing.T, topic string) (postbox.Publisher, broker.Subscriber) {
	t.Helper()
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.pub == nil {
		pub, err := sqsbroker.NewPublisher(h.c, &sqsbroker.PublisherConfig{QueueSuffix: h.suffix, Source: "/conformance", Logger: quietLogger()})
		if err != nil {
			t.Fatal(err)
		}
		h.pub = pub
		t.Cleanup(func() { h.mu.Lock(); h.pub = nil; h.mu.Unlock() })
	}
	url, ok := h.queues[topic]
	if !ok {
		var attrs map[string]string
		if h.visible != "" {
			attrs = map[string]string{"VisibilityTimeout": h.visible}
		}
		url = ensureQueue(t, h.c, topic+h.suffix, attrs)
		h.queues[topic] = url
	}
	cfg := h.subCfg
	cfg.QueueURL, cfg.Topic, cfg.Logger = url, topic, quietLogger()
	if cfg.WaitTime == 0 {
		cfg.WaitTime = 2e9
	}
	sub, err := sqsbroker.NewSubscriber(h.c, &cfg)
	if err != nil {
		t.Fatal(err)
	}
	return h.pub, sub
}

package chaos

import (
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"github.com/postbox-go/postbox"
	"github.com/postbox-go/postbox/broker/sqsbroker"
	"github.com/postbox-go/postbox/internal/testenv"
)

// brokerSQS: a fauxqs (SQS emulator) process of the scenario's own, with a FIFO queue; roleConfig.URL is its
// endpoint and roleConfig.Stream the queue's URL.
const brokerSQS = "sqs"

// sqsClient returns an SQS client for the emulator at endpoint (it checks no credentials), and the function that
// closes its idle connections, so that no connection goroutine outlives the scenario.
func sqsClient(endpoint string) (*sqs.Client, func()) {
	tr := http.DefaultTransport.(*http.Transport).Clone()
	return sqs.New(sqs.Options{Region: "us-east-1", BaseEndpoint: aws.String(endpoint), HTTPClient: &http.Client{Transport: tr},
		Credentials: aws.CredentialsProviderFunc(func(context.Context) (aws.Credentials, error) {
			return aws.Credentials{AccessKeyID: "chaos", SecretAccessKey: "chaos", Source: "chaos"}, nil
		})}), tr.CloseIdleConnections
}

func sqsPublisher(cfg roleConfig, log *slog.Logger) (postbox.Publisher, func(), error) {
	c, closeIdle := sqsClient(cfg.URL)
	pub, err := sqsbroker.NewPublisher(c, &sqsbroker.PublisherConfig{QueueURL: cfg.Stream, Logger: log})
	if err != nil {
		return nil, nil, err
	}
	return pub, func() { _ = pub.Close(); closeIdle() }, nil
}

func sqsReceiver(cfg roleConfig, log *slog.Logger) (receiveFunc, func(), error) {
	c, closeIdle := sqsClient(cfg.URL)
	sub, err := sqsbroker.NewSubscriber(c, &sqsbroker.SubscriberConfig{QueueURL: cfg.Stream, Topic: cfg.Topic,
		WaitTime: time.Second, ErrorBackoff: 100 * time.Millisecond, Logger: log})
	if err != nil {
		return nil, nil, err
	}
	return sub.Receive, closeIdle, nil
}

// setupSQS starts the scenario's fauxqs and creates its FIFO queue, whose visibility timeout is the ack wait.
func (w *world) setupSQS(ctx context.Context, opt worldOptions) error {
	srv, err := testenv.StartFauxqs()
	testenv.NeedFauxqs(w.t, err)
	w.t.Cleanup(srv.Stop)
	var closeIdle func()
	w.sqs, closeIdle = sqsClient(srv.Endpoint)
	w.t.Cleanup(closeIdle)
	url, err := sqsbroker.EnsureQueue(ctx, w.sqs, w.role.Prefix+".fifo",
		map[string]string{"VisibilityTimeout": strconv.Itoa(int(opt.ackWait / time.Second))})
	if err != nil {
		return err
	}
	w.role.Broker, w.role.URL, w.role.Stream = brokerSQS, srv.Endpoint, url
	return nil
}

// sqsState reports how many messages the queue holds, visible and in flight.
func (w *world) sqsState(ctx context.Context) (string, bool, error) {
	out, err := w.sqs.GetQueueAttributes(ctx, &sqs.GetQueueAttributesInput{QueueUrl: aws.String(w.role.Stream),
		AttributeNames: []types.QueueAttributeName{types.QueueAttributeNameApproximateNumberOfMessages,
			types.QueueAttributeNameApproximateNumberOfMessagesNotVisible}})
	if err != nil {
		return "", false, fmt.Errorf("queue attributes: %w", err)
	}
	visible := out.Attributes[string(types.QueueAttributeNameApproximateNumberOfMessages)]
	inFlight := out.Attributes[string(types.QueueAttributeNameApproximateNumberOfMessagesNotVisible)]
	return fmt.Sprintf("queue: %s visible, %s in flight", visible, inFlight), visible == "0" && inFlight == "0", nil
}

// TestRelayKilledSQSFIFO: ordered relays publish to an SQS FIFO queue (fauxqs), key = MessageGroupId and message
// ID = MessageDeduplicationId, and are killed with SIGKILL, half of them right after a batch the queue
// acknowledged, while producers commit and a consumer processes through the inbox. Nothing is lost, no effect
// happens twice, each key's messages take effect in enqueue order, and the batches a killed relay published but
// did not settle, published again, are dropped by the queue's dedup: the consumer's inbox sees no duplicate.
func TestRelayKilledSQSFIFO(t *testing.T) {
	events, minKills := size(2000, 20000), size(6, 20)
	over := size(6*time.Second, 40*time.Second)
	ctx, cancel := context.WithTimeout(context.Background(), deadline())
	defer cancel()
	// No consumer dies here, so a long visibility timeout costs nothing, and keeps a loaded machine from handing a
	// slow message to the consumer again, which would look like a duplicate the queue let through.
	w := newWorld(t, "sqsfifokill", worldOptions{broker: brokerSQS, ordered: true, ackWait: 30 * time.Second})
	w.goConsumer(w.consumerConfig())
	w.produce(ctx, events, over)

	var kills, spawned atomic.Int64
	w.killers(ctx, &kills, minKills, func() bool {
		acked := make(chan struct{}, 1)
		c, err := w.spawn(w.relayConfig(), func(string) {
			select {
			case acked <- struct{}{}:
			default:
			}
		})
		if err != nil {
			t.Error(err)
			return false
		}
		life := time.NewTimer(randDuration(100*time.Millisecond, time.Second))
		if spawned.Add(1)%2 == 0 {
			select {
			case <-life.C:
			case <-ctx.Done():
			}
		} else {
			select {
			case <-acked:
			case <-life.C:
			case <-ctx.Done():
			}
		}
		life.Stop()
		if c.exited() {
			t.Errorf("a relay process exited on its own before it was killed")
			return false
		}
		c.kill()
		if c.killed {
			kills.Add(1)
		}
		return true
	})
	w.mustSpawn(w.relayConfig())
	w.settle(ctx)
	outOfOrder, err := w.ledger.OutOfOrder(ctx, w.pool)
	if err != nil {
		t.Fatal(err)
	}
	fmt.Printf("%s: per-key order at the consumer: %d effects out of order\n", t.Name(), outOfOrder)
	if outOfOrder != 0 {
		t.Errorf("%d effects came after an effect of a later message of their key", outOfOrder)
	}
	k := kills.Load()
	w.verdict(ctx, expect{events: events, dupBound: k * int64(w.role.BatchSize),
		bound: fmt.Sprintf("one batch of %d per kill, before the queue's dedup", w.role.BatchSize),
		fault: fmt.Sprintf("ordered mode on an SQS FIFO queue; %d relay processes killed with SIGKILL", k),
		felt: func(s *roleStats) string {
			// What a killed relay published again (duplicates_published) the queue dropped by MessageDeduplicationId:
			// the consumer's inbox never saw a second copy.
			if n := s.outcomes[postbox.Duplicate].Load(); n != 0 {
				return fmt.Sprintf("the consumer's inbox dropped %d duplicates; want 0, the queue dropping the republished copies", n)
			}
			return ""
		}})
	if k < int64(minKills) {
		t.Errorf("%d kills, want at least %d", k, minKills)
	}
}

package chaos

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/postbox-go/postbox"
	"github.com/postbox-go/postbox/broker"
	amqpbroker "github.com/postbox-go/postbox/broker/amqpbroker"
	natsbroker "github.com/postbox-go/postbox/broker/natsbroker"
)

// The brokers a scenario can run on.
const (
	brokerNATS = "nats" // a nats-server of the scenario's own
	brokerAMQP = "amqp" // the shared RabbitMQ or a node of the scenario's own, with a queue of the scenario's own
	brokerNone = "none" // a server the scenario starts and its daemons publish to; no in-process role uses it
)

// rabbitURL is the shared RabbitMQ: POSTBOX_TEST_RABBITMQ or the local default.
func rabbitURL() string {
	if u := os.Getenv("POSTBOX_TEST_RABBITMQ"); u != "" {
		return u
	}
	return "amqp://guest:guest@127.0.0.1:5672/"
}

// connectNATS connects for good: it retries the first connection and every later one, so that a broker that is
// down or unreachable delays a role and never ends it. Stale connections (a stalled path) are noticed within a
// few seconds by pings. Asynchronous errors go to log.
func connectNATS(url, name string, log *slog.Logger) (*nats.Conn, error) {
	return nats.Connect(url, nats.Name(name), nats.MaxReconnects(-1), nats.ReconnectWait(100*time.Millisecond),
		nats.RetryOnFailedConnect(true), nats.PingInterval(time.Second), nats.MaxPingsOutstanding(2),
		nats.Timeout(2*time.Second), nats.ErrorHandler(func(_ *nats.Conn, sub *nats.Subscription, err error) {
			subject := ""
			if sub != nil {
				subject = sub.Subject
			}
			log.Warn("nats connection error", "conn", name, "subject", subject, "err", err)
		}))
}

// amqpConn says how the RabbitMQ adapter reaches the broker: reconnecting quickly, so that an outage of a few
// seconds costs seconds, not the default backoff's minute.
func amqpConn(cfg roleConfig) amqpbroker.ConnConfig {
	return amqpbroker.ConnConfig{URL: cfg.URL, MinReconnectDelay: 100 * time.Millisecond, MaxReconnectDelay: time.Second,
		AMQP: amqp.Config{Heartbeat: 2 * time.Second}}
}

// publisher returns the publisher for cfg's broker and a function that closes it.
func publisher(cfg roleConfig, log *slog.Logger) (postbox.Publisher, func(), error) {
	switch cfg.Broker {
	case brokerAMQP:
		pub, err := amqpbroker.NewPublisher(&amqpbroker.PublisherConfig{ConnConfig: amqpConn(cfg), Logger: log})
		if err != nil {
			return nil, nil, err
		}
		return pub, func() { _ = pub.Close() }, nil
	default:
		nc, err := connectNATS(cfg.URL, "chaos-relay", log)
		if err != nil {
			return nil, nil, err
		}
		js, err := jetstream.New(nc, jetstream.WithPublishAsyncTimeout(5*time.Second))
		if err != nil {
			nc.Close()
			return nil, nil, err
		}
		pub, err := natsbroker.NewPublisher(js, nil)
		if err != nil {
			nc.Close()
			return nil, nil, err
		}
		return pub, nc.Close, nil
	}
}

// receiver returns a function that runs one Receive on cfg's broker, and a function that closes its connection.
func receiver(cfg roleConfig, log *slog.Logger) (receiveFunc, func(), error) {
	switch cfg.Broker {
	case brokerAMQP:
		sub, err := amqpbroker.NewSubscriber(&amqpbroker.SubscriberConfig{ConnConfig: amqpConn(cfg), Queue: cfg.Consumer,
			Concurrency: 8, Prefetch: 32, Logger: log})
		if err != nil {
			return nil, nil, err
		}
		return sub.Receive, func() {}, nil
	default:
		nc, err := connectNATS(cfg.URL, "chaos-consumer", log)
		if err != nil {
			return nil, nil, err
		}
		js, err := jetstream.New(nc)
		if err != nil {
			nc.Close()
			return nil, nil, err
		}
		receive := func(ctx context.Context, handle broker.DeliveryHandler) error {
			lctx, cancel := context.WithTimeout(ctx, 5*time.Second)
			defer cancel()
			cons, err := js.Consumer(lctx, cfg.Stream, cfg.Consumer)
			if err != nil {
				return fmt.Errorf("look up consumer: %w", err)
			}
			sub, err := natsbroker.NewSubscriber(cons, &natsbroker.SubscriberConfig{Concurrency: 8, Prefetch: 32,
				PullExpiry: 5 * time.Second, Logger: log})
			if err != nil {
				return err
			}
			return sub.Receive(ctx, handle)
		}
		return receive, nc.Close, nil
	}
}

// receiveFunc is a broker.Subscriber made of its Receive method.
type receiveFunc func(ctx context.Context, handle broker.DeliveryHandler) error

func (f receiveFunc) Receive(ctx context.Context, handle broker.DeliveryHandler) error {
	return f(ctx, handle)
}

// setupNATS starts the scenario's nats-server and creates its stream and durable consumer.
func (w *world) setupNATS(ctx context.Context, opt worldOptions) error {
	var err error
	if w.nats, err = StartNATS(ctx, w.t.TempDir(), w.nlogs); err != nil {
		return err
	}
	w.t.Cleanup(w.nats.Close)
	w.role.Broker, w.role.URL = brokerNATS, w.nats.URL()
	nc, err := connectNATS(w.nats.URL(), "chaos-admin", w.log)
	if err != nil {
		return err
	}
	w.t.Cleanup(nc.Close)
	if w.js, err = jetstream.New(nc); err != nil {
		return err
	}
	if _, err := natsbroker.EnsureStream(ctx, w.js, jetstream.StreamConfig{Name: w.role.Stream, Subjects: []string{w.topic},
		Storage: jetstream.FileStorage}); err != nil {
		return err
	}
	_, err = natsbroker.EnsureConsumer(ctx, w.js, w.role.Stream, jetstream.ConsumerConfig{Durable: w.role.Consumer,
		AckPolicy: jetstream.AckExplicitPolicy, AckWait: opt.ackWait, MaxAckPending: 2000})
	return err
}

// setupAMQP binds a durable queue of the scenario's own to its topic on opt.amqpURL (default: the shared
// RabbitMQ), emptied first and deleted when the test ends.
func (w *world) setupAMQP(ctx context.Context, opt worldOptions) error {
	if opt.amqpURL == "" {
		opt.amqpURL = rabbitURL()
	}
	w.role.Broker, w.role.URL = brokerAMQP, opt.amqpURL
	w.amqp.url = opt.amqpURL
	w.t.Cleanup(w.amqp.close)
	ch, err := w.amqp.channel()
	if err != nil {
		return fmt.Errorf("RabbitMQ is not reachable at %s (start it with `make services`, or set POSTBOX_TEST_RABBITMQ): %w", opt.amqpURL, err)
	}
	if _, err := ch.QueueDelete(w.role.Consumer, false, false, false); err != nil {
		return err
	}
	w.t.Cleanup(func() {
		if ch, err := w.amqp.channel(); err == nil {
			_, _ = ch.QueueDelete(w.role.Consumer, false, false, false)
		}
	})
	return amqpbroker.EnsureTopology(ctx, w.amqp.conn, amqpbroker.Topology{Queue: w.role.Consumer, Topics: []string{w.topic}})
}

// amqpReady returns how many messages the scenario's queue holds ready for its consumers.
func (w *world) amqpReady() (int, error) {
	ch, err := w.amqp.channel()
	if err != nil {
		return 0, fmt.Errorf("RabbitMQ: %w", err)
	}
	q, err := ch.QueueDeclarePassive(w.role.Consumer, true, false, false, false, nil)
	if err != nil {
		return 0, fmt.Errorf("queue: %w", err)
	}
	return q.Messages, nil
}

// amqpAdmin is the scenario's own connection to RabbitMQ, for setting up and watching its queue. A scenario that
// restarts RabbitMQ breaks it; channel connects again.
type amqpAdmin struct {
	url  string
	conn *amqp.Connection
	ch   *amqp.Channel
}

// channel returns the admin channel, connecting first when there is none or the last one was closed.
func (a *amqpAdmin) channel() (*amqp.Channel, error) {
	if a.ch != nil && !a.ch.IsClosed() {
		return a.ch, nil
	}
	a.close()
	conn, err := amqp.Dial(a.url)
	if err != nil {
		return nil, err
	}
	ch, err := conn.Channel()
	if err != nil {
		_ = conn.Close()
		return nil, err
	}
	a.conn, a.ch = conn, ch
	return ch, nil
}

func (a *amqpAdmin) close() {
	if a.conn != nil {
		_ = a.conn.Close()
		a.conn, a.ch = nil, nil
	}
}

// brokerState reports what the broker still holds for the consumers, and whether that is nothing.
func (w *world) brokerState(ctx context.Context) (string, bool, error) {
	if w.role.Broker == brokerAMQP {
		n, err := w.amqpReady()
		if err != nil {
			return "", false, err
		}
		return fmt.Sprintf("broker: %d ready", n), n == 0, nil
	}
	cons, err := w.js.Consumer(ctx, w.role.Stream, w.role.Consumer)
	if err != nil {
		return "", false, fmt.Errorf("consumer: %w", err)
	}
	info, err := cons.Info(ctx)
	if err != nil {
		return "", false, fmt.Errorf("consumer info: %w", err)
	}
	return fmt.Sprintf("broker: %d undelivered, %d unacked", info.NumPending, info.NumAckPending),
		info.NumPending == 0 && info.NumAckPending == 0, nil
}

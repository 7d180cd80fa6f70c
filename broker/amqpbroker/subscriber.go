package amqpbroker

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"time"

	"github.com/postbox-go/postbox"
	"github.com/postbox-go/postbox/broker"
	"github.com/postbox-go/postbox/broker/internal/adapterkit"
	"github.com/postbox-go/postbox/internal/backoff"
	amqp "github.com/rabbitmq/amqp091-go"
)

// Defaults for SubscriberConfig.
const (
	DefaultConcurrency = 8
	DefaultPrefetch    = 64
)

// SubscriberConfig configures a Subscriber. URL and Queue are required.
type SubscriberConfig struct {
	ConnConfig
	// Queue to consume from. It must exist (see EnsureTopology); Receive returns an error when it does not.
	Queue string
	// Concurrency is how many handler calls may run at once. Messages with the same key always go to the same
	// one of them, in queue order, so per-key order holds at any concurrency; messages without a key are spread
	// over all. Default: DefaultConcurrency.
	Concurrency int
	// Prefetch is the channel's QoS: how many unacknowledged messages RabbitMQ sends ahead of the handlers,
	// including the ones waiting out a Nack delay. Default: DefaultPrefetch.
	Prefetch int
	// KeyInRoutingKey must match the publishers' PublisherConfig.KeyInRoutingKey: with it, the topic is the
	// routing key without its last word.
	KeyInRoutingKey bool
	// Logger receives messages that are not Postbox CloudEvents (they are rejected) and connection losses.
	// Default: slog.Default().
	Logger *slog.Logger
}

// Subscriber consumes a queue with manual acknowledgements. It implements broker.Subscriber. Several subscribers
// on one queue, in one process or many, compete for its messages.
type Subscriber struct {
	cfg     SubscriberConfig
	log     *slog.Logger
	running adapterkit.Running
}

// WithDefaults returns a copy of c with every zero field set to its default. A nil c gives the defaults.
func (c *SubscriberConfig) WithDefaults() SubscriberConfig {
	out := adapterkit.Copy(c)
	out.ConnConfig = out.ConnConfig.withDefaults()
	adapterkit.Default(&out.Concurrency, DefaultConcurrency)
	adapterkit.Default(&out.Prefetch, DefaultPrefetch)
	adapterkit.Default(&out.Logger, slog.Default())
	return out
}

func (c SubscriberConfig) validate() error {
	const who = "amqpbroker.NewSubscriber"
	if err := c.ConnConfig.validate(who); err != nil {
		return err
	}
	if c.Queue == "" {
		return fmt.Errorf("%w: %s needs the Queue to consume", postbox.ErrInvalidConfig, who)
	}
	if c.Concurrency < 0 || c.Prefetch < 0 || c.Prefetch > 65535 {
		return fmt.Errorf("%w: %s: Concurrency %d must not be negative and Prefetch %d must be within 0..65535 (0 means the default)",
			postbox.ErrInvalidConfig, who, c.Concurrency, c.Prefetch)
	}
	return nil
}

// NewSubscriber returns a subscriber configured by cfg, which needs at least a URL and a Queue. It does no I/O.
func NewSubscriber(cfg *SubscriberConfig) (*Subscriber, error) {
	c := cfg.WithDefaults()
	if err := c.validate(); err != nil {
		return nil, err
	}
	return &Subscriber{cfg: c, log: c.Logger}, nil
}

// errCancelled: the broker cancelled the consumer (the queue was deleted, or a quorum queue lost its leader).
var errCancelled = errors.New("the broker cancelled the consumer")

// Receive consumes the queue and calls handle for each message until ctx is cancelled (see
// broker.Subscriber). When the connection or channel closes it reconnects with backoff; RabbitMQ puts the
// messages that were not acked back in the queue, and acks of handlers still running then fail. On the way out
// it stops consuming, requeues what was prefetched, waits for the running handlers and their delayed nacks, and
// returns nil. It returns an error when the queue does not exist or access is refused.
func (s *Subscriber) Receive(ctx context.Context, handle broker.DeliveryHandler) error {
	done, err := s.running.Start(ctx, "amqpbroker", handle, "")
	if done == nil {
		return err // refused, or ctx already ended
	}
	defer done()

	delays := &delayer{pending: map[*delayed]bool{}}
	lanes := broker.NewLanes(s.cfg.Concurrency, 0, func(d *broker.Delivery) { broker.Dispatch(ctx, d, handle) })
	var conn *amqp.Connection
	defer func() {
		lanes.Close()
		delays.flush() // nacks while the channel is still open, so the messages go back at once
		if conn != nil {
			_ = conn.Close() // requeues whatever is still unacked
		}
	}()

	retry := backoff.Backoff{Base: s.cfg.MinReconnectDelay, Max: s.cfg.MaxReconnectDelay}
	for {
		var err error
		if conn != nil {
			_ = conn.Close()
		}
		conn, err = s.cfg.dial(ctx)
		if err == nil {
			err = s.consume(ctx, conn, lanes, delays, &retry)
		}
		if ctx.Err() != nil {
			return nil
		}
		if fatal(err) {
			return fmt.Errorf("amqpbroker: consume queue %q: %w", s.cfg.Queue, err)
		}
		wait := retry.Next()
		s.log.WarnContext(ctx, "amqpbroker: consumer lost its connection; reconnecting", "queue", s.cfg.Queue,
			"err", err, "retry_in", wait)
		if !adapterkit.Sleep(ctx, wait) {
			return nil
		}
	}
}

// consume opens a channel on conn and dispatches its deliveries to the lanes until ctx ends or the channel
// closes. It resets retry once consuming started.
func (s *Subscriber) consume(ctx context.Context, conn *amqp.Connection, lanes *broker.Lanes[*broker.Delivery], delays *delayer, retry *backoff.Backoff) error {
	ch, err := conn.Channel()
	if err != nil {
		return err
	}
	closed := ch.NotifyClose(make(chan *amqp.Error, 1))
	if err := ch.Qos(s.cfg.Prefetch, 0, false); err != nil {
		return err
	}
	tag := "postbox-" + adapterkit.RandomHex(8)
	deliveries, err := ch.Consume(s.cfg.Queue, tag, false, false, false, false, nil)
	if err != nil {
		return err
	}
	retry.Reset()
	for {
		var msg amqp.Delivery
		var ok bool
		select {
		case msg, ok = <-deliveries:
		case <-ctx.Done():
			s.stop(ch, tag, deliveries)
			return nil
		}
		if !ok {
			if e, ok := <-closed; ok && e != nil {
				return e
			}
			if ch.IsClosed() {
				return amqp.ErrClosed
			}
			return errCancelled
		}
		d, ok := s.delivery(ctx, &msg, delays)
		if !ok {
			continue
		}
		select {
		case lanes.For(d.Message.Key) <- d:
		case <-ctx.Done():
			_ = msg.Nack(false, true)
			s.stop(ch, tag, deliveries)
			return nil
		case e, ok := <-closed:
			// A busy lane must not keep the subscriber from reconnecting; the broker requeued d with its channel.
			if ok && e != nil {
				return e
			}
			return amqp.ErrClosed
		}
	}
}

// stop cancels the consumer and requeues the messages it had prefetched, so other consumers get them now.
func (s *Subscriber) stop(ch *amqp.Channel, tag string, deliveries <-chan amqp.Delivery) {
	if err := ch.Cancel(tag, false); err != nil {
		return // the channel is gone, and with it the prefetched messages went back to the queue
	}
	for msg := range deliveries { // closed once the broker confirmed the cancel
		_ = msg.Nack(false, true)
	}
}

// delivery decodes msg, rejecting it if it is not a Postbox message.
func (s *Subscriber) delivery(ctx context.Context, msg *amqp.Delivery, delays *delayer) (*broker.Delivery, bool) {
	e, err := decode(msg)
	if err != nil {
		s.log.ErrorContext(ctx, "amqpbroker: rejecting a message that is not a Postbox CloudEvent", "queue", s.cfg.Queue,
			"routing_key", msg.RoutingKey, "message_id", msg.MessageId, "err", err)
		_ = msg.Reject(false)
		return nil, false
	}
	e.Message.Topic = msg.RoutingKey
	if s.cfg.KeyInRoutingKey {
		if i := strings.LastIndexByte(e.Message.Topic, '.'); i > 0 {
			e.Message.Topic = e.Message.Topic[:i]
		}
	}
	return broker.NewDelivery(e, attempt(msg), &acker{msg: msg, delays: delays}), true
}

// acker settles one AMQP delivery. AMQP 0-9-1 does not confirm acks: a nil error means the ack was written to
// the connection. If it is lost with the connection, the broker delivers the message again.
type acker struct {
	msg    *amqp.Delivery
	delays *delayer
}

func (a *acker) Ack(context.Context) error { return a.msg.Ack(false) }

// Nack requeues the message. RabbitMQ has no delayed requeue, so with delay > 0 the subscriber holds the message
// unacked (using a Prefetch slot) and requeues it when the delay is over, or at once when Receive stops.
func (a *acker) Nack(_ context.Context, delay time.Duration) error {
	if delay <= 0 {
		return a.msg.Nack(false, true)
	}
	a.delays.after(delay, func() { _ = a.msg.Nack(false, true) }) // if it fails the channel is gone and requeued it
	return nil
}

// Reject drops the message, or dead-letters it when the queue has a dead-letter exchange.
func (a *acker) Reject(context.Context) error { return a.msg.Reject(false) }

var _ broker.Rejecter = (*acker)(nil)

// delayer runs delayed nacks, and all of them at once when flushed.
type delayer struct {
	mu      sync.Mutex
	pending map[*delayed]bool
	flushed bool
	wg      sync.WaitGroup
}

type delayed struct {
	fn    func()
	timer *time.Timer // guarded by delayer.mu
}

func (d *delayer) after(delay time.Duration, fn func()) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.flushed {
		fn()
		return
	}
	e := &delayed{fn: fn}
	d.pending[e] = true
	d.wg.Add(1)
	e.timer = time.AfterFunc(delay, func() {
		defer d.wg.Done()
		if d.take(e) {
			e.fn()
		}
	})
}

// take reports whether e was still pending, and removes it.
func (d *delayer) take(e *delayed) bool {
	d.mu.Lock()
	defer d.mu.Unlock()
	ok := d.pending[e]
	delete(d.pending, e)
	return ok
}

// flush runs every pending fn now and waits for those already running.
func (d *delayer) flush() {
	d.mu.Lock()
	d.flushed = true
	var now []func()
	for e := range d.pending {
		if e.timer.Stop() {
			delete(d.pending, e)
			now = append(now, e.fn)
			d.wg.Done()
		}
	}
	d.mu.Unlock()
	for _, fn := range now {
		fn()
	}
	d.wg.Wait()
}

package amqpbroker

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"syscall"
	"time"

	"github.com/postbox-go/postbox"
	"github.com/postbox-go/postbox/broker"
	"github.com/postbox-go/postbox/broker/internal/adapterkit"
	"github.com/postbox-go/postbox/internal/backoff"
	amqp "github.com/rabbitmq/amqp091-go"
)

// ErrClosed is returned by Publish after Close.
var ErrClosed = adapterkit.ErrClosed("amqpbroker")

// PublisherConfig configures a Publisher. URL is required.
type PublisherConfig struct {
	ConnConfig
	// Exchange every message is published to, with the topic as routing key. It should be a topic exchange (see
	// EnsureTopology). Default: DefaultExchange ("amq.topic").
	Exchange string
	// KeyInRoutingKey publishes with routing key topic + "." + KeyToken(key) instead of topic, so that bindings
	// can select messages by key ("orders.*" for all, RoutingKey("orders", "42", true) for one). Default: false,
	// the key travels only in the cloudEvents_partitionkey header.
	KeyInRoutingKey bool
	// Transient publishes with delivery mode 1, which RabbitMQ may keep in memory only. Default: false, messages
	// are persistent (delivery mode 2) and survive a broker restart in durable queues.
	Transient bool
	// Source is the CloudEvents source attribute. Default: broker.DefaultSource ("postbox").
	Source string
	// Logger receives connection losses and blocked-connection alarms. Default: slog.Default().
	Logger *slog.Logger
}

// Publisher publishes batches to a RabbitMQ exchange with publisher confirms, as mandatory messages so that an
// unroutable message fails instead of vanishing. It implements postbox.Publisher and is safe for concurrent use;
// concurrent Publish calls share one channel. It connects on first use and reconnects after the connection or
// channel closes. Call Close when done.
type Publisher struct {
	cfg PublisherConfig
	ce  broker.CloudEvents
	log *slog.Logger

	connecting chan struct{} // a one-slot lock: one caller connects while the others wait, watching their ctx

	mu      sync.Mutex
	closed  bool
	conn    *amqp.Connection
	ch      *confirmChannel
	blocked string // why RabbitMQ blocks this connection's publishers; "" when it does not
	retry   backoff.Backoff
	retryAt time.Time // no connection attempt before this, after a failure
	lastErr error     // of the last failed attempt
	lost    bool      // the last connection was lost: the next one is a reconnection, and says so

	wg sync.WaitGroup // the confirmation and alarm goroutines
}

// WithDefaults returns a copy of c with every zero field set to its default. A nil c gives the defaults.
func (c *PublisherConfig) WithDefaults() PublisherConfig {
	out := adapterkit.Copy(c)
	out.ConnConfig = out.ConnConfig.withDefaults()
	adapterkit.Default(&out.Exchange, DefaultExchange)
	adapterkit.Default(&out.Source, broker.DefaultSource)
	adapterkit.Default(&out.Logger, slog.Default())
	return out
}

func (c PublisherConfig) validate() error {
	return c.ConnConfig.validate("amqpbroker.NewPublisher")
}

// NewPublisher returns a publisher configured by cfg, which needs at least a URL. It does no I/O.
func NewPublisher(cfg *PublisherConfig) (*Publisher, error) {
	c := cfg.WithDefaults()
	if err := c.validate(); err != nil {
		return nil, err
	}
	return &Publisher{
		cfg:        c,
		ce:         broker.CloudEvents{Prefix: broker.PrefixAMQP, Source: c.Source},
		log:        c.Logger,
		connecting: make(chan struct{}, 1),
		retry:      backoff.Backoff{Base: c.MinReconnectDelay, Max: c.MaxReconnectDelay},
	}, nil
}

// Publish sends every record as a mandatory, persistent message and then waits for the broker's confirmation
// of each. It returns nil when all were confirmed, and otherwise a *postbox.BatchError. A message no queue is
// bound for fails (the broker returns it); so does every message in flight when the channel or connection
// closes, as the broker may or may not have taken it. Records no retry can publish (an empty or overlong
// topic, a reserved header) fail with a postbox.Permanent error. When the publisher cannot connect, Publish
// returns that error for the whole batch.
func (p *Publisher) Publish(ctx context.Context, batch []postbox.Record) error {
	if len(batch) == 0 {
		return nil
	}
	ch, err := p.channel(ctx)
	if err != nil {
		return err
	}
	errs := make([]error, len(batch))
	results := make([]<-chan error, len(batch))
	for i, msg := range adapterkit.Messages(ctx, "amqpbroker", batch, errs, p.message) {
		rec := batch[i]
		var err error
		if results[i], err = ch.publish(ctx, p.cfg.Exchange, RoutingKey(rec.Topic, rec.Key, p.cfg.KeyInRoutingKey), msg); err != nil {
			errs[i] = fmt.Errorf("amqpbroker: publish message %s: %w", rec.ID, err)
		}
	}
	for i, res := range results {
		if res == nil {
			continue
		}
		select {
		case err := <-res:
			if err != nil {
				errs[i] = fmt.Errorf("amqpbroker: message %s to %q: %w", batch[i].ID, batch[i].Topic, err)
			}
		case <-ctx.Done():
			errs[i] = fmt.Errorf("amqpbroker: message %s: no confirmation before the context ended (it may still be delivered): %w",
				batch[i].ID, ctx.Err())
		}
	}
	return adapterkit.Result(ctx, p.log, errs)
}

// message builds the AMQP message of rec, or says why rec cannot be published.
func (p *Publisher) message(rec postbox.Record) (amqp.Publishing, error) {
	var msg amqp.Publishing
	err := checkRoutingKey(rec.Topic, RoutingKey(rec.Topic, rec.Key, p.cfg.KeyInRoutingKey))
	if err == nil {
		msg, err = publishing(p.ce, rec, p.cfg.Transient)
	}
	if err != nil {
		return amqp.Publishing{}, fmt.Errorf("amqpbroker: message %s: %w", rec.ID, err)
	}
	return msg, nil
}

// channel returns an open confirm channel, connecting first if need be. After a failed attempt, the next waits
// out the backoff (watching ctx).
func (p *Publisher) channel(ctx context.Context) (*confirmChannel, error) {
	if ch, err := p.current(); ch != nil || err != nil {
		return ch, err
	}
	select {
	case p.connecting <- struct{}{}:
	case <-ctx.Done():
		return nil, fmt.Errorf("amqpbroker: waiting for the connection to RabbitMQ: %w", ctx.Err())
	}
	defer func() { <-p.connecting }()
	if ch, err := p.current(); ch != nil || err != nil {
		return ch, err // another caller connected meanwhile
	}
	p.mu.Lock()
	wait, lastErr := time.Until(p.retryAt), p.lastErr
	p.mu.Unlock()
	if !adapterkit.Sleep(ctx, wait) {
		return nil, fmt.Errorf("amqpbroker: waiting %v to reconnect to RabbitMQ after %v: %w", wait.Round(time.Millisecond), lastErr, ctx.Err())
	}
	ch, err := p.connect(ctx)
	p.mu.Lock()
	defer p.mu.Unlock()
	if err != nil {
		p.lastErr = err
		// A refused connection says "not yet" (RabbitMQ is restarting), as the relay treats a refused database
		// connection: it does not make the wait grow, so a restarted node is found within MinReconnectDelay.
		wait := p.retry.Next
		if errors.Is(err, syscall.ECONNREFUSED) && p.retry.Attempts() > 0 {
			wait = p.retry.Again
		}
		p.retryAt = time.Now().Add(wait())
		return nil, fmt.Errorf("amqpbroker: %w", err)
	}
	p.retry.Reset()
	if p.closed {
		_ = ch.ch.Close()
		return nil, ErrClosed
	}
	p.ch = ch
	return ch, nil
}

// current returns the open channel, nil if there is none, or ErrClosed; with a blocked connection it returns
// an error instead of publishing into a socket the broker does not read.
func (p *Publisher) current() (*confirmChannel, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	switch {
	case p.closed:
		return nil, ErrClosed
	case p.conn != nil && !p.conn.IsClosed() && p.blocked != "":
		return nil, fmt.Errorf("amqpbroker: RabbitMQ is blocking publishers on this connection (%s): a memory or disk alarm is on", p.blocked)
	case p.ch != nil && !p.ch.isDead():
		return p.ch, nil
	}
	return nil, nil
}

// connect opens a confirm channel, on the current connection if it is still open and on a new one otherwise.
func (p *Publisher) connect(ctx context.Context) (*confirmChannel, error) {
	p.mu.Lock()
	conn := p.conn
	p.mu.Unlock()
	if conn != nil && !conn.IsClosed() {
		ch, err := openConfirmChannel(conn, p.spawn)
		if err == nil {
			return ch, nil
		}
		_ = conn.Close() // a connection that cannot open channels is no use
	}
	conn, err := p.cfg.dial(ctx)
	if err != nil {
		return nil, err
	}
	p.watch(conn)
	ch, err := openConfirmChannel(conn, p.spawn)
	if err != nil {
		_ = conn.Close()
		return nil, err
	}
	return ch, nil
}

// watch makes conn the publisher's connection and follows its alarms and its closing.
func (p *Publisher) watch(conn *amqp.Connection) {
	blocks := conn.NotifyBlocked(make(chan amqp.Blocking, 4))
	closes := conn.NotifyClose(make(chan *amqp.Error, 1))
	p.mu.Lock()
	p.conn, p.blocked = conn, ""
	reconnected := p.lost
	p.lost = false
	p.mu.Unlock()
	if reconnected {
		p.log.Info("amqpbroker: reconnected to RabbitMQ")
	}
	p.spawn(func() {
		for b := range blocks { // closed with the connection
			p.mu.Lock()
			if p.conn == conn {
				p.blocked = ""
				if b.Active {
					p.blocked = b.Reason
				}
			}
			p.mu.Unlock()
			if b.Active {
				p.log.Warn("amqpbroker: RabbitMQ blocked publishing", "reason", b.Reason)
			} else {
				p.log.Info("amqpbroker: RabbitMQ unblocked publishing")
			}
		}
		if e, ok := <-closes; ok && e != nil {
			p.mu.Lock()
			p.lost = true
			p.mu.Unlock()
			p.log.Warn("amqpbroker: connection to RabbitMQ lost; reconnecting on the next publish", "err", e)
		}
	})
}

// spawn runs fn in a goroutine that Close waits for, unless the publisher is closed.
func (p *Publisher) spawn(fn func()) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		return false
	}
	p.wg.Add(1)
	go func() {
		defer p.wg.Done()
		fn()
	}()
	return true
}

// Close closes the connection and waits for the publisher's goroutines. Publishes in flight fail. Publish
// returns ErrClosed afterwards.
func (p *Publisher) Close() error {
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		return nil
	}
	p.closed = true
	conn := p.conn
	p.mu.Unlock()
	var err error
	if conn != nil && !conn.IsClosed() {
		err = conn.Close()
	}
	p.wg.Wait()
	if err != nil && !errors.Is(err, amqp.ErrClosed) {
		return fmt.Errorf("amqpbroker: close connection: %w", err)
	}
	return nil
}

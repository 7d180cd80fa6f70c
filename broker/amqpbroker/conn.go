package amqpbroker

import (
	"context"
	"errors"
	"fmt"
	"net"
	"time"

	"github.com/postbox-go/postbox"
	"github.com/postbox-go/postbox/broker/internal/adapterkit"
	amqp "github.com/rabbitmq/amqp091-go"
)

// Defaults for reconnecting, shared by PublisherConfig and SubscriberConfig.
const (
	DefaultMinReconnectDelay = 100 * time.Millisecond
	DefaultMaxReconnectDelay = 30 * time.Second
	// DefaultDialTimeout bounds the TCP connect and the AMQP handshake when the caller's context has no earlier
	// deadline.
	DefaultDialTimeout = 30 * time.Second
)

// ConnConfig says how to reach RabbitMQ. Publisher and Subscriber each own their connections and reconnect on
// their own, so they take this instead of a *amqp.Connection.
type ConnConfig struct {
	// URL is the broker address, "amqp://user:password@host:5672/vhost" or "amqps://…". Required. Percent-encode
	// reserved characters in the user name and password.
	URL string
	// AMQP tunes the connection: TLS, SASL, heartbeat, client properties. Leave Dial and Recovery nil: the adapter
	// dials with the caller's context and recovers connections itself, failing in-flight publishes instead of
	// replaying them.
	AMQP amqp.Config
	// MinReconnectDelay is the wait before the second connection attempt after a failure; it doubles with each
	// further failure (with jitter) up to MaxReconnectDelay. A refused connection (nothing listens: RabbitMQ is
	// restarting) does not make the publisher's wait grow, so it finds a restarted node within about
	// MinReconnectDelay. Defaults: DefaultMinReconnectDelay and DefaultMaxReconnectDelay.
	MinReconnectDelay time.Duration
	MaxReconnectDelay time.Duration
}

func (c ConnConfig) withDefaults() ConnConfig {
	adapterkit.Default(&c.MinReconnectDelay, DefaultMinReconnectDelay)
	adapterkit.Default(&c.MaxReconnectDelay, DefaultMaxReconnectDelay)
	if c.MinReconnectDelay > 0 {
		c.MaxReconnectDelay = max(c.MaxReconnectDelay, c.MinReconnectDelay)
	}
	return c
}

// validate checks c; who names the constructor the user called.
func (c ConnConfig) validate(who string) error {
	if c.URL == "" {
		return fmt.Errorf("%w: %s needs a URL such as amqp://guest:guest@localhost:5672/", postbox.ErrInvalidConfig, who)
	}
	if _, err := amqp.ParseURI(c.URL); err != nil {
		return fmt.Errorf("%w: %s: URL: %v", postbox.ErrInvalidConfig, who, err)
	}
	if c.AMQP.Dial != nil || c.AMQP.Recovery != nil {
		return fmt.Errorf("%w: %s: leave AMQP.Dial and AMQP.Recovery nil; the adapter dials and reconnects itself",
			postbox.ErrInvalidConfig, who)
	}
	if c.MinReconnectDelay < 0 || c.MaxReconnectDelay < 0 {
		return fmt.Errorf("%w: %s: MinReconnectDelay and MaxReconnectDelay must not be negative (0 means the default)", postbox.ErrInvalidConfig, who)
	}
	return nil
}

// dial opens a connection, giving up when ctx ends: the TCP connect and the handshake both watch it.
func (c ConnConfig) dial(ctx context.Context) (*amqp.Connection, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	cfg := c.AMQP
	var stop func() bool
	cfg.Dial = func(network, addr string) (net.Conn, error) {
		d := net.Dialer{Timeout: DefaultDialTimeout}
		conn, err := d.DialContext(ctx, network, addr)
		if err != nil {
			return nil, err
		}
		// The handshake has no context of its own: a deadline bounds it, and cancelling ctx moves the deadline
		// to the past. amqp091 clears the deadline once the connection is open.
		deadline := time.Now().Add(DefaultDialTimeout)
		if dl, ok := ctx.Deadline(); ok && dl.Before(deadline) {
			deadline = dl
		}
		if err := conn.SetDeadline(deadline); err != nil {
			conn.Close()
			return nil, err
		}
		stop = context.AfterFunc(ctx, func() { _ = conn.SetDeadline(time.Unix(1, 0)) })
		return conn, nil
	}
	conn, err := amqp.DialConfig(c.URL, cfg)
	if stop != nil && !stop() {
		// ctx ended during the handshake: the socket's deadline may now be in the past.
		if conn != nil {
			_ = conn.Close()
		}
		return nil, fmt.Errorf("connect to RabbitMQ: %w", ctx.Err())
	}
	if err != nil {
		return nil, fmt.Errorf("connect to RabbitMQ: %w", err)
	}
	return conn, nil
}

// fatal reports whether err is one that reconnecting cannot fix: refused credentials, a virtual host or queue
// that does not exist, access denied.
func fatal(err error) bool {
	var e *amqp.Error
	return errors.As(err, &e) && (e.Code == amqp.AccessRefused || e.Code == amqp.NotFound)
}

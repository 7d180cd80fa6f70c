package mqttbroker

import (
	"context"
	"fmt"
	"log/slog"
	"net/url"
	"strings"
	"time"

	"github.com/eclipse/paho.golang/autopaho"
	"github.com/eclipse/paho.golang/paho"
	"github.com/postbox-go/postbox"
	"github.com/postbox-go/postbox/broker"
	"github.com/postbox-go/postbox/broker/internal/adapterkit"
)

// Defaults for SubscriberConfig.
const (
	DefaultConcurrency = 8
	DefaultPrefetch    = 64
	// DefaultSubscriberSessionExpiry is how long the server keeps a subscriber's session, with the messages
	// queued for it, after its connection drops.
	DefaultSubscriberSessionExpiry = 24 * time.Hour
)

// ackInterval is how often paho sends the PUBACKs of acked deliveries, which it must send in the order the
// messages arrived.
const ackInterval = 20 * time.Millisecond

// SubscriberConfig configures a Subscriber. URL, ClientID and Topics are required.
type SubscriberConfig struct {
	ConnConfig
	// ClientID names the subscriber's MQTT session, which holds its subscriptions, the messages queued for it
	// while it is away and the ones it has not acknowledged. Keep it stable across restarts and unique among
	// running subscribers: a second connection with the same ID takes the session over and the server
	// disconnects the first.
	ClientID string
	// Group makes the subscriptions shared ("$share/<Group>/<filter>"): the server gives each message to one of
	// the sessions subscribed with the same group, so subscribers with different ClientIDs and one Group
	// compete for messages. Default: "", every subscriber gets every message.
	Group string
	// Topics are the topic filters to subscribe to, at QoS 1 ("orders", "orders/+", "orders/#"). At least one
	// is required.
	Topics []string
	// SessionExpiry is how long the server keeps the session after a disconnection; whole seconds. Messages
	// queued for an expired session are lost, so make it longer than any outage to survive. Default:
	// DefaultSubscriberSessionExpiry.
	SessionExpiry time.Duration
	// Concurrency is how many handler calls may run at once. Messages with the same key always go to the same
	// one of them, in arrival order, so per-key order holds at any concurrency; messages without a key are
	// spread over all. Default: DefaultConcurrency.
	Concurrency int
	// Prefetch is the Receive Maximum the subscriber announces: how many unacknowledged messages the server
	// sends ahead of the handlers (1..65535). MQTT acknowledges in arrival order, so a slow handler holds back
	// the acknowledgements of the messages after it. Default: DefaultPrefetch.
	Prefetch int
	// Logger receives messages that are not Postbox CloudEvents (they are acknowledged and dropped), lost
	// sessions and connection errors. Default: slog.Default().
	Logger *slog.Logger
}

// Subscriber receives messages through a persistent MQTT 5 session with manual acknowledgements. It implements
// broker.Subscriber.
type Subscriber struct {
	cfg     SubscriberConfig
	url     *url.URL
	log     *slog.Logger
	running adapterkit.Running
}

// WithDefaults returns a copy of c with every zero field set to its default. A nil c gives the defaults.
func (c *SubscriberConfig) WithDefaults() SubscriberConfig {
	out := adapterkit.Copy(c)
	out.ConnConfig = out.ConnConfig.withDefaults()
	adapterkit.Default(&out.SessionExpiry, DefaultSubscriberSessionExpiry)
	adapterkit.Default(&out.Concurrency, DefaultConcurrency)
	adapterkit.Default(&out.Prefetch, DefaultPrefetch)
	adapterkit.Default(&out.Logger, slog.Default())
	return out
}

// validate checks c and returns the server URL.
func (c SubscriberConfig) validate() (*url.URL, error) {
	const who = "mqttbroker.NewSubscriber"
	u, err := c.ConnConfig.validate(who)
	if err != nil {
		return nil, err
	}
	if c.ClientID == "" {
		return nil, fmt.Errorf("%w: %s needs a ClientID: the server keeps the subscriber's session under it, so keep it stable across restarts",
			postbox.ErrInvalidConfig, who)
	}
	if err := checkString("ClientID", c.ClientID); err != nil {
		return nil, fmt.Errorf("%w: %s: %v", postbox.ErrInvalidConfig, who, err)
	}
	if c.Group != "" && (strings.ContainsAny(c.Group, "/+#") || checkString("Group", c.Group) != nil) {
		return nil, fmt.Errorf("%w: %s: Group %q must be valid UTF-8 without '/', '+' or '#'", postbox.ErrInvalidConfig, who, c.Group)
	}
	if len(c.Topics) == 0 {
		return nil, fmt.Errorf("%w: %s needs at least one topic filter in Topics", postbox.ErrInvalidConfig, who)
	}
	for _, f := range c.Topics {
		if err := checkFilter(f); err != nil {
			return nil, fmt.Errorf("%w: %s: %v", postbox.ErrInvalidConfig, who, err)
		}
	}
	if c.SessionExpiry < 0 || c.Concurrency < 0 || c.Prefetch < 0 || c.Prefetch > 65535 {
		return nil, fmt.Errorf("%w: %s: SessionExpiry %v and Concurrency %d must not be negative, and Prefetch %d must be within 0..65535 (0 means the default)",
			postbox.ErrInvalidConfig, who, c.SessionExpiry, c.Concurrency, c.Prefetch)
	}
	return u, nil
}

// NewSubscriber returns a subscriber configured by cfg, which needs at least a URL, a ClientID and Topics. It
// does no I/O.
func NewSubscriber(cfg *SubscriberConfig) (*Subscriber, error) {
	c := cfg.WithDefaults()
	u, err := c.validate()
	if err != nil {
		return nil, err
	}
	return &Subscriber{cfg: c, url: u, log: c.Logger}, nil
}

// filters returns the filters to subscribe to, shared when Group is set.
func (s *Subscriber) filters() []string {
	if s.cfg.Group == "" {
		return s.cfg.Topics
	}
	out := make([]string, len(s.cfg.Topics))
	for i, f := range s.cfg.Topics {
		out[i] = SharedFilter(s.cfg.Group, f)
	}
	return out
}

// subscribe subscribes cm to the filters at QoS 1, without retained messages (an event is delivered once, not
// replayed as a last value).
func (s *Subscriber) subscribe(ctx context.Context, cm *autopaho.ConnectionManager) error {
	filters := s.filters()
	sub := &paho.Subscribe{}
	for _, f := range filters {
		sub.Subscriptions = append(sub.Subscriptions, paho.SubscribeOptions{Topic: f, QoS: 1, RetainHandling: 2})
	}
	ack, err := cm.Subscribe(ctx, sub)
	if ack != nil {
		for i, code := range ack.Reasons {
			if code >= 0x80 && i < len(filters) {
				return &subscribeError{filter: filters[i], code: code}
			}
		}
	}
	if err != nil {
		return fmt.Errorf("subscribe: %w", err)
	}
	return nil
}

// config returns the autopaho configuration for the session: manual acknowledgements, Receive Maximum =
// Prefetch, and cb's callbacks.
func (s *Subscriber) config(sess session, cb func(*autopaho.ClientConfig)) autopaho.ClientConfig {
	return s.cfg.clientConfig(s.url, sess, func(cfg *autopaho.ClientConfig) {
		cfg.EnableManualAcknowledgment = true
		cfg.SendAcksInterval = ackInterval
		prev := cfg.ConnectPacketBuilder
		cfg.ConnectPacketBuilder = func(cp *paho.Connect, u *url.URL) (*paho.Connect, error) {
			if prev != nil {
				var err error
				if cp, err = prev(cp, u); err != nil {
					return nil, err
				}
			}
			if cp.Properties == nil {
				cp.Properties = &paho.ConnectProperties{}
			}
			rm := uint16(s.cfg.Prefetch)
			cp.Properties.ReceiveMaximum = &rm
			return cp, nil
		}
		cb(cfg)
	})
}

// EnsureSession connects, subscribes and disconnects, leaving the session on the server: from then on the
// server keeps the messages published to the topics for this subscriber, even before Receive first runs, for
// SessionExpiry. Call it at deploy or start-up time, as you would declare a queue. Messages that arrive while
// it is connected are not acknowledged, so they come again to Receive.
func (s *Subscriber) EnsureSession(ctx context.Context) error {
	cfg := s.config(session{clientID: s.cfg.ClientID, expiry: s.cfg.SessionExpiry}, func(*autopaho.ClientConfig) {})
	cm, _, err := connectOnce(ctx, cfg)
	if err != nil {
		return fmt.Errorf("mqttbroker: connect to %s as %q: %w", s.url.Redacted(), s.cfg.ClientID, err)
	}
	defer cm.Disconnect(context.WithoutCancel(ctx))
	if err := s.subscribe(ctx, cm); err != nil {
		return fmt.Errorf("mqttbroker: session %q: %w", s.cfg.ClientID, err)
	}
	return nil
}

// DeleteSession ends the subscriber's session on the server: its subscriptions, and the messages queued or in
// flight for it, are dropped. A shared-subscription server does not hand those messages to the group's other
// members. Call it when a subscriber instance is retired for good, never while Receive runs.
func (s *Subscriber) DeleteSession(ctx context.Context) error {
	cfg := s.config(session{clientID: s.cfg.ClientID, cleanStart: true}, func(*autopaho.ClientConfig) {})
	cm, _, err := connectOnce(ctx, cfg)
	if err != nil {
		return fmt.Errorf("mqttbroker: connect to %s as %q: %w", s.url.Redacted(), s.cfg.ClientID, err)
	}
	return cm.Disconnect(context.WithoutCancel(ctx)) // with expiry 0 the session ends with the connection
}

// Receive connects with the subscriber's session and calls handle for each message until ctx is cancelled (see
// broker.Subscriber). The connection manager reconnects after a connection loss, resuming the session, and the
// server then sends again every message not yet acknowledged; acks of handlers still running for the lost
// connection fail. On the way out it stops dispatching, waits for the running handlers and for their
// acknowledgements to be sent, disconnects (keeping the session) and returns nil. It returns an error when the
// server refuses the client's credentials or its subscriptions.
func (s *Subscriber) Receive(ctx context.Context, handle broker.DeliveryHandler) error {
	done, err := s.running.Start(ctx, "mqttbroker", handle, "a second connection with its ClientID would take its session over")
	if done == nil {
		return err // refused, or ctx already ended
	}
	defer done()
	r := newReceiver(ctx, s, handle)
	defer r.stopLanes()
	return r.run()
}

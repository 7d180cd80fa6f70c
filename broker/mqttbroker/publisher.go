package mqttbroker

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/url"
	"sync"
	"time"

	"github.com/eclipse/paho.golang/autopaho"
	"github.com/eclipse/paho.golang/paho"
	"github.com/postbox-go/postbox"
	"github.com/postbox-go/postbox/broker"
	"github.com/postbox-go/postbox/broker/internal/adapterkit"
)

// DefaultPublisherSessionExpiry is how long the server keeps a publisher's session after its connection drops,
// so that a publish in flight completes on the next connection instead of failing.
const DefaultPublisherSessionExpiry = time.Minute

// ErrClosed is returned by Publish after Close.
var ErrClosed = adapterkit.ErrClosed("mqttbroker")

// errNoSubscribers is wrapped by the error of a message the server accepted but delivered to no one.
var errNoSubscribers = errors.New("no matching subscribers")

// PublisherConfig configures a Publisher. URL is required.
type PublisherConfig struct {
	ConnConfig
	// ClientID names the publisher's MQTT session. Give each publisher its own. Default: "postbox-pub-" and
	// random hex digits.
	ClientID string
	// SessionExpiry is how long the server keeps the session after a disconnection, so that publishes in flight
	// complete after a reconnection; whole seconds. Default: DefaultPublisherSessionExpiry.
	SessionExpiry time.Duration
	// AllowNoSubscribers counts a message the server acknowledged with "no matching subscribers" (PUBACK reason
	// 0x10) as published. Default: false. MQTT servers drop such a message, so Publish fails it, as an
	// unroutable message, and the relay retries it until a subscription exists.
	AllowNoSubscribers bool
	// Source is the CloudEvents source attribute. Default: broker.DefaultSource ("postbox").
	Source string
	// Logger receives connection errors. Default: slog.Default().
	Logger *slog.Logger
}

// Publisher publishes batches at QoS 1 and waits for each PUBACK. It implements postbox.Publisher and is safe for
// concurrent use. It connects on first use through an autopaho connection manager, which reconnects on its own.
// Call Close when done.
type Publisher struct {
	cfg PublisherConfig
	url *url.URL
	log *slog.Logger

	mu      sync.Mutex
	closed  bool
	cm      *autopaho.ConnectionManager
	up      chan struct{} // closed while a connection is up
	failed  chan struct{} // closed when a connection attempt fails; then replaced
	lastErr error
	lost    bool // a connection was lost: the next one up is a reconnection, and says so
}

// WithDefaults returns a copy of c with every zero field set to its default. A nil c gives the defaults.
func (c *PublisherConfig) WithDefaults() PublisherConfig {
	out := adapterkit.Copy(c)
	out.ConnConfig = out.ConnConfig.withDefaults()
	adapterkit.Default(&out.SessionExpiry, DefaultPublisherSessionExpiry)
	adapterkit.Default(&out.ClientID, randomID("postbox-pub-"))
	adapterkit.Default(&out.Source, broker.DefaultSource)
	adapterkit.Default(&out.Logger, slog.Default())
	return out
}

// validate checks c and returns the server URL.
func (c PublisherConfig) validate() (*url.URL, error) {
	const who = "mqttbroker.NewPublisher"
	u, err := c.ConnConfig.validate(who)
	if err != nil {
		return nil, err
	}
	if c.SessionExpiry < 0 {
		return nil, fmt.Errorf("%w: %s: SessionExpiry must not be negative", postbox.ErrInvalidConfig, who)
	}
	if err := checkString("ClientID", c.ClientID); err != nil {
		return nil, fmt.Errorf("%w: %s: %v", postbox.ErrInvalidConfig, who, err)
	}
	return u, nil
}

// NewPublisher returns a publisher configured by cfg, which needs at least a URL. It does no I/O.
func NewPublisher(cfg *PublisherConfig) (*Publisher, error) {
	c := cfg.WithDefaults()
	u, err := c.validate()
	if err != nil {
		return nil, err
	}
	return &Publisher{cfg: c, url: u, log: c.Logger, up: make(chan struct{}), failed: make(chan struct{})}, nil
}

// Publish sends every record at QoS 1 and waits for its PUBACK. Records with the same topic and key are published
// one after the other, in batch order, so that the server receives them in order; the others are in flight
// together. After a retryable failure, the later records of the same topic and key are not published (they fail
// too), so a retry keeps their order. It returns nil when every record was acknowledged, and otherwise a
// *postbox.BatchError. A record no subscription matched fails unless AllowNoSubscribers is set. Records no retry
// can publish (a topic with wildcards, text that is not UTF-8, a message the server finds too large or
// malformed) fail with a postbox.Permanent error. A record whose PUBACK did not come (the connection went, or
// the wait timed out) fails with a postbox.Unavailable error, and so do the later records of its topic and key:
// a relay retries them without counting an attempt. When no connection comes up within ConnectTimeout, Publish
// returns the last connection error for the whole batch.
func (p *Publisher) Publish(ctx context.Context, batch []postbox.Record) error {
	if len(batch) == 0 {
		return nil
	}
	cm, err := p.connected(ctx)
	if err != nil {
		return err
	}
	errs := make([]error, len(batch))
	todo := make(chan []int)
	var wg sync.WaitGroup
	cs := chains(batch)
	for range min(len(cs), maxSenders) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for chain := range todo {
				p.publishChain(ctx, cm, batch, chain, errs)
			}
		}()
	}
	for _, c := range cs {
		todo <- c
	}
	close(todo)
	wg.Wait()
	return adapterkit.Result(ctx, p.log, errs)
}

// maxSenders bounds the goroutines a Publish call sends with. paho bounds the messages in flight further, to the
// server's Receive Maximum.
const maxSenders = 64

// publishChain publishes the records at the indexes in chain one after the other, and stops after a retryable
// failure.
func (p *Publisher) publishChain(ctx context.Context, cm *autopaho.ConnectionManager, batch []postbox.Record, chain []int, errs []error) {
	var failed string
	var unavailable bool // the failure before was the server's, not the message's
	for _, i := range chain {
		rec := batch[i]
		switch {
		case failed != "":
			errs[i] = fmt.Errorf("mqttbroker: message %s not published: message %s with the same topic and key failed before it", rec.ID, failed)
			if unavailable {
				errs[i] = postbox.Unavailable(errs[i])
			}
		case ctx.Err() != nil:
			errs[i] = fmt.Errorf("mqttbroker: message %s not published: %w", rec.ID, ctx.Err())
		default:
			errs[i] = p.publish(ctx, cm, rec)
			if errs[i] != nil && !postbox.IsPermanent(errs[i]) {
				failed, unavailable = rec.ID, postbox.IsUnavailable(errs[i])
			}
		}
	}
}

// chains groups the batch's indexes: one chain per topic and key, in batch order (MQTT orders messages per
// topic), and one chain per keyless record.
func chains(batch []postbox.Record) [][]int {
	type topicKey struct{ topic, key string }
	var out [][]int
	byKey := map[topicKey]int{}
	for i, rec := range batch {
		if rec.Key == "" {
			out = append(out, []int{i})
			continue
		}
		k := topicKey{rec.Topic, rec.Key}
		c, ok := byKey[k]
		if !ok {
			c = len(out)
			byKey[k] = c
			out = append(out, nil)
		}
		out[c] = append(out[c], i)
	}
	return out
}

func (p *Publisher) publish(ctx context.Context, cm *autopaho.ConnectionManager, rec postbox.Record) error {
	msg, err := message(p.cfg.Source, rec)
	if err != nil {
		return postbox.Permanent(fmt.Errorf("mqttbroker: message %s: %w", rec.ID, err))
	}
	resp, err := cm.Publish(ctx, msg)
	switch {
	case err != nil && resp != nil:
		err = fmt.Errorf("mqttbroker: message %s to %q: the server refused it (reason code 0x%02X%s): %w", rec.ID, rec.Topic,
			resp.ReasonCode, reasonName(resp.ReasonCode), err)
		switch resp.ReasonCode {
		case 0x90, 0x95, 0x99: // topic name invalid, packet too large, payload format invalid
			return postbox.Permanent(err)
		}
		return err
	case err != nil:
		// The connection went, or the wait timed out: the server is unavailable, not the message at fault, so the
		// relay retries it without counting an attempt (postbox.Unavailable).
		return postbox.Unavailable(fmt.Errorf("mqttbroker: message %s to %q: no PUBACK (it may still be delivered): %w", rec.ID, rec.Topic, err))
	case resp.ReasonCode == 0x10 && !p.cfg.AllowNoSubscribers:
		return fmt.Errorf("mqttbroker: message %s: %w for topic %q, so the server dropped it; make the subscribers' "+
			"sessions (Subscriber.EnsureSession) before publishing, or set AllowNoSubscribers", rec.ID, errNoSubscribers, rec.Topic)
	}
	return nil
}

// connected returns the connection manager once a connection is up. It starts the manager on first use, and
// waits at most ConnectTimeout, or until the next connection attempt fails.
func (p *Publisher) connected(ctx context.Context) (*autopaho.ConnectionManager, error) {
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		return nil, ErrClosed
	}
	if p.cm == nil {
		if err := p.start(); err != nil {
			p.mu.Unlock()
			return nil, err
		}
	}
	cm, up, failed := p.cm, p.up, p.failed
	p.mu.Unlock()

	timer := time.NewTimer(p.cfg.ConnectTimeout)
	defer timer.Stop()
	select {
	case <-up:
		return cm, nil
	case <-failed:
	case <-timer.C:
	case <-ctx.Done():
		return nil, fmt.Errorf("mqttbroker: waiting for a connection to %s: %w", p.url.Redacted(), ctx.Err())
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.lastErr == nil {
		return nil, fmt.Errorf("mqttbroker: no connection to %s within %v", p.url.Redacted(), p.cfg.ConnectTimeout)
	}
	return nil, fmt.Errorf("mqttbroker: no connection to %s: %w", p.url.Redacted(), p.lastErr)
}

// start starts the connection manager. p.mu must be held.
func (p *Publisher) start() error {
	cfg := p.cfg.clientConfig(p.url, session{clientID: p.cfg.ClientID, cleanStart: true, expiry: p.cfg.SessionExpiry},
		func(cfg *autopaho.ClientConfig) {
			cfg.OnConnectionUp = func(*autopaho.ConnectionManager, *paho.Connack) {
				p.mu.Lock()
				defer p.mu.Unlock()
				p.lastErr = nil
				close(p.up)
				if p.lost {
					p.lost = false
					p.log.Info("mqttbroker: publisher reconnected", "server", p.url.Redacted())
				}
			}
			cfg.OnConnectionDown = func() bool {
				p.mu.Lock()
				defer p.mu.Unlock()
				p.up = make(chan struct{})
				p.lost = true
				p.log.Warn("mqttbroker: publisher lost its connection; reconnecting", "server", p.url.Redacted())
				return true
			}
			// Closing ends the session: no later connection will take over its publishes in flight.
			cfg.DisconnectPacketBuilder = func() *paho.Disconnect {
				var end uint32
				return &paho.Disconnect{Properties: &paho.DisconnectProperties{SessionExpiryInterval: &end}}
			}
			cfg.OnConnectError = func(err error) {
				p.mu.Lock()
				defer p.mu.Unlock()
				p.lastErr = err
				close(p.failed)
				p.failed = make(chan struct{})
			}
		})
	cm, err := autopaho.NewConnection(context.Background(), cfg) // ends with Close
	if err != nil {
		return fmt.Errorf("mqttbroker: %w", err)
	}
	p.cm = cm
	return nil
}

// Close disconnects and stops reconnecting. Publishes in flight fail. Publish returns ErrClosed afterwards.
func (p *Publisher) Close() error {
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		return nil
	}
	p.closed = true
	cm := p.cm
	p.mu.Unlock()
	if cm == nil {
		return nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), p.cfg.ConnectTimeout)
	defer cancel()
	if err := cm.Disconnect(ctx); err != nil {
		return fmt.Errorf("mqttbroker: disconnect: %w", err)
	}
	return nil
}

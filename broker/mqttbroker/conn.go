package mqttbroker

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"net/url"
	"strings"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/eclipse/paho.golang/autopaho"
	"github.com/eclipse/paho.golang/paho"
	"github.com/postbox-go/postbox"
	"github.com/postbox-go/postbox/broker/internal/adapterkit"
	"github.com/postbox-go/postbox/internal/backoff"
)

// Defaults for ConnConfig.
const (
	DefaultKeepAlive         = 30 * time.Second
	DefaultConnectTimeout    = 10 * time.Second
	DefaultMinReconnectDelay = 100 * time.Millisecond
	DefaultMaxReconnectDelay = 30 * time.Second
)

// ConnConfig says how to reach the MQTT server. Publisher and Subscriber each run their own autopaho connection
// manager, which reconnects with backoff.
type ConnConfig struct {
	// URL is the server address: mqtt://host:1883 (or tcp://), mqtts://host:8883 (or tls://, ssl://), ws:// or
	// wss://. The port defaults to 1883, or 8883 with TLS. Required.
	URL string
	// Username and Password authenticate the client when set.
	Username string
	Password string
	// TLS configures mqtts:// and wss:// connections. Default: the system roots.
	TLS *tls.Config
	// KeepAlive is the longest silence before the client pings; whole seconds, at least one. Default:
	// DefaultKeepAlive.
	KeepAlive time.Duration
	// ConnectTimeout bounds each connection attempt, and how long Publish waits for a connection. Default:
	// DefaultConnectTimeout.
	ConnectTimeout time.Duration
	// MinReconnectDelay is the wait before the second connection attempt after a failure; it doubles with each
	// further failure (with jitter) up to MaxReconnectDelay. A refused connection (nothing listens: the server
	// is restarting) does not make it grow, so a restarted server is found within about MinReconnectDelay.
	// Defaults: DefaultMinReconnectDelay and DefaultMaxReconnectDelay.
	MinReconnectDelay time.Duration
	MaxReconnectDelay time.Duration
	// Configure, if set, adjusts the autopaho configuration (websocket options, an auth handler, PacketTimeout…)
	// after the adapter filled it in. The adapter then restores what it relies on: the server URL, client ID,
	// clean start, session expiry, manual acknowledgement and its callbacks.
	Configure func(*autopaho.ClientConfig)
}

func (c ConnConfig) withDefaults() ConnConfig {
	adapterkit.Default(&c.KeepAlive, DefaultKeepAlive)
	adapterkit.Default(&c.ConnectTimeout, DefaultConnectTimeout)
	adapterkit.Default(&c.MinReconnectDelay, DefaultMinReconnectDelay)
	adapterkit.Default(&c.MaxReconnectDelay, DefaultMaxReconnectDelay)
	if c.MinReconnectDelay > 0 {
		c.MaxReconnectDelay = max(c.MaxReconnectDelay, c.MinReconnectDelay)
	}
	return c
}

// validate checks c and returns the server URL with its port; who names the constructor the user called.
func (c ConnConfig) validate(who string) (*url.URL, error) {
	if c.URL == "" {
		return nil, fmt.Errorf("%w: %s needs a URL such as mqtt://localhost:1883", postbox.ErrInvalidConfig, who)
	}
	u, err := url.Parse(c.URL)
	if err != nil {
		return nil, fmt.Errorf("%w: %s: URL: %v", postbox.ErrInvalidConfig, who, err)
	}
	port := ""
	switch strings.ToLower(u.Scheme) {
	case "mqtt", "tcp":
		port = "1883"
	case "mqtts", "tls", "ssl":
		port = "8883"
	case "ws", "wss":
	default:
		return nil, fmt.Errorf("%w: %s: URL scheme %q; use mqtt, mqtts, tls, ws or wss", postbox.ErrInvalidConfig, who, u.Scheme)
	}
	if u.Port() == "" && port != "" {
		u.Host = net.JoinHostPort(u.Hostname(), port)
	}
	if c.KeepAlive < 0 || c.ConnectTimeout < 0 || c.MinReconnectDelay < 0 || c.MaxReconnectDelay < 0 {
		return nil, fmt.Errorf("%w: %s: durations must not be negative (0 means the default)", postbox.ErrInvalidConfig, who)
	}
	if c.KeepAlive > 65535*time.Second {
		return nil, fmt.Errorf("%w: %s: KeepAlive %v is over MQTT's 65535 seconds", postbox.ErrInvalidConfig, who, c.KeepAlive)
	}
	return u, nil
}

// session is what distinguishes one client's connections from another's.
type session struct {
	clientID   string
	cleanStart bool          // on the first connection only; reconnections resume the session
	expiry     time.Duration // how long the server keeps the session after a disconnection
}

// clientConfig builds the autopaho configuration. cb fills in the callbacks, after Configure ran.
func (c ConnConfig) clientConfig(u *url.URL, s session, cb func(*autopaho.ClientConfig)) autopaho.ClientConfig {
	var cfg autopaho.ClientConfig
	cfg.TlsCfg = c.TLS
	cfg.KeepAlive = uint16(max(c.KeepAlive/time.Second, 1)) // 0 would turn keep-alive off
	cfg.ConnectTimeout = c.ConnectTimeout
	refused := new(atomic.Bool) // whether the last attempt was refused; set before the next delay is asked for
	cfg.ReconnectBackoff = reconnectDelay(c.MinReconnectDelay, c.MaxReconnectDelay, refused.Load)
	if c.Username != "" {
		cfg.ConnectUsername = c.Username
	}
	if c.Password != "" {
		cfg.ConnectPassword = []byte(c.Password)
	}
	if c.Configure != nil {
		c.Configure(&cfg)
	}
	cfg.ServerUrls = []*url.URL{u}
	cfg.ClientID = s.clientID
	cfg.CleanStartOnInitialConnection = s.cleanStart
	cfg.SessionExpiryInterval = uint32(min(s.expiry/time.Second, 0xFFFFFFFE))
	cfg.OnPublishReceived = nil
	cfg.EnableManualAcknowledgment = false
	cfg.OnConnectionUp, cfg.OnConnectionDown, cfg.OnConnectError = nil, nil, nil
	cb(&cfg)
	onErr := cfg.OnConnectError
	cfg.OnConnectError = func(err error) {
		refused.Store(errors.Is(err, syscall.ECONNREFUSED))
		if onErr != nil {
			onErr(err)
		}
	}
	return cfg
}

// reconnectDelay is the wait before connection attempt n: none before the first, then the project's backoff
// from min to max. An attempt that was refused (refused reports it) does not make the next delay grow: nothing
// listening on the server's port says "not yet" (the server is restarting), as the relay treats a refused
// database connection, so a restarted server is found within about minDelay of listening again.
func reconnectDelay(minDelay, maxDelay time.Duration, refused func() bool) autopaho.Backoff {
	level := 0 // autopaho asks for one delay at a time, attempt 0 first, on one goroutine per connection loss
	return func(attempt int) time.Duration {
		if attempt <= 0 {
			level = 0
			return 0
		}
		if level == 0 || !refused() {
			level++
		}
		return backoff.Delay(minDelay, maxDelay, level)
	}
}

// fatal reports whether a connection or subscription error is one that retrying cannot fix: the server refused
// the client's identity or credentials, or the subscription.
func fatal(err error) bool {
	var ce *autopaho.ConnackError
	if errors.As(err, &ce) {
		switch ce.ReasonCode {
		case 0x84, 0x85, 0x86, 0x87, 0x8A, 0x8C: // protocol version, client ID, credentials, not authorized, banned, auth method
			return true
		}
	}
	var se *subscribeError
	return errors.As(err, &se)
}

// subscribeError is a SUBACK that refused a subscription.
type subscribeError struct {
	filter string
	code   byte
}

func (e *subscribeError) Error() string {
	return fmt.Sprintf("the server refused the subscription to %q (reason code 0x%02X%s)", e.filter, e.code, reasonName(e.code))
}

func reasonName(code byte) string {
	switch code {
	case 0x10:
		return ", no matching subscribers"
	case 0x80:
		return ", unspecified error"
	case 0x83:
		return ", implementation specific error"
	case 0x87:
		return ", not authorized"
	case 0x8F:
		return ", topic filter invalid"
	case 0x90:
		return ", topic name invalid"
	case 0x97:
		return ", quota exceeded"
	case 0x95:
		return ", packet too large"
	case 0x99:
		return ", payload format invalid"
	case 0x9E:
		return ", shared subscriptions not supported"
	case 0xA1:
		return ", subscription identifiers not supported"
	case 0xA2:
		return ", wildcard subscriptions not supported"
	}
	return ""
}

// connectOnce starts a connection manager and waits until its first connection is up, returning the first
// connection error instead of retrying. For one-off calls (EnsureSession, DeleteSession).
func connectOnce(ctx context.Context, cfg autopaho.ClientConfig) (*autopaho.ConnectionManager, *paho.Connack, error) {
	type result struct {
		ack *paho.Connack
		err error
	}
	first := make(chan result, 1)
	cfg.OnConnectionUp = func(_ *autopaho.ConnectionManager, ack *paho.Connack) {
		select {
		case first <- result{ack: ack}:
		default:
		}
	}
	cfg.OnConnectError = func(err error) {
		select {
		case first <- result{err: err}:
		default:
		}
	}
	// The manager lives on after ctx; the caller ends it with Disconnect.
	cm, err := autopaho.NewConnection(context.WithoutCancel(ctx), cfg)
	if err != nil {
		return nil, nil, err
	}
	var r result
	select {
	case r = <-first:
	case <-ctx.Done():
		r.err = ctx.Err()
	}
	if r.err != nil {
		_ = cm.Disconnect(context.WithoutCancel(ctx)) // returns once the attempt in progress ended
		return nil, nil, r.err
	}
	return cm, r.ack, nil
}

// randomID returns a client ID no other client uses.
func randomID(prefix string) string { return prefix + adapterkit.RandomHex(8) }

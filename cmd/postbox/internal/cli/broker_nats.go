package cli

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net/url"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	natsbroker "github.com/postbox-go/postbox/broker/natsbroker"
)

func init() {
	brokerSchemes["nats"] = openNATS
	brokerSchemes["tls"] = openNATS // NATS's own scheme for a connection that must use TLS
}

var natsParams = []string{"stream", "subjects", "key_in_subject", "name", "tls", "ca_file", reconnectParam}

// openNATS returns a JetStream publisher for
//
//	nats://[user:pass@]host:4222[,host2:4222][?stream=NAME&subjects=a,b.>&key_in_subject=true&name=CLIENT&tls=true&ca_file=PATH&reconnect_max=D]
//	tls://[user:pass@]host:4222[,...][?...]
//
// A lost connection is tried again at the relay's error-backoff pace (see reconnectPace), capped by reconnect_max
// (default --error-backoff-max) instead of nats.go's fixed 2 s.
//
// nats:// uses TLS when the server asks for it, which a man in the middle can deny; tls://, tls=true or ca_file
// require TLS on every server, verified against the system roots or the certificates in ca_file.
// Without stream the streams must exist already (a subject no stream covers cannot be published to). With
// stream and subjects, the relay creates or updates that stream at start-up. The connection retries in the
// background, so a relay started before NATS publishes once NATS is up; /readyz reports it until then.
func openNATS(ctx context.Context, raw string, rt *runtime, o brokerOptions) (*brokerConn, error) {
	servers, query, _ := strings.Cut(raw, "?")
	for _, s := range strings.Split(servers, ",") {
		if scheme, rest, ok := strings.Cut(s, ":"); ok && slices.Contains([]string{"nats", "tls", "ws", "wss"}, strings.ToLower(scheme)) &&
			!strings.HasPrefix(rest, "//") {
			return nil, usageErrorf("broker %s: server %q lacks the // after %s:; write %s://host:4222", RedactURL(raw), RedactURL(s), scheme, scheme)
		}
		full := s
		if !strings.Contains(s, "://") {
			full = "nats://" + s // later servers may leave out the scheme
		}
		if u, err := url.Parse(full); err != nil || u.Hostname() == "" {
			return nil, usageErrorf("broker %s: server %q is not host:port or a nats:// URL", RedactURL(raw), RedactURL(s))
		}
	}
	q, err := url.ParseQuery(query)
	if err != nil {
		return nil, usageErrorf("broker %s: %v", RedactURL(raw), err)
	}
	for k := range q {
		if !slices.Contains(natsParams, k) {
			return nil, usageErrorf("broker %s: unknown parameter %q; NATS URLs take %s", RedactURL(raw), k, strings.Join(natsParams, ", "))
		}
	}
	keyInSubject := false
	if v := q.Get("key_in_subject"); v != "" {
		if keyInSubject, err = strconv.ParseBool(v); err != nil {
			return nil, usageErrorf("broker %s: key_in_subject=%q is not true or false", RedactURL(raw), v)
		}
	}
	stream, subjects := q.Get("stream"), q.Get("subjects")
	if (stream == "") != (subjects == "") {
		return nil, usageErrorf("broker %s: set stream and subjects together, such as ?stream=ORDERS&subjects=orders.>", RedactURL(raw))
	}
	pace, err := o.reconnect.fromURL(q)
	if err != nil {
		return nil, usageErrorf("broker %s: %v", RedactURL(raw), err)
	}
	name := q.Get("name")
	if name == "" {
		name = "postbox-relay"
	}
	// lastErr is why the connection is down, for the start-up check and /readyz: nats.go reports a refused
	// connection only through the reconnect callback.
	var lastErr atomic.Pointer[error]
	opts := []nats.Option{nats.Name(name), nats.MaxReconnects(-1), nats.RetryOnFailedConnect(true),
		// Called before each round of attempts over the servers, after the callbacks of the round before stored
		// its error (they run on another goroutine, so a refusal may be seen one round late).
		nats.CustomReconnectDelay(func(attempts int) time.Duration {
			var last error
			if err := lastErr.Load(); err != nil {
				last = *err
			}
			return pace.delay(attempts, last)
		}),
		nats.DisconnectErrHandler(func(_ *nats.Conn, err error) {
			if err != nil {
				lastErr.Store(&err)
				rt.log.Warn("NATS disconnected; reconnecting", "broker", RedactURL(raw), "err", err)
			}
		}),
		nats.ReconnectErrHandler(func(_ *nats.Conn, err error) {
			if err != nil {
				lastErr.Store(&err) // each failed attempt; the disconnect was logged once
			}
		}),
		nats.ReconnectHandler(func(nc *nats.Conn) {
			rt.log.Info("NATS reconnected", "broker", RedactURL(raw), "server", nc.ConnectedUrlRedacted())
		}),
		nats.ConnectHandler(func(nc *nats.Conn) {
			// With RetryOnFailedConnect, the first connection may come after retries: say when it does.
			rt.log.Info("NATS connected", "broker", RedactURL(raw), "server", nc.ConnectedUrlRedacted())
		})}
	tlsOpts, err := natsTLS(raw, q)
	if err != nil {
		return nil, err
	}
	nc, err := nats.Connect(servers, append(opts, tlsOpts...)...)
	if err != nil {
		return nil, fmt.Errorf("broker %s: %w", RedactURL(raw), err)
	}
	js, err := jetstream.New(nc, jetstream.WithPublishAsyncTimeout(30*time.Second))
	if err != nil {
		nc.Close()
		return nil, fmt.Errorf("broker %s: %w", RedactURL(raw), err)
	}
	if stream != "" {
		sctx, cancel := context.WithTimeout(ctx, 30*time.Second)
		_, err := natsbroker.EnsureStream(sctx, js, jetstream.StreamConfig{Name: stream, Subjects: strings.Split(subjects, ",")})
		cancel()
		if err != nil {
			nc.Close()
			return nil, fmt.Errorf("broker %s: %w", RedactURL(raw), err)
		}
	}
	pub, err := natsbroker.NewPublisher(js, &natsbroker.PublisherConfig{KeyInSubject: keyInSubject, Source: o.source})
	if err != nil {
		nc.Close()
		return nil, usageErrorf("%v", err)
	}
	return &brokerConn{
		name: RedactURL(raw),
		pub:  pub,
		ping: func(ctx context.Context) error {
			if !nc.IsConnected() {
				if err := lastErr.Load(); err != nil {
					return fmt.Errorf("not connected (%v): %w", nc.Status(), *err)
				}
				return fmt.Errorf("not connected (%v)", nc.Status())
			}
			return nc.FlushWithContext(ctx)
		},
		close: func(ctx context.Context) error {
			defer nc.Close()
			if !nc.IsConnected() {
				return nil
			}
			if err := nc.FlushWithContext(ctx); err != nil && !errors.Is(err, nats.ErrConnectionClosed) {
				return err
			}
			return nil
		},
	}, nil
}

// natsTLS returns the options requiring TLS that a NATS URL asks for: the tls:// scheme, tls=true, or ca_file=PATH
// (a PEM file of the certificates to trust instead of the system roots).
func natsTLS(raw string, q url.Values) ([]nats.Option, error) {
	required := strings.HasPrefix(strings.ToLower(raw), "tls:")
	if v := q.Get("tls"); v != "" {
		on, err := strconv.ParseBool(v)
		if err != nil {
			return nil, usageErrorf("broker %s: tls=%q is not true or false", RedactURL(raw), v)
		}
		if !on && required {
			return nil, usageErrorf("broker %s: a tls:// URL always uses TLS; drop tls=false", RedactURL(raw))
		}
		required = required || on
	}
	ca := q.Get("ca_file")
	if ca != "" {
		if _, err := os.Stat(ca); err != nil {
			return nil, usageErrorf("broker %s: ca_file: %v", RedactURL(raw), err)
		}
	}
	if !required && ca == "" {
		return nil, nil
	}
	// Secure first: it replaces the TLS configuration that RootCAs then adds the certificates to.
	opts := []nats.Option{nats.Secure(&tls.Config{MinVersion: tls.VersionTLS12})}
	if ca != "" {
		opts = append(opts, nats.RootCAs(ca))
	}
	return opts, nil
}

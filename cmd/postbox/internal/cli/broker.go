package cli

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/postbox-go/postbox"
)

// brokerConn is a publisher opened from a broker URL.
type brokerConn struct {
	name  string // the URL, redacted
	pub   postbox.Publisher
	ping  func(ctx context.Context) error // nil: always reachable
	close func(ctx context.Context) error // nil: nothing to close
}

// ownPublisher is a publisher that holds its own connection: it pings and closes it.
type ownPublisher interface {
	postbox.Publisher
	Ping(ctx context.Context) error
	Close() error
}

// ownConn is the brokerConn of a publisher that holds its own connection, opened from the URL raw.
func ownConn(raw string, pub ownPublisher) *brokerConn {
	return &brokerConn{
		name:  RedactURL(raw),
		pub:   pub,
		ping:  pub.Ping,
		close: func(context.Context) error { return pub.Close() },
	}
}

// brokerFail returns the function a broker opener fails with: a usage error about the broker URL raw, shown
// redacted, followed by the message format and args give.
func brokerFail(raw string) func(format string, args ...any) (*brokerConn, error) {
	return func(format string, args ...any) (*brokerConn, error) {
		return nil, usageErrorf("broker %s: "+format, append([]any{RedactURL(raw)}, args...)...)
	}
}

// brokerOptions are the relay's settings every broker adapter may use.
type brokerOptions struct {
	source        string // the CloudEvents source
	webhookSecret string // signs http(s) webhook requests
	// webhookSecretFrom names where webhookSecret was given (--webhook-secret, POSTBOX_WEBHOOK_SECRET or a
	// config file key), for errors.
	webhookSecretFrom string
	reconnect         reconnectPace // how often a lost connection is tried again (--error-backoff-max)
}

type brokerOpener func(ctx context.Context, raw string, rt *runtime, o brokerOptions) (*brokerConn, error)

// brokerSchemes are the broker URL schemes this build can publish to.
var brokerSchemes = map[string]brokerOpener{
	"stdout": openStdout,
}

func supportedBrokers() string {
	names := slices.Sorted(maps.Keys(brokerSchemes))
	for i, n := range names {
		names[i] = n + ":"
	}
	return strings.Join(names, ", ")
}

func openBroker(ctx context.Context, raw string, rt *runtime, o brokerOptions) (*brokerConn, error) {
	scheme, _, ok := strings.Cut(raw, ":")
	open := brokerSchemes[strings.ToLower(scheme)]
	if !ok || open == nil {
		return nil, usageErrorf("broker %s: unknown or unsupported broker; this build supports %s", RedactURL(raw), supportedBrokers())
	}
	return open(ctx, raw, rt, o)
}

// openStdout returns the stdout: broker, which writes each message as one JSON line in the CloudEvents JSON
// format, for debugging and for piping into other tools.
func openStdout(_ context.Context, raw string, rt *runtime, o brokerOptions) (*brokerConn, error) {
	if raw != "stdout:" && raw != "stdout://" {
		return nil, usageErrorf("broker %s: the stdout broker takes no address; write stdout:", raw)
	}
	return &brokerConn{name: "stdout:", pub: &jsonLines{w: rt.stdout, source: o.source}}, nil
}

// jsonLines publishes records as JSON lines to a writer.
type jsonLines struct {
	mu     sync.Mutex
	w      io.Writer
	source string
}

// event is a record in the CloudEvents 1.0 JSON format, with the topic and headers as extensions.
type event struct {
	SpecVersion     string            `json:"specversion"`
	ID              string            `json:"id"`
	Source          string            `json:"source"`
	Type            string            `json:"type"`
	Time            time.Time         `json:"time"`
	Subject         string            `json:"subject,omitempty"`
	Topic           string            `json:"topic"`
	DataContentType string            `json:"datacontenttype,omitempty"`
	Headers         map[string]string `json:"headers,omitempty"`
	Data            json.RawMessage   `json:"data,omitempty"`
	DataBase64      string            `json:"data_base64,omitempty"`
}

func (j *jsonLines) Publish(ctx context.Context, batch []postbox.Record) error {
	var b strings.Builder
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	for _, r := range batch {
		e := event{SpecVersion: "1.0", ID: r.ID, Source: j.source, Type: r.Type, Time: r.CreatedAt.UTC(), Subject: r.Key,
			Topic: r.Topic, Headers: r.Headers}
		data, raw := jsonOrBytes(r.Payload)
		if data != nil {
			e.Data, e.DataContentType = data, "application/json"
		} else if len(raw) > 0 {
			e.DataBase64 = base64.StdEncoding.EncodeToString(raw)
		}
		if err := enc.Encode(e); err != nil {
			return postbox.Permanent(fmt.Errorf("encode message %s: %w", r.ID, err))
		}
	}
	j.mu.Lock()
	defer j.mu.Unlock()
	_, err := j.w.Write(escapeJSON([]byte(b.String())))
	return err
}

// route sends topics matching pattern to one broker.
type route struct {
	pattern string
	conn    *brokerConn
}

// parseRoute splits a --route value, PATTERN=URL.
func parseRoute(v string) (pattern, url string, err error) {
	pattern, url, ok := strings.Cut(v, "=")
	if !ok || pattern == "" || url == "" {
		return "", "", usageErrorf("--route %q: write PATTERN=URL, such as 'orders.*=nats://localhost:4222'", RedactURL(v))
	}
	return pattern, url, nil
}

// router publishes each record to the broker of the first route its topic matches, or to the default broker,
// through a postbox.Router whose destinations are the brokers, named by their redacted URLs: one broker down or
// slow holds back only its own topics (see postbox.Destinations).
type router struct {
	routes   []route
	fallback *brokerConn // may be nil

	once sync.Once
	lib  *postbox.Router
}

// publisher returns the postbox.Router of the routes, made at the first use, after tracing wrapped the brokers'
// publishers (traceBrokers).
func (r *router) publisher() *postbox.Router {
	r.once.Do(func() {
		r.lib = &postbox.Router{DefaultName: "no route"}
		for _, rt := range r.routes {
			r.lib.Routes = append(r.lib.Routes, postbox.Route{Topics: rt.pattern, Publisher: rt.conn.pub, Name: rt.conn.name})
		}
		if r.fallback != nil {
			r.lib.Default, r.lib.DefaultName = r.fallback.pub, r.fallback.name
		}
	})
	return r.lib
}

// Publish publishes batch, each broker's share at once beside the others. A topic no route matches, with no
// default --broker, fails (not permanently: adding a --route and restarting the relay publishes it).
func (r *router) Publish(ctx context.Context, batch []postbox.Record) error {
	return r.publisher().Publish(ctx, batch)
}

// Destination names the broker of topic's messages, its URL redacted.
func (r *router) Destination(topic string) string { return r.publisher().Destination(topic) }

// DestinationNames names every broker of the router.
func (r *router) DestinationNames() []string { return r.publisher().DestinationNames() }

// conns returns every distinct broker of the router.
func (r *router) conns() []*brokerConn {
	var out []*brokerConn
	add := func(c *brokerConn) {
		if c != nil && !slices.Contains(out, c) {
			out = append(out, c)
		}
	}
	add(r.fallback)
	for _, rt := range r.routes {
		add(rt.conn)
	}
	return out
}

// openRouter opens the default broker and every route's broker; routes naming the same URL share one connection.
func openRouter(ctx context.Context, rt *runtime, def string, routes []string, o brokerOptions) (*router, error) {
	r := &router{}
	byURL := map[string]*brokerConn{}
	open := func(raw string) (*brokerConn, error) {
		if c, ok := byURL[raw]; ok {
			return c, nil
		}
		c, err := openBroker(ctx, raw, rt, o)
		if err != nil {
			return nil, err
		}
		byURL[raw] = c
		return c, nil
	}
	fail := func(err error) (*router, error) {
		closeBrokers(context.WithoutCancel(ctx), rt, r.conns())
		return nil, err
	}
	if def == "" && len(routes) == 0 {
		return nil, usageErrorf("--broker is required (or one --route per topic pattern): a broker URL such as %s", supportedBrokers())
	}
	if def != "" {
		c, err := open(def)
		if err != nil {
			return fail(err)
		}
		r.fallback = c
	}
	for _, v := range routes {
		pattern, u, err := parseRoute(v)
		if err != nil {
			return fail(err)
		}
		c, err := open(u)
		if err != nil {
			return fail(err)
		}
		r.routes = append(r.routes, route{pattern: pattern, conn: c})
	}
	return r, nil
}

// closeBrokers flushes and closes every broker, each within 10 seconds.
func closeBrokers(ctx context.Context, rt *runtime, conns []*brokerConn) {
	for _, c := range conns {
		if c.close == nil {
			continue
		}
		cctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		if err := c.close(cctx); err != nil {
			rt.log.Error("closing broker failed", "broker", c.name, "err", err)
		}
		cancel()
	}
}

package cli

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
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

// matchTopic reports whether topic matches pattern, where * matches any run of characters (dots included) and
// every other character matches itself: "orders.*" matches "orders.created" and "orders.eu.created", "*" every
// topic.
func matchTopic(pattern, topic string) bool {
	star, resume := -1, 0
	p, t := 0, 0
	for t < len(topic) {
		switch {
		case p < len(pattern) && pattern[p] == '*':
			star, resume = p, t
			p++
		case p < len(pattern) && pattern[p] == topic[t]:
			p++
			t++
		case star >= 0:
			resume++
			p, t = star+1, resume
		default:
			return false
		}
	}
	for p < len(pattern) && pattern[p] == '*' {
		p++
	}
	return p == len(pattern)
}

// router publishes each record to the broker of the first route its topic matches, or to the default broker.
// Each broker's share of a batch is published concurrently.
type router struct {
	routes   []route
	fallback *brokerConn // may be nil
}

func (r *router) destination(topic string) *brokerConn {
	for _, rt := range r.routes {
		if matchTopic(rt.pattern, topic) {
			return rt.conn
		}
	}
	return r.fallback
}

func (r *router) Publish(ctx context.Context, batch []postbox.Record) error {
	groups := map[*brokerConn][]int{}
	errs := make([]error, len(batch))
	for i, rec := range batch {
		c := r.destination(rec.Topic)
		if c == nil {
			// Not permanent: fixing the routes and restarting the relay publishes it.
			errs[i] = fmt.Errorf("no route matches topic %q and no default --broker is set; add a --route for it", rec.Topic)
			continue
		}
		groups[c] = append(groups[c], i)
	}
	var wg sync.WaitGroup
	for c, idx := range groups {
		wg.Add(1)
		go func() {
			defer wg.Done()
			part := make([]postbox.Record, len(idx))
			for j, i := range idx {
				part[j] = batch[i]
			}
			err := c.pub.Publish(ctx, part)
			var be *postbox.BatchError
			for j, i := range idx {
				switch {
				case err == nil:
				case errors.As(err, &be) && len(be.Errs) == len(idx):
					errs[i] = be.Errs[j]
				default:
					errs[i] = err
				}
			}
		}()
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			return &postbox.BatchError{Errs: errs}
		}
	}
	return nil
}

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

package webhook

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	neturl "net/url"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/postbox-go/postbox"
	"github.com/postbox-go/postbox/broker"
)

// Defaults for PublisherConfig.
const (
	DefaultTimeout     = 10 * time.Second
	DefaultConcurrency = 8
)

// ErrClosed is returned by Publish after Close.
var ErrClosed = errors.New("webhook: publisher is closed")

// PublisherConfig configures a Publisher.
type PublisherConfig struct {
	// URL receives every message, unless Endpoint is set. TopicPlaceholder ("{topic}") in its path or query is
	// replaced by each message's topic, escaped so that it stays one path segment or one query value; the
	// topics "." and ".." are refused there. https://hooks.example/in/{topic} gives each topic its endpoint.
	URL string
	// Endpoint, if set, returns the URL for a topic, as it is; "" means the topic has no endpoint and its
	// messages fail permanently. Escaping the topic is then the function's job.
	Endpoint func(topic string) string
	// Secret signs every request (see Sign and SignHeaders): "whsec_" followed by the base64 key, as Standard
	// Webhooks receivers expect it, or any other text used as the key as it is (see ParseSecret). At least
	// MinSecretBytes bytes of key. Required: unsigned webhooks let anyone forge events.
	Secret string
	// Client sends the requests. Its CheckRedirect is replaced so that redirects are never followed (a POST
	// redirected with 301, 302 or 303 would arrive as a GET without its body). Default: a client with a clone
	// of http.DefaultTransport.
	Client *http.Client
	// Timeout bounds each request, from connecting to reading the status. Default: DefaultTimeout.
	Timeout time.Duration
	// Concurrency is how many requests of one batch may be in flight at once. Messages with the same key are
	// always sent one after another, in batch order. Default: DefaultConcurrency.
	Concurrency int
	// Source is the CloudEvents source attribute. Default: broker.DefaultSource ("postbox").
	Source string
	// Logger receives refusals that look like a secret mismatch (400, 401 or 403 from a receiver), besides the
	// error the relay records. Default: slog.Default().
	Logger *slog.Logger
	// Now stamps the signature timestamp. Default: time.Now.
	Now func() time.Time
}

// WithDefaults returns a copy of c with every zero field set to its default. A nil c gives the defaults.
func (c *PublisherConfig) WithDefaults() PublisherConfig {
	var out PublisherConfig
	if c != nil {
		out = *c
	}
	if out.Timeout == 0 {
		out.Timeout = DefaultTimeout
	}
	if out.Concurrency == 0 {
		out.Concurrency = DefaultConcurrency
	}
	if out.Logger == nil {
		out.Logger = slog.Default()
	}
	if out.Now == nil {
		out.Now = time.Now
	}
	return out
}

func (c PublisherConfig) validate() error {
	switch {
	case c.URL == "" && c.Endpoint == nil:
		return errors.New("set PublisherConfig.URL, or PublisherConfig.Endpoint to pick a URL per topic")
	case c.URL != "" && c.Endpoint != nil:
		return errors.New("set PublisherConfig.URL or PublisherConfig.Endpoint, not both")
	case c.Concurrency < 0 || c.Timeout < 0:
		return errors.New("PublisherConfig.Concurrency and Timeout must not be negative (0 means the default)")
	}
	if _, err := ParseSecret(c.Secret); err != nil {
		return fmt.Errorf("PublisherConfig.Secret: %w; receivers need it to tell your requests from forged ones", err)
	}
	if c.URL != "" {
		if _, err := parseURLTemplate(c.URL); err != nil {
			return fmt.Errorf("PublisherConfig.URL: %w", err)
		}
	}
	return nil
}

// Publisher posts each message of a batch to its endpoint. It implements postbox.Publisher and is safe for
// concurrent use.
type Publisher struct {
	cfg    PublisherConfig
	key    []byte
	url    *urlTemplate // nil with Endpoint
	client *http.Client
	ce     broker.CloudEvents
	closed atomic.Bool
}

// NewPublisher checks cfg and returns a publisher. It does no I/O. Errors wrap postbox.ErrInvalidConfig.
func NewPublisher(cfg *PublisherConfig) (*Publisher, error) {
	c := cfg.WithDefaults()
	if err := c.validate(); err != nil {
		return nil, fmt.Errorf("%w: webhook: %w", postbox.ErrInvalidConfig, err)
	}
	key, _ := ParseSecret(c.Secret) // checked by validate
	p := &Publisher{cfg: c, key: key, ce: broker.CloudEvents{Prefix: broker.PrefixHTTP, Source: c.Source, PercentEncode: true}}
	if c.URL != "" {
		p.url, _ = parseURLTemplate(c.URL)
	}
	p.client = &http.Client{}
	if t, ok := http.DefaultTransport.(*http.Transport); ok {
		p.client.Transport = t.Clone() // a pool of its own, which Close empties
	}
	if c.Client != nil {
		cl := *c.Client
		p.client = &cl
	}
	p.client.CheckRedirect = func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }
	return p, nil
}

// Close makes later Publish calls fail with ErrClosed and closes the client's idle connections. Requests in
// flight finish. It always returns nil.
func (p *Publisher) Close() error {
	p.closed.Store(true)
	p.client.CloseIdleConnections()
	return nil
}

// Publish posts the batch, at most Concurrency requests at a time and one at a time per key. When a message
// fails, later messages with the same key in the batch are not sent (they fail too), so a key's order holds.
// It returns nil when every request got a 2xx response, and a *postbox.BatchError otherwise.
func (p *Publisher) Publish(ctx context.Context, batch []postbox.Record) error {
	if len(batch) == 0 {
		return nil
	}
	if p.closed.Load() {
		return ErrClosed
	}
	// Group record indexes by key; keyless records are groups of one.
	var groups [][]int
	byKey := map[string]int{}
	for i, rec := range batch {
		if rec.Key == "" {
			groups = append(groups, []int{i})
			continue
		}
		g, ok := byKey[rec.Key]
		if !ok {
			g = len(groups)
			byKey[rec.Key] = g
			groups = append(groups, nil)
		}
		groups[g] = append(groups[g], i)
	}
	errs := make([]error, len(batch))
	work := make(chan []int)
	var wg sync.WaitGroup
	for range min(p.cfg.Concurrency, len(groups)) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for g := range work {
				for n, i := range g {
					if errs[i] = p.post(ctx, batch[i]); errs[i] != nil {
						for _, j := range g[n+1:] {
							errs[j] = fmt.Errorf("webhook: message %s not sent: message %s with the same key failed before it",
								batch[j].ID, batch[i].ID)
						}
						break
					}
				}
			}
		}()
	}
	for _, g := range groups {
		work <- g
	}
	close(work)
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			return &postbox.BatchError{Errs: errs}
		}
	}
	return nil
}

// post sends one record and classifies the outcome.
func (p *Publisher) post(ctx context.Context, rec postbox.Record) error {
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("webhook: message %s not sent: %w", rec.ID, err)
	}
	var url string
	if p.cfg.Endpoint != nil {
		url = p.cfg.Endpoint(rec.Topic)
	} else {
		var err error
		if url, err = p.url.expand(rec.Topic); err != nil {
			return postbox.Permanent(fmt.Errorf("webhook: message %s: %w", rec.ID, err))
		}
	}
	if url == "" {
		return postbox.Permanent(fmt.Errorf("webhook: no endpoint for topic %q of message %s", rec.Topic, rec.ID))
	}
	req, err := p.request(ctx, url, rec)
	if err != nil {
		return postbox.Permanent(err)
	}
	rctx, cancel := context.WithTimeout(ctx, p.cfg.Timeout)
	defer cancel()
	resp, err := p.client.Do(req.WithContext(rctx))
	if err != nil {
		var ue *neturl.Error
		if errors.As(err, &ue) {
			ue.URL = redactURL(ue.URL)
		}
		return fmt.Errorf("webhook: post message %s to %s: %w", rec.ID, redactURL(url), err)
	}
	defer resp.Body.Close()
	snippet, _ := io.ReadAll(io.LimitReader(resp.Body, 512))
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10)) // lets the connection be reused
	if resp.StatusCode >= 200 && resp.StatusCode < 300 {
		return nil
	}
	err = fmt.Errorf("webhook: post message %s to %s: %s: %s", rec.ID, redactURL(url), resp.Status, printable(strings.TrimSpace(string(snippet))))
	if loc := resp.Header.Get("Location"); resp.StatusCode >= 300 && resp.StatusCode < 400 && loc != "" {
		err = fmt.Errorf("%w (redirects are not followed; set the URL to %s)", err, redactURL(loc))
	}
	if retryable(resp.StatusCode) {
		return err
	}
	if secretMismatch(resp.StatusCode) {
		err = fmt.Errorf("%w (likely cause: the receiver could not verify the signature because its secret differs from "+
			"this publisher's; give both the same whsec_ secret, then retry the dead message)", err)
		p.cfg.Logger.WarnContext(ctx, "webhook: receiver refused a signed request; check that it has the same secret",
			"status", resp.StatusCode, "message_id", rec.ID, "url", redactURL(url))
	}
	return postbox.Permanent(err)
}

// retryable: 408 and 429 ask the sender to come back; 5xx are the receiver's trouble. Every other non-2xx
// status will not change by itself.
func retryable(status int) bool {
	return status == http.StatusRequestTimeout || status == http.StatusTooManyRequests || status >= 500
}

// printable replaces what a terminal would interpret (control characters, escape sequences, bidirectional
// overrides, invalid UTF-8) in a receiver's answer with U+FFFD: the error is stored as the message's last error
// and printed by operators' tools.
func printable(s string) string {
	return strings.Map(func(r rune) rune {
		if r == utf8.RuneError || (!unicode.IsPrint(r) && r != ' ') {
			return utf8.RuneError
		}
		return r
	}, s)
}

// secretMismatch: the statuses receivers answer when a signature does not verify (Verifier and Receiver answer
// 401; Standard Webhooks libraries' examples use 400 or 403).
func secretMismatch(status int) bool {
	return status == http.StatusBadRequest || status == http.StatusUnauthorized || status == http.StatusForbidden
}

// request builds the signed POST for rec.
func (p *Publisher) request(ctx context.Context, url string, rec postbox.Record) (*http.Request, error) {
	h, body, err := p.ce.Encode(rec)
	if err != nil {
		return nil, err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, bytes.NewReader(body))
	if err != nil {
		var ue *neturl.Error
		if errors.As(err, &ue) {
			ue.URL = redactURL(ue.URL)
		}
		return nil, fmt.Errorf("webhook: message %s: bad endpoint URL %q: %w", rec.ID, redactURL(url), err)
	}
	names := make([]string, 0, len(rec.Headers))
	seen := make(map[string]string, len(rec.Headers))
	for k, v := range h {
		if _, user := rec.Headers[k]; user {
			if reservedHeader(k) {
				return nil, fmt.Errorf("webhook: message %s: header %q is set by the webhook protocol; rename it", rec.ID, k)
			}
			if other, dup := seen[http.CanonicalHeaderKey(k)]; dup {
				return nil, fmt.Errorf("webhook: message %s: headers %q and %q differ only in case, which HTTP does not tell apart; keep one", rec.ID, other, k)
			}
			seen[http.CanonicalHeaderKey(k)] = k
			names = append(names, k)
		}
		req.Header[k] = []string{v} // as is: the receiver restores names from Postbox-Headers
	}
	sort.Strings(names)
	if len(names) > 0 {
		req.Header.Set(HeaderHeaders, strings.Join(names, ","))
	}
	ts := p.cfg.Now().Unix()
	req.Header.Set(HeaderTopic, rec.Topic)
	req.Header.Set(HeaderAttempt, strconv.Itoa(rec.Attempts+1))
	req.Header.Set(HeaderID, rec.ID)
	req.Header.Set(HeaderTimestamp, strconv.FormatInt(ts, 10))
	req.Header.Set(HeaderSignature, Sign(p.key, rec.ID, ts, body))
	req.Header.Set(HeaderSignedHeaders, SignHeaders(p.key, rec.ID, ts, req.Header))
	return req, nil
}

// reservedHeader reports whether a user header would collide with a protocol header or one net/http manages.
func reservedHeader(name string) bool {
	switch http.CanonicalHeaderKey(name) {
	case http.CanonicalHeaderKey(HeaderID), http.CanonicalHeaderKey(HeaderTimestamp), http.CanonicalHeaderKey(HeaderSignature),
		HeaderSignedHeaders, HeaderTopic, HeaderAttempt, HeaderHeaders, "Content-Length", "Host", "Transfer-Encoding", "Connection", "Te",
		"Trailer", "Upgrade", "Keep-Alive", "Proxy-Connection":
		return true
	}
	return false
}

// redactURL returns raw with its password and every query value replaced by xxxxx, for errors: they end up in
// logs and in the outbox's last_error column, where endpoint credentials have no business. Webhook endpoints
// often carry a token in the query (?token=, ?code=, ?sig=), so no query value is shown.
func redactURL(raw string) string {
	u, err := neturl.Parse(raw)
	if err != nil {
		return "(an unparsable URL)"
	}
	if _, ok := u.User.Password(); ok {
		u.User = neturl.UserPassword(u.User.Username(), "xxxxx")
	}
	if u.RawQuery != "" {
		q := u.Query()
		for k := range q {
			q[k] = []string{"xxxxx"}
		}
		u.RawQuery = q.Encode()
	}
	return u.String()
}

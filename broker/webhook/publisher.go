package webhook

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	neturl "net/url"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/postbox-go/postbox"
	"github.com/postbox-go/postbox/broker"
)

// Defaults for Config.
const (
	DefaultTimeout     = 10 * time.Second
	DefaultConcurrency = 8
)

// Config configures a Publisher.
type Config struct {
	// URL receives every message, unless Endpoint is set.
	URL string
	// Endpoint, if set, returns the URL for a topic; "" means the topic has no endpoint and its messages fail
	// permanently.
	Endpoint func(topic string) string
	// Secret signs every request (see Sign). Required: unsigned webhooks let anyone forge events.
	Secret []byte
	// Client sends the requests. Its CheckRedirect is replaced so that redirects are never followed (a POST
	// redirected with 301, 302 or 303 would arrive as a GET without its body). Default: a client with
	// http.DefaultTransport.
	Client *http.Client
	// Timeout bounds each request, from connecting to reading the status. Default: DefaultTimeout.
	Timeout time.Duration
	// Concurrency is how many requests of one batch may be in flight at once. Messages with the same key are
	// always sent one after another, in batch order. Default: DefaultConcurrency.
	Concurrency int
	// Source is the CloudEvents source attribute. Default: broker.DefaultSource ("postbox").
	Source string
	// Now stamps the signature timestamp. Default: time.Now.
	Now func() time.Time
}

// Publisher posts each message of a batch to its endpoint. It implements postbox.Publisher and is safe for
// concurrent use.
type Publisher struct {
	cfg    Config
	client *http.Client
	ce     broker.CloudEvents
}

// NewPublisher checks cfg and returns a publisher. It does no I/O.
func NewPublisher(cfg Config) (*Publisher, error) {
	switch {
	case cfg.URL == "" && cfg.Endpoint == nil:
		return nil, fmt.Errorf("%w: webhook: set Config.URL, or Config.Endpoint to pick a URL per topic", postbox.ErrInvalidConfig)
	case len(cfg.Secret) == 0:
		return nil, fmt.Errorf("%w: webhook: Config.Secret is empty; receivers need it to tell your requests from forged ones", postbox.ErrInvalidConfig)
	case cfg.Concurrency < 0 || cfg.Timeout < 0:
		return nil, fmt.Errorf("%w: webhook: Concurrency and Timeout must not be negative (0 means the default)", postbox.ErrInvalidConfig)
	}
	if cfg.Timeout == 0 {
		cfg.Timeout = DefaultTimeout
	}
	if cfg.Concurrency == 0 {
		cfg.Concurrency = DefaultConcurrency
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	client := &http.Client{}
	if cfg.Client != nil {
		c := *cfg.Client
		client = &c
	}
	client.CheckRedirect = func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }
	return &Publisher{cfg: cfg, client: client,
		ce: broker.CloudEvents{Prefix: broker.PrefixHTTP, Source: cfg.Source, PercentEncode: true}}, nil
}

// Publish posts the batch, at most Concurrency requests at a time and one at a time per key. When a message
// fails, later messages with the same key in the batch are not sent (they fail too), so a key's order holds.
// It returns nil when every request got a 2xx response, and a *postbox.BatchError otherwise.
func (p *Publisher) Publish(ctx context.Context, batch []postbox.Record) error {
	if len(batch) == 0 {
		return nil
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
	url := p.cfg.URL
	if p.cfg.Endpoint != nil {
		url = p.cfg.Endpoint(rec.Topic)
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
	err = fmt.Errorf("webhook: post message %s to %s: %s: %s", rec.ID, redactURL(url), resp.Status, strings.TrimSpace(string(snippet)))
	if loc := resp.Header.Get("Location"); resp.StatusCode >= 300 && resp.StatusCode < 400 && loc != "" {
		err = fmt.Errorf("%w (redirects are not followed; set the URL to %s)", err, redactURL(loc))
	}
	if retryable(resp.StatusCode) {
		return err
	}
	return postbox.Permanent(err)
}

// retryable: 408 and 429 ask the sender to come back; 5xx are the receiver's trouble. Every other non-2xx
// status will not change by itself.
func retryable(status int) bool {
	return status == http.StatusRequestTimeout || status == http.StatusTooManyRequests || status >= 500
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
	for k, v := range h {
		if _, user := rec.Headers[k]; user {
			if reservedHeader(k) {
				return nil, fmt.Errorf("webhook: message %s: header %q is set by the webhook protocol; rename it", rec.ID, k)
			}
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
	req.Header.Set(HeaderSignature, Sign(p.cfg.Secret, rec.ID, ts, body))
	return req, nil
}

// reservedHeader reports whether a user header would collide with a protocol header or one net/http manages.
func reservedHeader(name string) bool {
	switch http.CanonicalHeaderKey(name) {
	case http.CanonicalHeaderKey(HeaderID), http.CanonicalHeaderKey(HeaderTimestamp), http.CanonicalHeaderKey(HeaderSignature),
		HeaderTopic, HeaderAttempt, HeaderHeaders, "Content-Length", "Host", "Transfer-Encoding", "Connection", "Te",
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

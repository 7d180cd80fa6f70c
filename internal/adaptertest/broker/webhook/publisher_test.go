package webhook_test

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/postbox-go/postbox"
	"github.com/postbox-go/postbox/broker/brokertest"
	"github.com/postbox-go/postbox/broker/webhook"
)

// statusServer answers each request with the status in the message's want-status header (default 204), after
// waiting for release when the header wait is set. It records what it saw.
type statusServer struct {
	*httptest.Server
	release     chan struct{}
	mu          sync.Mutex
	seen        []string // message IDs in arrival order
	inflight    int
	maxInflight int
	keysBusy    map[string]bool
	overlap     []string // keys seen with two requests in flight
}

func newStatusServer(t *testing.T) *statusServer {
	s := &statusServer{release: make(chan struct{}), keysBusy: map[string]bool{}}
	s.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		key := r.Header.Get("Ce-Partitionkey")
		s.mu.Lock()
		s.seen = append(s.seen, r.Header.Get(webhook.HeaderID))
		s.inflight++
		s.maxInflight = max(s.maxInflight, s.inflight)
		if key != "" {
			if s.keysBusy[key] {
				s.overlap = append(s.overlap, key)
			}
			s.keysBusy[key] = true
		}
		s.mu.Unlock()
		defer func() {
			s.mu.Lock()
			s.inflight--
			delete(s.keysBusy, key)
			s.mu.Unlock()
		}()
		if r.Header.Get("wait") != "" {
			select {
			case <-s.release:
			case <-r.Context().Done():
			}
		}
		if loc := r.Header.Get("redirect"); loc != "" {
			http.Redirect(w, r, loc, http.StatusMovedPermanently)
			return
		}
		status := http.StatusNoContent
		if v := r.Header.Get("want-status"); v != "" {
			status, _ = strconv.Atoi(v)
		}
		w.WriteHeader(status)
		fmt.Fprintf(w, "answered %d", status)
	}))
	t.Cleanup(s.Close)
	t.Cleanup(func() { close(s.release) })
	return s
}

func publisher(t *testing.T, url string, cfg webhook.PublisherConfig) *webhook.Publisher {
	t.Helper()
	cfg.URL, cfg.Secret, cfg.Client = url, testSecret, client(t)
	if cfg.Logger == nil {
		cfg.Logger = quiet()
	}
	p, err := webhook.NewPublisher(&cfg)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func TestStatusClassification(t *testing.T) {
	srv := newStatusServer(t)
	pub := publisher(t, srv.URL, webhook.PublisherConfig{})
	cases := []struct {
		status    int
		ok, retry bool
	}{
		{200, true, false}, {201, true, false}, {204, true, false},
		{400, false, false}, {401, false, false}, {404, false, false}, {410, false, false}, {422, false, false},
		{408, false, true}, {429, false, true},
		{500, false, true}, {502, false, true}, {503, false, true},
	}
	recs := brokertest.Records("t", len(cases), 0)
	for i, c := range cases {
		recs[i].Headers["want-status"] = strconv.Itoa(c.status)
	}
	err := pub.Publish(context.Background(), recs)
	var be *postbox.BatchError
	if !errors.As(err, &be) {
		t.Fatalf("Publish = %v, want a BatchError", err)
	}
	for i, c := range cases {
		e := be.Errs[i]
		switch {
		case c.ok && e != nil:
			t.Errorf("status %d: %v, want success", c.status, e)
		case !c.ok && e == nil:
			t.Errorf("status %d: success, want an error", c.status)
		case !c.ok && postbox.IsPermanent(e) == c.retry:
			t.Errorf("status %d: permanent=%v, want %v (%v)", c.status, postbox.IsPermanent(e), !c.retry, e)
		case !c.ok && !strings.Contains(e.Error(), fmt.Sprintf("answered %d", c.status)):
			t.Errorf("status %d: error %q does not quote the response body", c.status, e)
		}
	}
}

func TestRedirectIsNotFollowed(t *testing.T) {
	srv := newStatusServer(t)
	recs := brokertest.Records("t", 1, 0)
	recs[0].Headers["redirect"] = "/elsewhere"
	err := publisher(t, srv.URL, webhook.PublisherConfig{}).Publish(context.Background(), recs)
	if !postbox.IsPermanent(err) || !strings.Contains(err.Error(), "/elsewhere") {
		t.Fatalf("Publish to a redirecting endpoint = %v; want a permanent error naming the new location", err)
	}
	if len(srv.seen) != 1 {
		t.Fatalf("server saw %d requests, want 1: the redirect must not be followed", len(srv.seen))
	}
}

func TestTimeoutIsRetryable(t *testing.T) {
	srv := newStatusServer(t)
	recs := brokertest.Records("t", 1, 0)
	recs[0].Headers["wait"] = "1"
	err := publisher(t, srv.URL, webhook.PublisherConfig{Timeout: 50 * time.Millisecond}).Publish(context.Background(), recs)
	if err == nil || postbox.IsPermanent(err) || !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Publish to an endpoint slower than Timeout = %v; want a retryable deadline error", err)
	}
}

func TestConcurrencyAndKeyOrder(t *testing.T) {
	srv := newStatusServer(t)
	pub := publisher(t, srv.URL, webhook.PublisherConfig{Concurrency: 3})
	recs := brokertest.Records("t", 60, 4)
	recs = append(recs, brokertest.Records("t", 20, 0)...)
	if err := pub.Publish(context.Background(), recs); err != nil {
		t.Fatal(err)
	}
	srv.mu.Lock()
	defer srv.mu.Unlock()
	if srv.maxInflight > 3 {
		t.Errorf("%d requests in flight at once; Concurrency is 3", srv.maxInflight)
	}
	if len(srv.overlap) > 0 {
		t.Errorf("keys %v had two requests in flight at once", srv.overlap)
	}
	pos := map[string]int{}
	for i, id := range srv.seen {
		pos[id] = i
	}
	last := map[string]int{}
	for _, r := range recs {
		if p, ok := last[r.Key]; ok && r.Key != "" && pos[r.ID] < p {
			t.Fatalf("key %q: message %s arrived before an earlier one", r.Key, r.ID)
		}
		last[r.Key] = pos[r.ID]
	}
}

func TestFailureHoldsBackItsKey(t *testing.T) {
	srv := newStatusServer(t)
	pub := publisher(t, srv.URL, webhook.PublisherConfig{})
	recs := brokertest.Records("t", 3, 0)
	recs[0].Key, recs[1].Key, recs[2].Key = "a", "a", "b"
	recs[0].Headers["want-status"] = "500"
	err := pub.Publish(context.Background(), recs)
	var be *postbox.BatchError
	if !errors.As(err, &be) || be.Errs[0] == nil || be.Errs[1] == nil || be.Errs[2] != nil {
		t.Fatalf("Publish = %v; want the failed message and the later one with its key failed, the other key published", err)
	}
	if postbox.IsPermanent(be.Errs[1]) {
		t.Fatalf("held-back message failed permanently: %v", be.Errs[1])
	}
	for _, id := range srv.seen {
		if id == recs[1].ID {
			t.Fatal("the message after a failed one with the same key was sent")
		}
	}
}

func TestPublishRefuses(t *testing.T) {
	srv := newStatusServer(t)
	pub := publisher(t, srv.URL, webhook.PublisherConfig{})
	recs := brokertest.Records("t", 2, 0)
	recs[0].Headers["webhook-signature"] = "forged"
	if err := pub.Publish(context.Background(), recs); !errors.As(err, new(*postbox.BatchError)) ||
		!postbox.IsPermanent(err.(*postbox.BatchError).Errs[0]) || err.(*postbox.BatchError).Errs[1] != nil {
		t.Fatalf("Publish with a user header named like the signature = %v; want only that message failed permanently", err)
	}
	routed, _ := webhook.NewPublisher(&webhook.PublisherConfig{Secret: testSecret, Client: client(t),
		Endpoint: func(topic string) string { return "" }})
	if err := routed.Publish(context.Background(), recs[1:]); !postbox.IsPermanent(err) || !strings.Contains(err.Error(), "no endpoint") {
		t.Fatalf("Publish to a topic without endpoint = %v", err)
	}
}

func TestConfigErrors(t *testing.T) {
	for name, cfg := range map[string]webhook.PublisherConfig{
		"no URL":                {Secret: testSecret},
		"no secret":             {URL: "http://x"},
		"negative concurrency":  {URL: "http://x", Secret: testSecret, Concurrency: -1},
		"URL and Endpoint":      {URL: "http://x", Secret: testSecret, Endpoint: func(string) string { return "" }},
		"topic in the host":     {URL: "http://{topic}.example/in", Secret: testSecret},
		"topic in the fragment": {URL: "http://x/in#{topic}", Secret: testSecret},
		"not http":              {URL: "ftp://x/in", Secret: testSecret},
	} {
		if _, err := webhook.NewPublisher(&cfg); !errors.Is(err, postbox.ErrInvalidConfig) {
			t.Errorf("%s: NewPublisher = %v, want ErrInvalidConfig", name, err)
		}
	}
	if _, err := webhook.NewPublisher(nil); !errors.Is(err, postbox.ErrInvalidConfig) || !strings.Contains(err.Error(), "PublisherConfig.URL") {
		t.Errorf("NewPublisher(nil) = %v; want ErrInvalidConfig naming PublisherConfig.URL", err)
	}
	if _, err := webhook.NewReceiver(&webhook.ReceiverConfig{}); !errors.Is(err, postbox.ErrInvalidConfig) {
		t.Errorf("NewReceiver without secrets = %v", err)
	}
}

// TestErrorsHideEndpointSecrets: publish errors end up in logs and in the outbox's last_error, so the endpoint's
// password and query values (where webhook tokens usually travel) never appear in them, whether the receiver
// answered with an error, redirected, or could not be reached.
func TestErrorsHideEndpointSecrets(t *testing.T) {
	srv := newStatusServer(t)
	u, err := url.Parse(srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	u.User = url.UserPassword("hook", "pa55-w0rd")
	u.Path, u.RawQuery = "/in", "token=t0p-s3cret&tenant=acme"
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	closed := *u
	closed.Host = ln.Addr().String()
	ln.Close() // nothing listens there now: the request fails before any answer

	failing := brokertest.Records("t", 1, 0)
	failing[0].Headers["want-status"] = "500"
	redirecting := brokertest.Records("t", 1, 0)
	redirecting[0].Headers["redirect"] = "/elsewhere?token=t0p-s3cret"
	for name, tc := range map[string]struct {
		url  string
		recs []postbox.Record
	}{
		"error status": {u.String(), failing},
		"redirect":     {u.String(), redirecting},
		"unreachable":  {closed.String(), brokertest.Records("t", 1, 0)},
	} {
		err := publisher(t, tc.url, webhook.PublisherConfig{}).Publish(context.Background(), tc.recs)
		if err == nil {
			t.Fatalf("%s: Publish succeeded", name)
		}
		for _, secret := range []string{"pa55-w0rd", "t0p-s3cret"} {
			if strings.Contains(err.Error(), secret) {
				t.Errorf("%s: error %q shows the secret %q", name, err, secret)
			}
		}
		if !strings.Contains(err.Error(), "/in") {
			t.Errorf("%s: error %q no longer says which endpoint failed", name, err)
		}
	}
}

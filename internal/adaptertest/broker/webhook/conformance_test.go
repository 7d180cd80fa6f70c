package webhook_test

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/postbox-go/postbox"
	"github.com/postbox-go/postbox/broker"
	"github.com/postbox-go/postbox/broker/brokertest"
	"github.com/postbox-go/postbox/broker/webhook"
)

const secret = "whsec_Y29uZm9ybWFuY2Utc2VjcmV0LTAxMjM0NTY3ODk="

// harness serves one Receiver per topic under /hooks/<topic>; other paths get 404.
type harness struct {
	srv       *httptest.Server
	mu        sync.Mutex
	receivers map[string]*webhook.Receiver
}

func newHarness(t *testing.T) *harness {
	h := &harness{receivers: map[string]*webhook.Receiver{}}
	h.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h.mu.Lock()
		rcv := h.receivers[strings.TrimPrefix(r.URL.Path, "/hooks/")]
		h.mu.Unlock()
		if rcv == nil {
			http.NotFound(w, r)
			return
		}
		rcv.ServeHTTP(w, r)
	}))
	t.Cleanup(h.srv.Close)
	return h
}

func (h *harness) new(t *testing.T, topic string) (postbox.Publisher, broker.Subscriber) {
	h.mu.Lock()
	defer h.mu.Unlock()
	rcv := h.receivers[topic]
	if rcv == nil {
		var err error
		rcv, err = webhook.NewReceiver(&webhook.ReceiverConfig{Verifier: webhook.Verifier{Secrets: []string{secret}}, Logger: quiet()})
		if err != nil {
			t.Fatal(err)
		}
		h.receivers[topic] = rcv
	}
	pub, err := webhook.NewPublisher(&webhook.PublisherConfig{Secret: secret, Client: client(t), Source: "/conformance",
		URL: h.srv.URL + "/hooks/{topic}"})
	if err != nil {
		t.Fatal(err)
	}
	return pub, rcv
}

func TestConformance(t *testing.T) {
	h := newHarness(t)
	brokertest.Exercise(t, brokertest.Features{NoBacklog: true, PerKeyOrder: true, Unroutable: true, Attempts: true, ErrClosed: webhook.ErrClosed,
		Unreachable: func(t *testing.T) postbox.Publisher {
			pub, err := webhook.NewPublisher(&webhook.PublisherConfig{URL: "http://127.0.0.1:1/hook", Secret: secret, Client: client(t)})
			if err != nil {
				t.Fatal(err)
			}
			return pub
		}}, h.new)
}

package webhook_test

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	standardwebhooks "github.com/standard-webhooks/standard-webhooks/libraries/go"

	"github.com/postbox-go/postbox/broker/brokertest"
	"github.com/postbox-go/postbox/broker/webhook"
)

// interopSecret is a secret in the Standard Webhooks form; its key is the bytes of interopText.
const (
	interopSecret = "whsec_cG9zdGJveC1pbnRlcm9wLXNlY3JldC0wMTIzNDU2Nzg5"
	interopText   = "postbox-interop-secret-0123456789"
)

// TestInteropReferenceVerifiesPostbox: a receiver built on the Standard Webhooks reference library, given a
// whsec_ secret, verifies every request of a Postbox publisher given the same secret, or the plain text the
// secret encodes, and ignores the headers signature it does not know.
func TestInteropReferenceVerifiesPostbox(t *testing.T) {
	wh, err := standardwebhooks.NewWebhook(interopSecret)
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var refused []string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		if err := wh.Verify(body, r.Header); err != nil {
			mu.Lock()
			refused = append(refused, err.Error())
			mu.Unlock()
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		w.WriteHeader(http.StatusNoContent)
	}))
	defer srv.Close()
	for _, secret := range []string{interopSecret, interopText} {
		pub, err := webhook.NewPublisher(&webhook.PublisherConfig{URL: srv.URL + "/hooks/{topic}", Secret: secret, Client: client(t), Logger: quiet()})
		if err != nil {
			t.Fatal(err)
		}
		recs := brokertest.Records("orders", 5, 2)
		recs[0].Payload = []byte(`{"note":"ünïcödé and \"quotes\""}`)
		recs[1].Payload = nil
		if err := pub.Publish(context.Background(), recs); err != nil {
			t.Fatalf("secret %.10s…: the reference library refused Postbox's requests: %v (%v)", secret, err, refused)
		}
	}

	// And refuses them when the secrets differ: the test can tell.
	pub, err := webhook.NewPublisher(&webhook.PublisherConfig{URL: srv.URL, Secret: webhook.FormatSecret([]byte(interopText + "!")), Client: client(t), Logger: quiet()})
	if err != nil {
		t.Fatal(err)
	}
	if err := pub.Publish(context.Background(), brokertest.Records("orders", 1, 0)); err == nil || !strings.Contains(err.Error(), "secret differs") {
		t.Fatalf("Publish with another secret = %v; want the reference's refusal, naming a secret mismatch", err)
	}
}

// TestInteropPostboxVerifiesReference: requests signed by the reference library verify with Postbox's Verifier
// given the same whsec_ secret (AllowUnsignedHeaders, since a Standard Webhooks sender signs no headers), and a
// changed body or another secret is refused.
func TestInteropPostboxVerifiesReference(t *testing.T) {
	wh, err := standardwebhooks.NewWebhook(interopSecret)
	if err != nil {
		t.Fatal(err)
	}
	body := []byte(`{"type":"invoice.paid","id":42}`)
	at := time.Now()
	sig, err := wh.Sign("msg_2Kx9", at, body)
	if err != nil {
		t.Fatal(err)
	}
	h := http.Header{}
	h.Set("webhook-id", "msg_2Kx9")
	h.Set("webhook-timestamp", strconv.FormatInt(at.Unix(), 10))
	h.Set("webhook-signature", sig)

	for _, secrets := range [][]string{{interopSecret}, {interopText}, {"old-secret-0123456789-abcdef", interopSecret}} {
		v := &webhook.Verifier{Secrets: secrets, AllowUnsignedHeaders: true}
		if err := v.Verify(h, body); err != nil {
			t.Errorf("secrets %q: Verify of a request the reference library signed = %v", secrets, err)
		}
	}
	v := &webhook.Verifier{Secrets: []string{interopSecret}, AllowUnsignedHeaders: true}
	if err := v.Verify(h, append(body, ' ')); !errors.Is(err, webhook.ErrSignatureFailed) {
		t.Errorf("changed body: %v, want ErrSignatureFailed", err)
	}
	other := &webhook.Verifier{Secrets: []string{webhook.FormatSecret([]byte(interopText + "!"))}, AllowUnsignedHeaders: true}
	if err := other.Verify(h, body); !errors.Is(err, webhook.ErrSignatureFailed) {
		t.Errorf("another secret: %v, want ErrSignatureFailed", err)
	}
	strict := &webhook.Verifier{Secrets: []string{interopSecret}}
	if err := strict.Verify(h, body); !errors.Is(err, webhook.ErrUnsigned) || !strings.Contains(err.Error(), "AllowUnsignedHeaders") {
		t.Errorf("without AllowUnsignedHeaders: %v; want ErrUnsigned pointing to AllowUnsignedHeaders", err)
	}
}

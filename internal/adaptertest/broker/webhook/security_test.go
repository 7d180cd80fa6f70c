package webhook_test

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/postbox-go/postbox"
	"github.com/postbox-go/postbox/broker"
	"github.com/postbox-go/postbox/broker/brokertest"
	"github.com/postbox-go/postbox/broker/webhook"
)

func TestSignedHeaders(t *testing.T) {
	var captured *http.Request
	var capturedBody []byte
	sink := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		captured, capturedBody = r.Clone(context.Background()), must(io.ReadAll(r.Body))
		w.WriteHeader(http.StatusNoContent)
	}))
	defer sink.Close()
	recs := brokertest.Records("payments.refunds", 1, 0)
	recs[0].Key, recs[0].Type = "tenant-a", "refund.requested"
	recs[0].Headers["tenant"] = "a"
	if err := publisher(t, sink.URL, webhook.PublisherConfig{}).Publish(context.Background(), recs); err != nil {
		t.Fatal(err)
	}

	rcv := newReceiver(t)
	var got []postbox.Message
	srv := receiving(t, rcv, func(ctx context.Context, d *broker.Delivery) {
		got = append(got, d.Message)
		_ = d.Ack(ctx)
	})
	replay := func(change func(h http.Header)) (int, string) {
		t.Helper()
		h := captured.Header.Clone()
		if change != nil {
			change(h)
		}
		req, _ := http.NewRequest(http.MethodPost, srv.URL, strings.NewReader(string(capturedBody)))
		req.Header = h
		resp, err := client(t).Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		return resp.StatusCode, string(must(io.ReadAll(resp.Body)))
	}
	for name, change := range map[string]func(h http.Header){
		"topic":                func(h http.Header) { h.Set(webhook.HeaderTopic, "payments.payouts") },
		"type":                 func(h http.Header) { h.Set("Ce-Type", "payout.approved") },
		"key":                  func(h http.Header) { h.Set("Ce-Partitionkey", "tenant-b"); h.Set("Ce-Subject", "tenant-b") },
		"user header":          func(h http.Header) { h.Set("Tenant", "b") },
		"an added CloudEvent":  func(h http.Header) { h.Set("Ce-Dataschema", "https://evil.example/schema") },
		"an added user header": func(h http.Header) { h.Set("Role", "admin"); h.Set(webhook.HeaderHeaders, "role,tenant") },
		"a second topic value": func(h http.Header) {
			h[webhook.HeaderTopic] = append([]string{"payments.payouts"}, h[webhook.HeaderTopic]...)
		},
		"the header signature removed": func(h http.Header) { h.Del(webhook.HeaderSignedHeaders) },
	} {
		if status, msg := replay(change); status != http.StatusUnauthorized {
			t.Errorf("replay with %s changed: %d %q, want 401", name, status, msg)
		}
	}
	if len(got) != 0 {
		t.Fatalf("the handler received %d tampered messages: %+v", len(got), got)
	}
	if status, msg := replay(nil); status != http.StatusNoContent || len(got) != 1 || got[0].Topic != "payments.refunds" ||
		got[0].Key != "tenant-a" || got[0].Headers["tenant"] != "a" {
		t.Fatalf("the captured request as it was: %d %q, handler got %+v", status, msg, got)
	}

	// A Verifier for Standard Webhooks senders accepts requests without the header signature, and still checks
	// one that is present.
	std := &webhook.Verifier{Secrets: []string{testSecret}, AllowUnsignedHeaders: true}
	h := captured.Header.Clone()
	h.Del(webhook.HeaderSignedHeaders)
	if err := std.Verify(h, capturedBody); err != nil {
		t.Fatalf("AllowUnsignedHeaders, no %s: %v", webhook.HeaderSignedHeaders, err)
	}
	h = captured.Header.Clone()
	h.Set(webhook.HeaderTopic, "payments.payouts")
	if err := std.Verify(h, capturedBody); !errors.Is(err, webhook.ErrSignatureFailed) {
		t.Fatalf("AllowUnsignedHeaders, a present header signature over a changed topic: %v, want ErrSignatureFailed", err)
	}
}

func must[T any](v T, err error) T {
	if err != nil {
		panic(err)
	}
	return v
}

// TestSecretsRefused: an empty or short secret (an unset environment variable, a placeholder) is refused by the
// publisher, the receiver and the verifier, instead of signing with a key anyone can guess.
func TestSecretsRefused(t *testing.T) {
	for name, secret := range map[string]string{
		"empty":            "",
		"short":            "changeme",
		"23 bytes":         strings.Repeat("k", webhook.MinSecretBytes-1),
		"short whsec_":     webhook.FormatSecret([]byte("short")),
		"empty whsec_":     "whsec_",
		"malformed whsec_": "whsec_not*base64!",
	} {
		if _, err := webhook.NewPublisher(&webhook.PublisherConfig{URL: "http://x/in", Secret: secret}); !errors.Is(err, postbox.ErrInvalidConfig) ||
			!errors.Is(err, webhook.ErrInvalidSecret) || !strings.Contains(err.Error(), "PublisherConfig.Secret") {
			t.Errorf("%s: NewPublisher = %v; want ErrInvalidConfig and ErrInvalidSecret naming PublisherConfig.Secret", name, err)
		}
		if _, err := webhook.NewReceiver(&webhook.ReceiverConfig{Verifier: webhook.Verifier{Secrets: []string{testSecret, secret}}}); !errors.Is(err, postbox.ErrInvalidConfig) ||
			!strings.Contains(err.Error(), "Secrets[1]") {
			t.Errorf("%s: NewReceiver = %v; want ErrInvalidConfig naming Verifier.Secrets[1]", name, err)
		}
		v := &webhook.Verifier{Secrets: []string{secret}}
		if err := v.Verify(signed([]byte(secret), "m1", time.Now(), "body"), []byte("body")); !errors.Is(err, webhook.ErrInvalidSecret) {
			t.Errorf("%s: Verify with a request signed by that secret = %v; want ErrInvalidSecret", name, err)
		}
		if _, err := webhook.ParseSecret(secret); err == nil ||
			len(secret) > len(webhook.SecretPrefix) && strings.Contains(err.Error(), strings.TrimPrefix(secret, webhook.SecretPrefix)) {
			t.Errorf("%s: ParseSecret = %v; want an error that does not quote the secret", name, err)
		}
	}
}

// TestTopicInURL: {topic} in the URL stays one path segment or one query value whatever the topic holds, and
// a topic that would name another folder (".", "..") is refused.
func TestTopicInURL(t *testing.T) {
	type seen struct{ path, rawQuery, t string }
	got := make(chan seen, 1)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		got <- seen{r.URL.EscapedPath(), r.URL.RawQuery, r.URL.Query().Get("t")}
		w.WriteHeader(http.StatusNoContent)
	}))
	defer srv.Close()
	pub := publisher(t, srv.URL+"/in/{topic}/hook?t={topic}&v=1", webhook.PublisherConfig{})
	for _, tc := range []struct{ topic, path string }{
		{"orders", "/in/orders/hook"},
		{"a&admin=1", "/in/a&admin=1/hook"},
		{"a/../../admin", "/in/a%2F..%2F..%2Fadmin/hook"},
		{"a?b#c", "/in/a%3Fb%23c/hook"},
		{"...", "/in/.../hook"},
		{"%2e%2e", "/in/%252e%252e/hook"},
	} {
		if err := pub.Publish(context.Background(), brokertest.Records(tc.topic, 1, 0)); err != nil {
			t.Fatalf("topic %q: %v", tc.topic, err)
		}
		s := <-got
		if s.path != tc.path || s.t != tc.topic || !strings.HasSuffix(s.rawQuery, "&v=1") || strings.Count(s.rawQuery, "&") != 1 {
			t.Errorf("topic %q: path %q query %q; want path %q and the topic as the single value of t", tc.topic, s.path, s.rawQuery, tc.path)
		}
	}
	for _, topic := range []string{".", ".."} {
		recs := brokertest.Records("t", 1, 0)
		recs[0].Topic = topic
		if err := pub.Publish(context.Background(), recs); !postbox.IsPermanent(err) || !strings.Contains(err.Error(), "{topic}") {
			t.Errorf("topic %q: Publish = %v; want a permanent error", topic, err)
		}
	}
	select {
	case s := <-got:
		t.Fatalf("a refused topic reached the server at %q", s.path)
	default:
	}
}

// TestSecretMismatchIsNamed: a receiver that refuses the signature (400, 401, 403) parks the message as dead;
// the error says the likely cause, so an operator looks at the secrets first.
func TestSecretMismatchIsNamed(t *testing.T) {
	rcv, err := webhook.NewReceiver(&webhook.ReceiverConfig{Logger: quiet(),
		Verifier: webhook.Verifier{Secrets: []string{"another-secret-0123456789-abcdef"}}})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(rcv)
	defer srv.Close()
	err = publisher(t, srv.URL, webhook.PublisherConfig{Logger: quiet()}).Publish(context.Background(), brokertest.Records("t", 1, 0))
	if !postbox.IsPermanent(err) || !strings.Contains(err.Error(), "401") || !strings.Contains(err.Error(), "secret differs") {
		t.Fatalf("Publish to a receiver with another secret = %v; want a permanent 401 naming a secret mismatch", err)
	}
}

// TestResponseIsPrintable: a receiver's answer becomes the message's last error, which operators print: what a
// terminal would interpret (escape sequences, bidirectional overrides, invalid UTF-8) is replaced.
func TestResponseIsPrintable(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(http.StatusUnprocessableEntity)
		_, _ = io.WriteString(w, "bad \x1b]0;owned\x07\x1b[2J \u202egnp.exe\xff order ü")
	}))
	defer srv.Close()
	err := publisher(t, srv.URL, webhook.PublisherConfig{}).Publish(context.Background(), brokertest.Records("t", 1, 0))
	if err == nil || strings.ContainsAny(err.Error(), "\x1b\x07\u202e") || !utf8.ValidString(err.Error()) || !strings.Contains(err.Error(), "order ü") {
		t.Fatalf("Publish = %q; want the answer without control characters, its text kept", err)
	}
}

func TestPublishAfterClose(t *testing.T) {
	pub := publisher(t, "http://127.0.0.1:1/in", webhook.PublisherConfig{})
	if err := pub.Close(); err != nil {
		t.Fatal(err)
	}
	if err := pub.Publish(context.Background(), brokertest.Records("t", 1, 0)); !errors.Is(err, webhook.ErrClosed) {
		t.Fatalf("Publish after Close = %v, want ErrClosed", err)
	}
}

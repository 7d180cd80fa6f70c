package webhook_test

import (
	"encoding/base64"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/postbox-go/postbox/broker/webhook"
)

// TestSignMatchesStandardWebhooks checks the published Standard Webhooks test vector, which is what lets
// receivers verify with that specification's libraries.
func TestSignMatchesStandardWebhooks(t *testing.T) {
	key, _ := base64.StdEncoding.DecodeString("MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw") // whsec_MfKQ…
	got := webhook.Sign(key, "msg_p5jXN8AQM9LWM0D4loKWxJek", 1614265330, []byte(`{"test": 2432232314}`))
	if want := "v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE="; got != want {
		t.Fatalf("Sign = %s, want %s", got, want)
	}
}

var now = time.Unix(1_700_000_000, 0)

// signed returns the signature headers of a request with no other header.
func signed(key []byte, id string, ts time.Time, body string) http.Header {
	return signRequest(key, http.Header{}, id, ts, body)
}

// signRequest adds to h the signature headers a Postbox publisher sends, and returns it.
func signRequest(key []byte, h http.Header, id string, ts time.Time, body string) http.Header {
	h.Set(webhook.HeaderID, id)
	h.Set(webhook.HeaderTimestamp, strconv.FormatInt(ts.Unix(), 10))
	h.Set(webhook.HeaderSignature, webhook.Sign(key, id, ts.Unix(), []byte(body)))
	h.Set(webhook.HeaderSignedHeaders, webhook.SignHeaders(key, id, ts.Unix(), h))
	return h
}

func TestVerify(t *testing.T) {
	old, current := []byte("old-secret-0123456789-abcdef"), []byte("new-secret-0123456789-abcdef")
	v := &webhook.Verifier{Secrets: []string{string(current), webhook.FormatSecret(old)}, MaxSkew: time.Minute, Now: func() time.Time { return now }}
	with := func(h http.Header, name, value string) http.Header {
		h = h.Clone()
		if value == "" {
			h.Del(name)
		} else {
			h.Set(name, value)
		}
		return h
	}
	good := signed(current, "id-1", now, "body")
	for name, tc := range map[string]struct {
		h    http.Header
		body string
		want error
	}{
		"valid":                      {good, "body", nil},
		"old secret during rotation": {signed(old, "id-1", now, "body"), "body", nil},
		"several signatures, one valid": {with(good, webhook.HeaderSignature,
			"v1,AAAA v2,whatever "+good.Get(webhook.HeaderSignature)), "body", nil},
		"within skew":            {signed(current, "id-1", now.Add(-59*time.Second), "body"), "body", nil},
		"tampered body":          {good, "b0dy", webhook.ErrSignatureFailed},
		"other message ID":       {with(good, webhook.HeaderID, "id-2"), "body", webhook.ErrSignatureFailed},
		"other timestamp":        {with(good, webhook.HeaderTimestamp, strconv.FormatInt(now.Unix()+1, 10)), "body", webhook.ErrSignatureFailed},
		"unknown secret":         {signed([]byte("guess-guess-guess-guess-guess"), "id-1", now, "body"), "body", webhook.ErrSignatureFailed},
		"not base64":             {with(good, webhook.HeaderSignature, "v1,!!!"), "body", webhook.ErrSignatureFailed},
		"too old":                {signed(current, "id-1", now.Add(-2*time.Minute), "body"), "body", webhook.ErrClockSkew},
		"from the future":        {signed(current, "id-1", now.Add(2*time.Minute), "body"), "body", webhook.ErrClockSkew},
		"timestamp not a number": {with(good, webhook.HeaderTimestamp, "yesterday"), "body", webhook.ErrBadTimestamp},
		"no signature":           {with(good, webhook.HeaderSignature, ""), "body", webhook.ErrUnsigned},
		"no timestamp":           {with(good, webhook.HeaderTimestamp, ""), "body", webhook.ErrUnsigned},
		"no ID":                  {with(good, webhook.HeaderID, ""), "body", webhook.ErrUnsigned},
	} {
		t.Run(name, func(t *testing.T) {
			err := v.Verify(tc.h, []byte(tc.body))
			if !errors.Is(err, tc.want) || (tc.want == nil) != (err == nil) {
				t.Fatalf("Verify = %v, want %v", err, tc.want)
			}
		})
	}
	if err := (&webhook.Verifier{}).Verify(good, []byte("body")); !errors.Is(err, webhook.ErrSignatureFailed) ||
		!strings.Contains(err.Error(), "Secrets") {
		t.Fatalf("Verify without secrets = %v; want a refusal that names Verifier.Secrets", err)
	}
}

func TestMiddleware(t *testing.T) {
	secret := testKey
	v := &webhook.Verifier{Secrets: []string{testSecret}, MaxBodyBytes: 10}
	var got string
	srv := httptest.NewServer(v.Middleware(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		got = string(b)
	})))
	defer srv.Close()
	c := client(t)
	post := func(h http.Header, body string) (int, string) {
		t.Helper()
		return send(t, c, http.MethodPost, srv.URL, h, body)
	}
	if status, _ := post(signed(secret, "m", time.Now(), "hello"), "hello"); status != 200 || got != "hello" {
		t.Fatalf("valid request: status %d, handler read %q", status, got)
	}
	if status, msg := post(signed(secret, "m", time.Now(), "hello"), "HELLO"); status != 401 || !strings.Contains(msg, "signature does not match") {
		t.Fatalf("tampered request: %d %q, want 401 saying the signature does not match", status, msg)
	}
	if status, msg := post(signed(secret, "m", time.Now().Add(-time.Hour), "hello"), "hello"); status != 401 || !strings.Contains(msg, "clock skew") {
		t.Fatalf("stale request: %d %q, want 401 naming the clock skew", status, msg)
	}
	if status, _ := post(signed(secret, "m", time.Now(), "hello world!"), "hello world!"); status != 413 {
		t.Fatalf("body over MaxBodyBytes: status %d, want 413", status)
	}
}

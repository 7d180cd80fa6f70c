package webhook

import (
	"bytes"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// Header names of the signature scheme (Standard Webhooks) and of the Postbox additions.
const (
	HeaderID        = "webhook-id"
	HeaderTimestamp = "webhook-timestamp"
	HeaderSignature = "webhook-signature"
	HeaderTopic     = "Postbox-Topic"
	HeaderAttempt   = "Postbox-Attempt"
	HeaderHeaders   = "Postbox-Headers"
)

// Defaults for Verifier.
const (
	DefaultMaxSkew      = 5 * time.Minute
	DefaultMaxBodyBytes = 1 << 20
)

// Errors Verify returns (wrapped, with details). Each one means the request must be refused.
var (
	ErrUnsigned        = errors.New("webhook: request is not signed")
	ErrBadTimestamp    = errors.New("webhook: timestamp header is not Unix seconds")
	ErrClockSkew       = errors.New("webhook: timestamp outside the allowed clock skew")
	ErrSignatureFailed = errors.New("webhook: signature does not match")
)

// Sign returns the webhook-signature header value for a request: "v1," and the base64 HMAC-SHA256 of
// id + "." + timestamp + "." + body under secret.
func Sign(secret []byte, id string, timestamp int64, body []byte) string {
	return "v1," + base64.StdEncoding.EncodeToString(mac(secret, id, timestamp, body))
}

func mac(secret []byte, id string, timestamp int64, body []byte) []byte {
	m := hmac.New(sha256.New, secret)
	m.Write([]byte(id))
	m.Write([]byte{'.'})
	m.Write(strconv.AppendInt(nil, timestamp, 10))
	m.Write([]byte{'.'})
	m.Write(body)
	return m.Sum(nil)
}

// Verifier checks webhook signatures. The zero value refuses everything: set Secrets.
type Verifier struct {
	// Secrets are the accepted signing keys. A request verifies when any signature it carries matches any
	// secret, so during a key rotation list both the new and the old key.
	Secrets [][]byte
	// MaxSkew is how far the request's timestamp may be from now, either way. It bounds how long a captured
	// request can be replayed. Default: DefaultMaxSkew.
	MaxSkew time.Duration
	// MaxBodyBytes limits the body Middleware reads. Default: DefaultMaxBodyBytes.
	MaxBodyBytes int64
	// Now tells the time. Default: time.Now.
	Now func() time.Time
}

// Verify checks the signature headers of a request with body against the secrets. It compares signatures in
// constant time and returns nil, or an error wrapping ErrUnsigned, ErrBadTimestamp, ErrClockSkew or
// ErrSignatureFailed that says what is wrong.
func (v *Verifier) Verify(h http.Header, body []byte) error {
	if len(v.Secrets) == 0 {
		return fmt.Errorf("%w: the verifier has no secrets configured; set Verifier.Secrets", ErrSignatureFailed)
	}
	id, ts, sigs := h.Get(HeaderID), h.Get(HeaderTimestamp), h.Get(HeaderSignature)
	var missing []string
	for name, v := range map[string]string{HeaderID: id, HeaderTimestamp: ts, HeaderSignature: sigs} {
		if v == "" {
			missing = append(missing, name)
		}
	}
	if len(missing) > 0 {
		return fmt.Errorf("%w: missing header %s", ErrUnsigned, strings.Join(missing, ", "))
	}
	sec, err := strconv.ParseInt(ts, 10, 64)
	if err != nil {
		return fmt.Errorf("%w: %s is %q", ErrBadTimestamp, HeaderTimestamp, ts)
	}
	now := time.Now
	if v.Now != nil {
		now = v.Now
	}
	skew := v.MaxSkew
	if skew <= 0 {
		skew = DefaultMaxSkew
	}
	if d := now().Sub(time.Unix(sec, 0)); d > skew || d < -skew {
		return fmt.Errorf("%w: signed at %s, %v from this server's clock (limit %v); check both clocks, or the request is a replay",
			ErrClockSkew, time.Unix(sec, 0).UTC().Format(time.RFC3339), d.Round(time.Second), skew)
	}
	matched := false
	for _, sig := range strings.Fields(sigs) {
		version, b64, ok := strings.Cut(sig, ",")
		if !ok || version != "v1" {
			continue
		}
		got, err := base64.StdEncoding.DecodeString(b64)
		if err != nil {
			continue
		}
		for _, secret := range v.Secrets {
			// Check every pair: stopping at the first match would tell an attacker which secret matched.
			if hmac.Equal(got, mac(secret, id, sec, body)) {
				matched = true
			}
		}
	}
	if !matched {
		return fmt.Errorf("%w: no v1 signature in %s matches the body under any configured secret", ErrSignatureFailed, HeaderSignature)
	}
	return nil
}

// readBody reads at most max bytes of r's body. On failure it returns the status to answer.
func readBody(w http.ResponseWriter, r *http.Request, max int64) ([]byte, int, error) {
	if max <= 0 {
		max = DefaultMaxBodyBytes
	}
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, max))
	if err != nil {
		var tooBig *http.MaxBytesError
		if errors.As(err, &tooBig) {
			return nil, http.StatusRequestEntityTooLarge, fmt.Errorf("webhook: body over %d bytes (Verifier.MaxBodyBytes)", max)
		}
		return nil, http.StatusBadRequest, fmt.Errorf("webhook: read body: %w", err)
	}
	return body, 0, nil
}

// Middleware returns a handler that verifies each request before passing it to next, with the body restored.
// Requests that fail get 401 Unauthorized (413 when the body is too large) and the reason in plain text, which
// the sender records as the message's last error.
func (v *Verifier) Middleware(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, status, err := readBody(w, r, v.MaxBodyBytes)
		if err != nil {
			http.Error(w, err.Error(), status)
			return
		}
		if err := v.Verify(r.Header, body); err != nil {
			http.Error(w, err.Error(), http.StatusUnauthorized)
			return
		}
		r.Body = io.NopCloser(bytes.NewReader(body))
		next.ServeHTTP(w, r)
	})
}

package webhook

import (
	"bytes"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"fmt"
	"hash"
	"io"
	"net/http"
	"sort"
	"strconv"
	"strings"
	"time"
)

// Header names of the signature scheme (Standard Webhooks) and of the Postbox additions.
const (
	HeaderID        = "webhook-id"
	HeaderTimestamp = "webhook-timestamp"
	HeaderSignature = "webhook-signature"
	// HeaderSignedHeaders carries the signature over the headers a Postbox receiver trusts (see SignHeaders).
	// Standard Webhooks receivers ignore it; Verifier and Receiver require it unless
	// Verifier.AllowUnsignedHeaders is set.
	HeaderSignedHeaders = "Postbox-Signature"
	HeaderTopic         = "Postbox-Topic"
	HeaderAttempt       = "Postbox-Attempt"
	HeaderHeaders       = "Postbox-Headers"
)

// Defaults and limits for Verifier.
const (
	DefaultMaxSkew      = 5 * time.Minute
	DefaultMaxBodyBytes = 1 << 20
	// MaxSignatures is the most signatures one signature header may carry; a request with more is refused
	// before any HMAC is computed. Senders list one per key they sign with, so a handful covers any rotation.
	MaxSignatures = 8
)

// Errors Verify returns (wrapped, with details). Each one means the request must be refused.
var (
	ErrUnsigned        = errors.New("webhook: request is not signed")
	ErrBadTimestamp    = errors.New("webhook: timestamp header is not Unix seconds")
	ErrClockSkew       = errors.New("webhook: timestamp outside the allowed clock skew")
	ErrSignatureFailed = errors.New("webhook: signature does not match")
	ErrBodyTooLarge    = errors.New("webhook: body too large")
)

// newMAC is the one place HMACs are made, so that tests can count them.
var newMAC = func(key []byte) hash.Hash { return hmac.New(sha256.New, key) }

// Sign returns the webhook-signature header value for a request: "v1," and the base64 HMAC-SHA256 of
// id + "." + timestamp + "." + body under key, as Standard Webhooks defines it. key is the decoded key (see
// ParseSecret), not the whsec_ text.
func Sign(key []byte, id string, timestamp int64, body []byte) string {
	return "v1," + base64.StdEncoding.EncodeToString(mac(key, id, timestamp, body))
}

// SignHeaders returns the Postbox-Signature header value for a request with headers h: "v1," and the base64
// HMAC-SHA256 under key of id + "." + timestamp + "." + the canonical form of the headers a receiver trusts:
//
//   - the headers signed are every ce-* header, Postbox-Topic, Postbox-Attempt, Postbox-Headers, and each
//     header Postbox-Headers names; never webhook-* or Postbox-Signature;
//   - each value becomes one line "name:value\n", the name in lower case, the value with its leading and
//     trailing spaces and tabs removed (as HTTP servers do);
//   - lines are sorted by name; the values of one name keep their order.
//
// Set every other header of the request before calling it.
func SignHeaders(key []byte, id string, timestamp int64, h http.Header) string {
	return "v1," + base64.StdEncoding.EncodeToString(mac(key, id, timestamp, canonicalHeaders(h)))
}

func mac(key []byte, id string, timestamp int64, content []byte) []byte {
	m := newMAC(key)
	m.Write([]byte(id))
	m.Write([]byte{'.'})
	m.Write(strconv.AppendInt(nil, timestamp, 10))
	m.Write([]byte{'.'})
	m.Write(content)
	return m.Sum(nil)
}

// canonicalHeaders is the signed form of the headers a receiver reads (see SignHeaders). Names are matched
// without regard to case, since a sender may write them in any case and a server canonicalises them.
func canonicalHeaders(h http.Header) []byte {
	listed := map[string]bool{}
	for k, vs := range h {
		if strings.EqualFold(k, HeaderHeaders) {
			for _, v := range vs {
				for _, name := range strings.Split(v, ",") {
					listed[strings.ToLower(strings.Trim(name, " \t"))] = true
				}
			}
		}
	}
	type entry struct {
		name, key string
		values    []string
	}
	var signed []entry
	for k, vs := range h {
		name := strings.ToLower(k)
		switch {
		case strings.HasPrefix(name, "webhook-"), name == "postbox-signature":
			continue
		case strings.HasPrefix(name, "ce-"), name == "postbox-topic", name == "postbox-attempt", name == "postbox-headers", listed[name]:
			signed = append(signed, entry{name, k, vs})
		}
	}
	sort.Slice(signed, func(i, j int) bool {
		if signed[i].name != signed[j].name {
			return signed[i].name < signed[j].name
		}
		return signed[i].key < signed[j].key
	})
	var b []byte
	for _, e := range signed {
		for _, v := range e.values {
			b = append(b, e.name...)
			b = append(b, ':')
			b = append(b, strings.Trim(v, " \t")...)
			b = append(b, '\n')
		}
	}
	return b
}

// parseSignatures returns the well-formed v1 signatures of a signature header: space-separated "v1,<base64>"
// entries, each the base64 of 32 bytes. Other versions and malformed or empty entries are skipped; more than
// MaxSignatures entries is an error. It costs one pass over the header and no HMAC.
func parseSignatures(header string) ([][]byte, error) {
	var sigs [][]byte
	n := 0
	for rest := header; rest != ""; {
		var entry string
		entry, rest, _ = strings.Cut(rest, " ")
		if entry == "" {
			continue
		}
		if n++; n > MaxSignatures {
			return nil, fmt.Errorf("more than %d signatures; a sender needs one per key", MaxSignatures)
		}
		b64, ok := strings.CutPrefix(entry, "v1,")
		if !ok || len(b64) != base64.StdEncoding.EncodedLen(sha256.Size) {
			continue
		}
		if sig, err := base64.StdEncoding.DecodeString(b64); err == nil {
			sigs = append(sigs, sig)
		}
	}
	return sigs, nil
}

// Verifier checks webhook signatures. The zero value refuses everything: set Secrets.
//
// The work one request costs is bounded before any HMAC is computed: at most MaxSignatures signatures per
// header, a body of at most MaxBodyBytes, and then at most two HMACs per secret (one over the body, one over
// the signed headers), whatever the request carries.
type Verifier struct {
	// Secrets are the accepted secrets, each "whsec_" + base64 key or plain text (see ParseSecret). A request
	// verifies when a signature it carries matches one of them, so during a key rotation list both the new
	// and the old secret.
	Secrets []string
	// AllowUnsignedHeaders accepts requests without a Postbox-Signature header, as Standard Webhooks senders
	// other than Postbox send them. Their body, ID and timestamp are still verified, but their other headers
	// (topic, type, key, user headers) are then not authenticated: anyone who captured one request can replay
	// it within MaxSkew with those changed. A Postbox-Signature that is present is always checked. Receiver
	// ignores this field and always requires it. Default: false.
	AllowUnsignedHeaders bool
	// MaxSkew is how far the request's timestamp may be from now, either way. It bounds how long a captured
	// request can be replayed. Default: DefaultMaxSkew.
	MaxSkew time.Duration
	// MaxBodyBytes limits the body Middleware reads and Verify accepts. Default: DefaultMaxBodyBytes.
	MaxBodyBytes int64
	// Now tells the time. Default: time.Now.
	Now func() time.Time
}

// keys parses the configured secrets.
func (v *Verifier) keys() ([][]byte, error) {
	if len(v.Secrets) == 0 {
		return nil, fmt.Errorf("%w: the verifier has no secrets configured; set Verifier.Secrets", ErrSignatureFailed)
	}
	keys := make([][]byte, len(v.Secrets))
	for i, s := range v.Secrets {
		k, err := ParseSecret(s)
		if err != nil {
			return nil, fmt.Errorf("Verifier.Secrets[%d]: %w", i, err)
		}
		keys[i] = k
	}
	return keys, nil
}

func (v *Verifier) maxBody() int64 {
	if v.MaxBodyBytes <= 0 {
		return DefaultMaxBodyBytes
	}
	return v.MaxBodyBytes
}

// Verify checks the signature headers of a request with body against the secrets. It compares signatures in
// constant time and returns nil, or an error wrapping ErrUnsigned, ErrBadTimestamp, ErrClockSkew,
// ErrSignatureFailed, ErrBodyTooLarge or ErrInvalidSecret (a secret in Secrets is unusable) that says what is
// wrong.
func (v *Verifier) Verify(h http.Header, body []byte) error {
	keys, err := v.keys()
	if err != nil {
		return err
	}
	if max := v.maxBody(); int64(len(body)) > max {
		return fmt.Errorf("%w: %d bytes, over Verifier.MaxBodyBytes (%d)", ErrBodyTooLarge, len(body), max)
	}
	id, ts, sigs, hsigs := h.Get(HeaderID), h.Get(HeaderTimestamp), h.Get(HeaderSignature), h.Get(HeaderSignedHeaders)
	var missing []string
	for _, f := range []struct{ name, value string }{{HeaderID, id}, {HeaderTimestamp, ts}, {HeaderSignature, sigs}} {
		if f.value == "" {
			missing = append(missing, f.name)
		}
	}
	if len(missing) > 0 {
		return fmt.Errorf("%w: missing header %s", ErrUnsigned, strings.Join(missing, ", "))
	}
	if hsigs == "" && !v.AllowUnsignedHeaders {
		return fmt.Errorf("%w: missing header %s, the signature over the topic, type, key and user headers; "+
			"Postbox publishers send it; for another Standard Webhooks sender set Verifier.AllowUnsignedHeaders", ErrUnsigned, HeaderSignedHeaders)
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
	bodySigs, err := parseSignatures(sigs)
	if err != nil {
		return fmt.Errorf("%w: %s has %w", ErrSignatureFailed, HeaderSignature, err)
	}
	if len(bodySigs) == 0 {
		return fmt.Errorf("%w: %s has no well-formed v1 signature (\"v1,\" and the base64 of 32 bytes)", ErrSignatureFailed, HeaderSignature)
	}
	var headerSigs [][]byte
	if hsigs != "" {
		if headerSigs, err = parseSignatures(hsigs); err != nil {
			return fmt.Errorf("%w: %s has %w", ErrSignatureFailed, HeaderSignedHeaders, err)
		}
		if len(headerSigs) == 0 {
			return fmt.Errorf("%w: %s has no well-formed v1 signature (\"v1,\" and the base64 of 32 bytes)", ErrSignatureFailed, HeaderSignedHeaders)
		}
	}

	var canonical []byte
	bodyOK, headersOK := false, false
	for _, key := range keys {
		// Every key is tried: stopping at the first match would tell an attacker which secret matched.
		if !anyEqual(bodySigs, mac(key, id, sec, body)) {
			continue
		}
		bodyOK = true
		if headerSigs == nil {
			headersOK = true
			continue
		}
		if canonical == nil {
			canonical = canonicalHeaders(h)
		}
		if anyEqual(headerSigs, mac(key, id, sec, canonical)) {
			headersOK = true
		}
	}
	switch {
	case !bodyOK:
		return fmt.Errorf("%w: no v1 signature in %s matches the body under any configured secret", ErrSignatureFailed, HeaderSignature)
	case !headersOK:
		return fmt.Errorf("%w: the body verifies but %s does not match the headers: a signed header (topic, ce-*, "+
			"Postbox-Headers or one it names) was changed, added or removed in transit", ErrSignatureFailed, HeaderSignedHeaders)
	}
	return nil
}

// anyEqual compares want with every candidate in constant time.
func anyEqual(candidates [][]byte, want []byte) bool {
	ok := false
	for _, c := range candidates {
		if hmac.Equal(c, want) {
			ok = true
		}
	}
	return ok
}

// readBody reads at most max bytes of r's body. On failure it returns the status to answer.
func readBody(w http.ResponseWriter, r *http.Request, max int64) ([]byte, int, error) {
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, max))
	if err != nil {
		var tooBig *http.MaxBytesError
		if errors.As(err, &tooBig) {
			return nil, http.StatusRequestEntityTooLarge, fmt.Errorf("%w: over %d bytes (Verifier.MaxBodyBytes)", ErrBodyTooLarge, max)
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
		body, status, err := readBody(w, r, v.maxBody())
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

package webhook_test

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/postbox-go/postbox/broker/webhook"
)

// FuzzVerify: a request signed with the secret verifies; changing its body, ID or timestamp makes it fail; and
// whatever signature header arrives, Verify accepts it only when one of its signatures is the true HMAC.
func FuzzVerify(f *testing.F) {
	f.Add([]byte("secret-secret-secret-secret"), "msg_1", int64(0), []byte(`{"a":1}`), "v1,AAAA", uint16(3))
	f.Add([]byte{}, "", int64(-301), []byte{}, "", uint16(0))
	f.Add([]byte("k-k-k-k-k-k-k-k-k-k-k-k-k-k"), "id", int64(299), []byte("body"), "v1,ZZZZ v2,abc v1", uint16(65535))
	f.Fuzz(func(t *testing.T, secret []byte, id string, skew int64, body []byte, sigHeader string, flip uint16) {
		if len(secret) < webhook.MinSecretBytes || strings.HasPrefix(string(secret), webhook.SecretPrefix) || id == "" || strings.ContainsAny(id, "\r\n\x00") || len(strings.TrimSpace(id)) != len(id) {
			return // headers carry no such values; the unsigned cases are TestVerify's
		}
		v := &webhook.Verifier{Secrets: []string{string(secret)}, AllowUnsignedHeaders: true, MaxSkew: 5 * time.Minute, Now: func() time.Time { return now }}
		ts := now.Unix() + skew%600
		h := http.Header{}
		h.Set(webhook.HeaderID, id)
		h.Set(webhook.HeaderTimestamp, strconv.FormatInt(ts, 10))
		h.Set(webhook.HeaderSignature, webhook.Sign(secret, id, ts, body))
		err := v.Verify(h, body)
		inSkew := ts >= now.Unix()-300 && ts <= now.Unix()+300
		if inSkew != (err == nil) {
			t.Fatalf("signed request %d s from now: Verify = %v", ts-now.Unix(), err)
		}
		if !inSkew {
			if !errors.Is(err, webhook.ErrClockSkew) {
				t.Fatalf("out of skew: %v, want ErrClockSkew", err)
			}
			return
		}
		if len(body) > 0 {
			tampered := append([]byte(nil), body...)
			tampered[int(flip)%len(tampered)] ^= 1 << (flip % 8)
			if err := v.Verify(h, tampered); !errors.Is(err, webhook.ErrSignatureFailed) {
				t.Fatalf("a changed body verified: %v", err)
			}
		}
		renamed := h.Clone()
		renamed.Set(webhook.HeaderID, id+"x")
		if err := v.Verify(renamed, body); !errors.Is(err, webhook.ErrSignatureFailed) {
			t.Fatalf("a changed ID verified: %v", err)
		}
		moved := h.Clone()
		moved.Set(webhook.HeaderTimestamp, strconv.FormatInt(ts+1, 10))
		if ts+1 <= now.Unix()+300 {
			if err := v.Verify(moved, body); !errors.Is(err, webhook.ErrSignatureFailed) {
				t.Fatalf("a changed timestamp verified: %v", err)
			}
		}

		forged := h.Clone()
		forged.Set(webhook.HeaderSignature, sigHeader)
		if err := v.Verify(forged, body); err == nil {
			m := hmac.New(sha256.New, secret)
			m.Write([]byte(id + "." + strconv.FormatInt(ts, 10) + "."))
			m.Write(body)
			want := m.Sum(nil)
			ok := false
			for _, sig := range strings.Fields(sigHeader) {
				if b64, found := strings.CutPrefix(sig, "v1,"); found {
					if got, err := base64.StdEncoding.DecodeString(b64); err == nil && hmac.Equal(got, want) {
						ok = true
					}
				}
			}
			if !ok {
				t.Fatalf("signature header %q verified without the true HMAC", sigHeader)
			}
		}
	})
}

// FuzzVerifierHeaders: whatever the signature headers and the timestamp hold, Verify never panics, computes at
// most two HMACs per secret, and accepts a request only when its webhook-signature holds the true body
// signature and its Postbox-Signature the true headers signature.
func FuzzVerifierHeaders(f *testing.F) {
	f.Add("v1,AAAA", "", "1700000000", "orders")
	f.Add("v1, v1, v1,", "v1,", "1700000000", "")
	f.Add("v1,"+strings.Repeat("A", 43)+"= v2,x", "v1,"+strings.Repeat("A", 43)+"=", "+1700000000", "a,b")
	f.Add(strings.Repeat(" ", 100)+"v1,x", "v0,", "17e8", "x")
	f.Add("TRUE", "TRUE", "1700000000", "orders")
	f.Fuzz(func(t *testing.T, sigHeader, headersSig, ts, topic string) {
		secrets := []string{testSecret, webhook.FormatSecret([]byte("fuzz-second-secret-0123456789"))}
		v := &webhook.Verifier{Secrets: secrets, Now: func() time.Time { return now }}
		body := []byte(`{"n":1}`)
		h := http.Header{}
		h.Set(webhook.HeaderTopic, topic)
		h.Set(webhook.HeaderID, "m1")
		h.Set(webhook.HeaderTimestamp, ts)
		sec, tsErr := strconv.ParseInt(ts, 10, 64)
		trueBody := webhook.Sign(testKey, "m1", sec, body)
		trueHeaders := webhook.SignHeaders(testKey, "m1", sec, h)
		// "TRUE" stands for the true signature, so that the accepting paths are explored too.
		h.Set(webhook.HeaderSignature, strings.ReplaceAll(sigHeader, "TRUE", trueBody))
		h.Set(webhook.HeaderSignedHeaders, strings.ReplaceAll(headersSig, "TRUE", trueHeaders))
		macs := webhook.CountMACs(t)
		err := v.Verify(h, body)
		if n := macs.Load(); n > int64(2*len(secrets)) {
			t.Fatalf("Verify computed %d HMACs for %d secrets", n, len(secrets))
		}
		if err != nil {
			return
		}
		if tsErr != nil {
			t.Fatalf("accepted timestamp %q", ts)
		}
		has := func(header, want string) bool {
			for _, s := range strings.Fields(header) {
				if s == want {
					return true
				}
			}
			return false
		}
		if !has(h.Get(webhook.HeaderSignature), trueBody) || !has(h.Get(webhook.HeaderSignedHeaders), trueHeaders) {
			t.Fatalf("accepted %q / %q without the true signatures", h.Get(webhook.HeaderSignature), h.Get(webhook.HeaderSignedHeaders))
		}
	})
}

package webhook_test

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/postbox-go/postbox/broker/webhook"
)

// TestVerifyWorkIsBounded: however many signatures a request carries, and whatever they are, Verify computes at
// most two HMACs per secret (one over the body, one over the signed headers), and none at all when no
// signature is well formed. Without the bound, each signature cost a full HMAC of the body per secret, so one
// request with thousands of signatures kept a core busy before any authentication.
func TestVerifyWorkIsBounded(t *testing.T) {
	secrets := []string{testSecret, "second-secret-0123456789-abcdef"}
	v := &webhook.Verifier{Secrets: secrets}
	body := strings.Repeat("x", 1<<20)
	good := signed(testKey, "m1", time.Now(), body)
	valid := good.Get(webhook.HeaderSignature)
	forged := strings.TrimSuffix(webhook.Sign([]byte("forged-forged-forged-forged"), "m1", 0, nil), "=") + "A="
	for name, tc := range map[string]struct {
		sigs    string
		maxMACs int64
		ok      bool
	}{
		"valid":                    {valid, 4, true},
		"empty signatures":         {strings.Repeat("v1, ", 1000), 0, false},
		"empty, then valid":        {strings.Repeat("v1, ", 1000) + valid, 0, false},
		"a handful, one valid":     {strings.Repeat(forged+" ", webhook.MaxSignatures-1) + valid, 4, true},
		"well-formed forgeries":    {strings.Repeat(forged+" ", 1000), 0, false},
		"a handful of forgeries":   {strings.Repeat(forged+" ", webhook.MaxSignatures), 2, false},
		"other versions":           {strings.Repeat("v2,abc ", 5000), 0, false},
		"one huge signature":       {"v1," + strings.Repeat("A", 200_000), 0, false},
		"spaces between":           {strings.Repeat(" ", 100_000) + valid, 4, true},
		"just over the limit":      {strings.Repeat(forged+" ", webhook.MaxSignatures) + valid, 0, false},
		"empty signature is alone": {"v1,", 0, false},
	} {
		t.Run(name, func(t *testing.T) {
			macs := webhook.CountMACs(t)
			h := good.Clone()
			h.Set(webhook.HeaderSignature, tc.sigs)
			err := v.Verify(h, []byte(body))
			if (err == nil) != tc.ok {
				t.Fatalf("Verify = %v, want ok=%v", err, tc.ok)
			}
			if n := macs.Load(); n > tc.maxMACs {
				t.Fatalf("Verify computed %d HMACs, want at most %d for %d secrets", n, tc.maxMACs, len(secrets))
			}
		})
	}
	macs := webhook.CountMACs(t)
	if err := v.Verify(good, []byte(body+"y")); !errors.Is(err, webhook.ErrBodyTooLarge) || macs.Load() != 0 {
		t.Fatalf("Verify with a body over MaxBodyBytes = %v after %d HMACs; want ErrBodyTooLarge before any", err, macs.Load())
	}
}

// TestSignedHeaders: a request captured on the wire and replayed within the clock skew with a changed topic,
// type, key or user header is refused, while the Standard Webhooks signature alone would accept it.

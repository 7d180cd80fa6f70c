package webhook_test

import (
	"net/http"
	"strconv"
	"time"

	"github.com/postbox-go/postbox/broker/webhook"
)

// The tests that stay next to the package are those that need its internals (export_test.go) and the fuzzers;
// the rest live in internal/adaptertest/broker/webhook, which holds their helpers too.

// testSecret is a plain-text secret long enough for ParseSecret; testKey is the key it stands for.
const testSecret = "webhook-test-secret-0123456789"

var testKey = []byte(testSecret)

// now is the fixed time the fuzzers sign and verify at.
var now = time.Unix(1_700_000_000, 0)

// signed returns the signature headers a Postbox publisher sends for a request with no other header.
func signed(key []byte, id string, ts time.Time, body string) http.Header {
	h := http.Header{}
	h.Set(webhook.HeaderID, id)
	h.Set(webhook.HeaderTimestamp, strconv.FormatInt(ts.Unix(), 10))
	h.Set(webhook.HeaderSignature, webhook.Sign(key, id, ts.Unix(), []byte(body)))
	h.Set(webhook.HeaderSignedHeaders, webhook.SignHeaders(key, id, ts.Unix(), h))
	return h
}

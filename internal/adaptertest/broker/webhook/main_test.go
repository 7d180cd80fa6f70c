package webhook_test

import (
	"log/slog"
	"net/http"
	"testing"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// testSecret is a plain-text secret long enough for ParseSecret; testKey is the key it stands for.
const testSecret = "webhook-test-secret-0123456789"

var testKey = []byte(testSecret)

func quiet() *slog.Logger { return slog.New(slog.DiscardHandler) }

// client returns an HTTP client whose idle connections close when the test ends.
func client(t *testing.T) *http.Client {
	tr := http.DefaultTransport.(*http.Transport).Clone()
	t.Cleanup(tr.CloseIdleConnections)
	return &http.Client{Transport: tr}
}

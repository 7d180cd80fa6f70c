package webhook_test

import (
	"io"
	"log/slog"
	"net/http"
	"strings"
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

// send makes a method request to url through c with the headers h and body, and returns the response's status code
// and body.
func send(t *testing.T, c *http.Client, method, url string, h http.Header, body string) (int, string) {
	t.Helper()
	req, err := http.NewRequest(method, url, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	for k, v := range h {
		req.Header[k] = v
	}
	resp, err := c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

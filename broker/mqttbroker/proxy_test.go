package mqttbroker_test

import (
	"testing"

	"github.com/postbox-go/postbox/internal/testenv/tcpproxy"
)

// newProxy returns a proxy to target that the test can cut, closed when the test ends: a network failure the test
// controls, without touching a server other packages' tests share.
func newProxy(t *testing.T, target string) *tcpproxy.Proxy {
	t.Helper()
	p, err := tcpproxy.NewProxy(target)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = p.Close() })
	return p
}

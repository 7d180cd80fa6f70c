// Package tcpproxy puts network faults between a client under test and a real server.
package tcpproxy

import (
	"errors"
	"fmt"
	"net"
	"sync"
	"testing"
	"time"
)

// Proxy is a TCP proxy that puts network faults between a client and a server: it forwards every connection
// made to Addr to the target, and on demand stalls the traffic, cuts the open connections or refuses new ones.
// Point the client under test at Addr instead of at the server.
type Proxy struct {
	target string
	ln     net.Listener

	mu      sync.Mutex
	conns   map[*link]struct{}
	resume  chan struct{} // closed while traffic flows; a fresh open channel while stalled
	refuse  bool
	closed  bool
	wg      sync.WaitGroup
	dialTTL time.Duration
}

// link is one proxied connection: the client's side and the server's.
type link struct {
	client, server net.Conn
	done           chan struct{}
	once           sync.Once
}

// close ends both sides at once. An abrupt close (linger 0) sends a reset, as a failed network path or a
// restarted middlebox would, rather than an orderly end of stream.
func (l *link) close() {
	l.once.Do(func() {
		for _, c := range []net.Conn{l.client, l.server} {
			if tc, ok := c.(*net.TCPConn); ok {
				_ = tc.SetLinger(0)
			}
			_ = c.Close()
		}
		close(l.done)
	})
}

// NewProxy listens on a free port of 127.0.0.1 and forwards connections to target (host:port). Close it when
// done.
func NewProxy(target string) (*Proxy, error) {
	if _, _, err := net.SplitHostPort(target); err != nil {
		return nil, fmt.Errorf("chaos: proxy target %q must be host:port: %w", target, err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("chaos: proxy listen: %w", err)
	}
	flowing := make(chan struct{})
	close(flowing)
	p := &Proxy{target: target, ln: ln, conns: map[*link]struct{}{}, resume: flowing, dialTTL: 5 * time.Second}
	p.wg.Add(1)
	go p.accept()
	return p, nil
}

// Start is NewProxy for a test: it fails the test when the proxy cannot start, and closes the proxy when the
// test ends. The proxy is a network failure the test controls, without touching a server other packages' tests
// share.
func Start(t testing.TB, target string) *Proxy {
	t.Helper()
	p, err := NewProxy(target)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = p.Close() })
	return p
}

// Addr is the host:port clients connect to.
func (p *Proxy) Addr() string { return p.ln.Addr().String() }

// Stall holds all traffic, on open and new connections alike, until Resume: bytes already sent wait in the
// proxy and in the kernel's buffers, and the connections stay open, as on a path that silently stops delivering.
func (p *Proxy) Stall() {
	p.mu.Lock()
	defer p.mu.Unlock()
	select {
	case <-p.resume:
		p.resume = make(chan struct{})
	default: // already stalled
	}
}

// Resume lets held and new traffic flow again.
func (p *Proxy) Resume() {
	p.mu.Lock()
	defer p.mu.Unlock()
	select {
	case <-p.resume:
	default:
		close(p.resume)
	}
}

// Cut resets every open connection and returns how many it cut. New connections are accepted as before unless
// Refuse is on.
func (p *Proxy) Cut() int {
	p.mu.Lock()
	links := make([]*link, 0, len(p.conns))
	for l := range p.conns {
		links = append(links, l)
	}
	p.mu.Unlock()
	for _, l := range links {
		l.close()
	}
	return len(links)
}

// Refuse makes the proxy close new connections as soon as it accepts them (on), or forward them again (off),
// as a server that is down or a firewall that rejects would.
func (p *Proxy) Refuse(on bool) {
	p.mu.Lock()
	p.refuse = on
	p.mu.Unlock()
}

// Open returns the number of connections being forwarded.
func (p *Proxy) Open() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return len(p.conns)
}

// Close stops accepting, resets every open connection and waits until no goroutine of the proxy is left.
func (p *Proxy) Close() error {
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		return nil
	}
	p.closed = true
	p.mu.Unlock()
	err := p.ln.Close()
	p.Resume()
	p.Cut()
	p.wg.Wait()
	return err
}

func (p *Proxy) accept() {
	defer p.wg.Done()
	for {
		c, err := p.ln.Accept()
		if err != nil {
			if errors.Is(err, net.ErrClosed) {
				return
			}
			continue // a transient accept error (such as too many open files) must not stop the proxy
		}
		p.mu.Lock()
		refuse, closed := p.refuse, p.closed
		p.mu.Unlock()
		if refuse || closed {
			if tc, ok := c.(*net.TCPConn); ok {
				_ = tc.SetLinger(0)
			}
			_ = c.Close()
			continue
		}
		p.wg.Add(1)
		go p.serve(c)
	}
}

// serve dials the target for client and forwards both ways until either side ends or the link is cut.
func (p *Proxy) serve(client net.Conn) {
	defer p.wg.Done()
	server, err := net.DialTimeout("tcp", p.target, p.dialTTL)
	if err != nil {
		_ = client.Close()
		return
	}
	l := &link{client: client, server: server, done: make(chan struct{})}
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		l.close()
		return
	}
	p.conns[l] = struct{}{}
	p.mu.Unlock()

	var pipes sync.WaitGroup
	pipes.Add(2)
	go func() { defer pipes.Done(); p.pipe(l, server, client) }()
	go func() { defer pipes.Done(); p.pipe(l, client, server) }()
	pipes.Wait()

	p.mu.Lock()
	delete(p.conns, l)
	p.mu.Unlock()
}

// pipe copies src to dst, waiting at each chunk while the proxy is stalled. When either direction ends, the
// whole link is closed: half-open connections would hide the fault from the client.
func (p *Proxy) pipe(l *link, dst, src net.Conn) {
	defer l.close()
	buf := make([]byte, 32<<10)
	for {
		n, rerr := src.Read(buf)
		if n > 0 {
			if !p.wait(l) {
				return
			}
			if _, err := dst.Write(buf[:n]); err != nil {
				return
			}
		}
		if rerr != nil {
			return // EOF or a reset: either way this connection is over
		}
	}
}

// wait blocks while the proxy is stalled and reports whether the link is still open.
func (p *Proxy) wait(l *link) bool {
	p.mu.Lock()
	resume := p.resume
	p.mu.Unlock()
	select {
	case <-resume:
		return true
	case <-l.done:
		return false
	}
}

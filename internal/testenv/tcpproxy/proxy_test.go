package tcpproxy

import (
	"bufio"
	"errors"
	"io"
	"net"
	"os"
	"sync"
	"testing"
	"time"
)

// echoServer echoes every line back until the test ends.
func echoServer(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	t.Cleanup(func() {
		ln.Close()
		wg.Wait()
	})
	wg.Add(1)
	go func() {
		defer wg.Done()
		var conns sync.WaitGroup
		defer conns.Wait()
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			conns.Add(1)
			go func() {
				defer conns.Done()
				defer c.Close()
				_, _ = io.Copy(c, c)
			}()
		}
	}()
	return ln.Addr().String()
}

func roundTrip(c net.Conn, r *bufio.Reader, msg string, timeout time.Duration) (string, error) {
	if _, err := c.Write([]byte(msg + "\n")); err != nil {
		return "", err
	}
	_ = c.SetReadDeadline(time.Now().Add(timeout))
	line, err := r.ReadString('\n')
	return line, err
}

// TestProxy: the proxy forwards, holds traffic while stalled and delivers it on resume, resets open connections
// on a cut, and refuses new ones while told to.
func TestProxy(t *testing.T) {
	p, err := NewProxy(echoServer(t))
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	c, err := net.Dial("tcp", p.Addr())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	r := bufio.NewReader(c)
	if got, err := roundTrip(c, r, "hello", 10*time.Second); err != nil || got != "hello\n" {
		t.Fatalf("through the proxy: %q, %v", got, err)
	}

	p.Stall()
	if got, err := roundTrip(c, r, "held", 300*time.Millisecond); !errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("while stalled the echo came back: %q, %v", got, err)
	}
	p.Resume()
	_ = c.SetReadDeadline(time.Now().Add(10 * time.Second))
	if got, err := r.ReadString('\n'); err != nil || got != "held\n" {
		t.Fatalf("after resume: %q, %v; want the held bytes delivered", got, err)
	}

	if n := p.Cut(); n != 1 {
		t.Fatalf("Cut cut %d connections, want 1", n)
	}
	if _, err := roundTrip(c, r, "gone", 10*time.Second); err == nil {
		t.Fatal("a cut connection still carried traffic")
	}

	p.Refuse(true)
	refused, err := net.Dial("tcp", p.Addr())
	if err == nil {
		_, err = roundTrip(refused, bufio.NewReader(refused), "no", 10*time.Second)
		refused.Close()
	}
	if err == nil {
		t.Fatal("a refused connection carried traffic")
	}
	p.Refuse(false)
	again, err := net.Dial("tcp", p.Addr())
	if err != nil {
		t.Fatal(err)
	}
	defer again.Close()
	if got, err := roundTrip(again, bufio.NewReader(again), "back", 10*time.Second); err != nil || got != "back\n" {
		t.Fatalf("after Refuse(false): %q, %v", got, err)
	}
	if err := p.Close(); err != nil {
		t.Fatal(err)
	}
	if p.Open() != 0 {
		t.Fatalf("%d connections open after Close", p.Open())
	}
}

// TestProxyBadTarget: a target that is not host:port is refused with the reason.
func TestProxyBadTarget(t *testing.T) {
	if _, err := NewProxy("localhost"); err == nil {
		t.Fatal("NewProxy accepted a target without a port")
	}
}

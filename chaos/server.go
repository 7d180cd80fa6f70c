package chaos

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os/exec"
	"sync"
	"syscall"
	"time"
)

// serverProc is the running process of a server the suite starts, stops and starts again on the same port and
// data directory. It is safe for concurrent use.
type serverProc struct {
	name string // for errors: "nats-server", "RabbitMQ"

	mu   sync.Mutex
	cmd  *exec.Cmd
	exit chan struct{} // closed when cmd has exited
}

// start runs cmd, which dies with the suite's process, and waits until addr accepts connections. A server that
// exits first, or is not accepting connections when ctx ends, is killed and reported.
func (p *serverProc) start(ctx context.Context, cmd *exec.Cmd, addr string) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.cmd != nil {
		return fmt.Errorf("chaos: %s is already running", p.name)
	}
	dieWithParent(cmd)
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("chaos: start %s: %w", p.name, err)
	}
	exit := make(chan struct{})
	go func() {
		_ = cmd.Wait()
		close(exit)
	}()
	p.cmd, p.exit = cmd, exit
	if err := awaitPort(ctx, addr, exit); err != nil {
		p.stopLocked(syscall.SIGKILL)
		return fmt.Errorf("chaos: %s on %s: %w", p.name, addr, err)
	}
	return nil
}

// stop sends sig to the server and waits until it has exited. It does nothing when the server is not running.
func (p *serverProc) stop(sig syscall.Signal) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.stopLocked(sig)
}

func (p *serverProc) stopLocked(sig syscall.Signal) {
	if p.cmd == nil {
		return
	}
	_ = p.cmd.Process.Signal(sig)
	<-p.exit
	p.cmd, p.exit = nil, nil
}

// FreePort returns a TCP port of 127.0.0.1 that nothing listened on a moment ago.
func FreePort() (int, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, fmt.Errorf("chaos: find a free port: %w", err)
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port, nil
}

// awaitPort waits until addr accepts a TCP connection, the process exits, or ctx ends.
func awaitPort(ctx context.Context, addr string, exited <-chan struct{}) error {
	t := time.NewTicker(20 * time.Millisecond)
	defer t.Stop()
	for {
		c, err := net.DialTimeout("tcp", addr, time.Second)
		if err == nil {
			return c.Close()
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("not accepting connections: %w", ctx.Err())
		case <-exited:
			return errors.New("exited before accepting connections (see its log)")
		case <-t.C:
		}
	}
}

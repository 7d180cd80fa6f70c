package chaos

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"syscall"
)

// DefaultNATSServer is where the nats-server binary is looked for when POSTBOX_NATS_SERVER is not set and none is
// on the PATH.
const DefaultNATSServer = "/usr/sbin/nats-server"

// NATSServer is a nats-server process of the suite's own, with JetStream storing its files in a directory of its
// own, on a port of its own: scenarios stop and restart it without disturbing the shared server other tests use.
type NATSServer struct {
	bin, dir string
	port     int
	logs     *Tail
	proc     serverProc
}

// NATSBinary returns the nats-server to run: POSTBOX_NATS_SERVER, the one on the PATH, or DefaultNATSServer.
func NATSBinary() (string, error) {
	if b := os.Getenv("POSTBOX_NATS_SERVER"); b != "" {
		return b, nil
	}
	if b, err := exec.LookPath("nats-server"); err == nil {
		return b, nil
	}
	if _, err := os.Stat(DefaultNATSServer); err != nil {
		return "", fmt.Errorf("chaos: no nats-server on the PATH nor at %s; install it or set POSTBOX_NATS_SERVER", DefaultNATSServer)
	}
	return DefaultNATSServer, nil
}

// StartNATS starts a nats-server with JetStream on a free port of 127.0.0.1, storing under dir, and waits until
// it accepts connections. Its output goes to logs (which may be nil). Stop it with Stop or Close.
func StartNATS(ctx context.Context, dir string, logs *Tail) (*NATSServer, error) {
	bin, err := NATSBinary()
	if err != nil {
		return nil, err
	}
	port, err := FreePort()
	if err != nil {
		return nil, err
	}
	s := &NATSServer{bin: bin, dir: dir, port: port, logs: logs, proc: serverProc{name: "nats-server"}}
	if err := s.Start(ctx); err != nil {
		return nil, err
	}
	return s, nil
}

// URL is the server's client URL.
func (s *NATSServer) URL() string { return "nats://" + s.Addr() }

// Addr is the server's host:port.
func (s *NATSServer) Addr() string { return net.JoinHostPort("127.0.0.1", strconv.Itoa(s.port)) }

// Start starts the server on its port and store directory, after a Stop, and waits until it accepts
// connections. JetStream recovers its streams and consumers from the directory.
func (s *NATSServer) Start(ctx context.Context) error {
	cmd := exec.Command(s.bin, "-a", "127.0.0.1", "-p", strconv.Itoa(s.port), "-js", "-sd", filepath.Join(s.dir, "jetstream"))
	if s.logs != nil {
		cmd.Stdout, cmd.Stderr = s.logs, s.logs
	}
	return s.proc.start(ctx, cmd, s.Addr())
}

// Stop sends sig to the server (SIGTERM shuts it down cleanly, SIGKILL crashes it) and waits until it has
// exited.
func (s *NATSServer) Stop(sig syscall.Signal) { s.proc.stop(sig) }

// Close kills the server if it is running.
func (s *NATSServer) Close() { s.Stop(syscall.SIGKILL) }

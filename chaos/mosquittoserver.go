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

// DefaultMosquitto is where the mosquitto binary is looked for when POSTBOX_MOSQUITTO is not set and none is on
// the PATH.
const DefaultMosquitto = "/usr/sbin/mosquitto"

// MosquittoServer is a Mosquitto MQTT server of the suite's own, on a port of its own, with its own configuration
// file and no persistence: scenarios kill and restart it without disturbing the shared server other tests use.
type MosquittoServer struct {
	bin, conf string
	port      int
	logs      *Tail
	proc      serverProc
}

// MosquittoBinary returns the mosquitto to run: POSTBOX_MOSQUITTO, the one on the PATH, or DefaultMosquitto.
func MosquittoBinary() (string, error) {
	if b := os.Getenv("POSTBOX_MOSQUITTO"); b != "" {
		return b, nil
	}
	if b, err := exec.LookPath("mosquitto"); err == nil {
		return b, nil
	}
	if _, err := os.Stat(DefaultMosquitto); err != nil {
		return "", fmt.Errorf("chaos: no mosquitto on the PATH nor at %s; install Mosquitto or set POSTBOX_MOSQUITTO", DefaultMosquitto)
	}
	return DefaultMosquitto, nil
}

// StartMosquitto starts a Mosquitto server on a free port of 127.0.0.1 that anyone may use, with its
// configuration file in dir, and waits until it accepts connections. Its output goes to logs (which may be nil).
// Stop it with Stop or Close.
func StartMosquitto(ctx context.Context, dir string, logs *Tail) (*MosquittoServer, error) {
	bin, err := MosquittoBinary()
	if err != nil {
		return nil, err
	}
	port, err := FreePort()
	if err != nil {
		return nil, err
	}
	s := &MosquittoServer{bin: bin, conf: filepath.Join(dir, "mosquitto.conf"), port: port, logs: logs,
		proc: serverProc{name: "mosquitto"}}
	conf := fmt.Sprintf("listener %d 127.0.0.1\nallow_anonymous true\npersistence false\nlog_dest stderr\nlog_type error\nlog_type warning\n", port)
	if err := os.WriteFile(s.conf, []byte(conf), 0o600); err != nil {
		return nil, fmt.Errorf("chaos: configure mosquitto: %w", err)
	}
	if err := s.Start(ctx); err != nil {
		return nil, err
	}
	return s, nil
}

// URL is the server's mqtt:// URL.
func (s *MosquittoServer) URL() string { return "mqtt://" + s.Addr() }

// Addr is the server's host:port.
func (s *MosquittoServer) Addr() string { return net.JoinHostPort("127.0.0.1", strconv.Itoa(s.port)) }

// Start starts the server on its port, after a Stop, and waits until it accepts connections.
func (s *MosquittoServer) Start(ctx context.Context) error {
	cmd := exec.Command(s.bin, "-c", s.conf)
	if s.logs != nil {
		cmd.Stdout, cmd.Stderr = s.logs, s.logs
	}
	return s.proc.start(ctx, cmd, s.Addr())
}

// Stop sends sig to the server and waits until it has exited.
func (s *MosquittoServer) Stop(sig syscall.Signal) { s.proc.stop(sig) }

// Close kills the server if it is running.
func (s *MosquittoServer) Close() { s.Stop(syscall.SIGKILL) }

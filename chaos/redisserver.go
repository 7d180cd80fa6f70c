package chaos

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"strconv"
	"syscall"
)

// DefaultRedisServer is where the redis-server binary is looked for when POSTBOX_REDIS_SERVER is not set and none
// is on the PATH.
const DefaultRedisServer = "/usr/bin/redis-server"

// RedisServer is a redis-server process of the suite's own, on a port of its own, keeping nothing on disk:
// scenarios kill and restart it without disturbing the shared server other tests use. A restart starts empty,
// which a relay publishing to it does not mind (XADD creates a stream).
type RedisServer struct {
	bin, dir string
	port     int
	logs     *Tail
	proc     serverProc
}

// RedisBinary returns the redis-server to run: POSTBOX_REDIS_SERVER, the one on the PATH, or DefaultRedisServer.
func RedisBinary() (string, error) {
	if b := os.Getenv("POSTBOX_REDIS_SERVER"); b != "" {
		return b, nil
	}
	if b, err := exec.LookPath("redis-server"); err == nil {
		return b, nil
	}
	if _, err := os.Stat(DefaultRedisServer); err != nil {
		return "", fmt.Errorf("chaos: no redis-server on the PATH nor at %s; install Redis or set POSTBOX_REDIS_SERVER", DefaultRedisServer)
	}
	return DefaultRedisServer, nil
}

// StartRedis starts a redis-server on a free port of 127.0.0.1, with dir as its working directory, and waits
// until it accepts connections. Its output goes to logs (which may be nil). Stop it with Stop or Close.
func StartRedis(ctx context.Context, dir string, logs *Tail) (*RedisServer, error) {
	bin, err := RedisBinary()
	if err != nil {
		return nil, err
	}
	port, err := FreePort()
	if err != nil {
		return nil, err
	}
	s := &RedisServer{bin: bin, dir: dir, port: port, logs: logs, proc: serverProc{name: "redis-server"}}
	if err := s.Start(ctx); err != nil {
		return nil, err
	}
	return s, nil
}

// URL is the server's redis:// URL.
func (s *RedisServer) URL() string { return "redis://" + s.Addr() + "/0" }

// Addr is the server's host:port.
func (s *RedisServer) Addr() string { return net.JoinHostPort("127.0.0.1", strconv.Itoa(s.port)) }

// Start starts the server on its port, after a Stop, and waits until it accepts connections.
func (s *RedisServer) Start(ctx context.Context) error {
	cmd := exec.Command(s.bin, "--bind", "127.0.0.1", "--port", strconv.Itoa(s.port), "--dir", s.dir,
		"--save", "", "--appendonly", "no", "--protected-mode", "no")
	if s.logs != nil {
		cmd.Stdout, cmd.Stderr = s.logs, s.logs
	}
	return s.proc.start(ctx, cmd, s.Addr())
}

// Stop sends sig to the server and waits until it has exited.
func (s *RedisServer) Stop(sig syscall.Signal) { s.proc.stop(sig) }

// Close kills the server if it is running.
func (s *RedisServer) Close() { s.Stop(syscall.SIGKILL) }

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

// DefaultRabbitMQServer is the rabbitmq-server script run when POSTBOX_RABBITMQ_SERVER is not set: the script
// itself, as Debian and Ubuntu install it, not the wrapper in /usr/sbin, which switches to the rabbitmq user and
// that user's home and Erlang cookie.
const DefaultRabbitMQServer = "/usr/lib/rabbitmq/bin/rabbitmq-server"

// RabbitServer is a RabbitMQ node of the suite's own: its own node name, AMQP and distribution ports on
// 127.0.0.1, and its own directory for its database (mnesia and message stores), configuration and home, so
// scenarios stop and restart it without disturbing the shared node. It reads no file of the shared node's: not
// /etc/rabbitmq's configuration, environment or plugins, and not its Erlang cookie (Erlang makes a cookie of the
// node's own in its home directory). It runs no plugin, so the management plugin's ports stay the shared
// node's. It registers its name with the machine's epmd, as every Erlang node does.
type RabbitServer struct {
	bin, dir   string
	node       string
	port, dist int
	logs       *Tail
	proc       serverProc
}

// RabbitMQBinary returns the rabbitmq-server script to run: POSTBOX_RABBITMQ_SERVER, DefaultRabbitMQServer, or
// the one on the PATH.
func RabbitMQBinary() (string, error) {
	if b := os.Getenv("POSTBOX_RABBITMQ_SERVER"); b != "" {
		return b, nil
	}
	if _, err := os.Stat(DefaultRabbitMQServer); err == nil {
		return DefaultRabbitMQServer, nil
	}
	if b, err := exec.LookPath("rabbitmq-server"); err == nil {
		return b, nil
	}
	return "", fmt.Errorf("chaos: no rabbitmq-server at %s nor on the PATH; install RabbitMQ or set POSTBOX_RABBITMQ_SERVER to its sbin/rabbitmq-server script", DefaultRabbitMQServer)
}

// StartRabbitMQ starts a RabbitMQ node on free ports of 127.0.0.1, keeping everything under dir, and waits until
// it accepts AMQP connections (a node takes a few seconds to boot). Its log goes to logs (which may be nil). Stop
// it with Stop or Close.
func StartRabbitMQ(ctx context.Context, dir string, logs *Tail) (*RabbitServer, error) {
	bin, err := RabbitMQBinary()
	if err != nil {
		return nil, err
	}
	s := &RabbitServer{bin: bin, dir: dir, logs: logs, proc: serverProc{name: "RabbitMQ"}}
	if s.port, err = FreePort(); err != nil {
		return nil, err
	}
	if s.dist, err = FreePort(); err != nil {
		return nil, err
	}
	s.node = fmt.Sprintf("postbox_chaos_%d@localhost", s.port)
	conf := fmt.Sprintf("listeners.tcp.default = 127.0.0.1:%d\nlog.file = false\nlog.console = true\nlog.console.level = warning\n", s.port)
	files := []struct{ name, text string }{
		{"rabbitmq.conf", conf},
		{"enabled_plugins", "[].\n"},
		{"rabbitmq-env.conf", ""},
	}
	for _, f := range files {
		if err := os.WriteFile(filepath.Join(dir, f.name), []byte(f.text), 0o600); err != nil {
			return nil, fmt.Errorf("chaos: configure the RabbitMQ node: %w", err)
		}
	}
	if err := s.Start(ctx); err != nil {
		return nil, err
	}
	return s, nil
}

// URL is the node's AMQP URL, as the default user guest.
func (s *RabbitServer) URL() string { return "amqp://guest:guest@" + s.Addr() + "/" }

// Addr is the node's AMQP host:port.
func (s *RabbitServer) Addr() string { return net.JoinHostPort("127.0.0.1", strconv.Itoa(s.port)) }

// Node is the node's Erlang name, for rabbitmqctl -n (run with HOME set to the node's directory, for its
// cookie).
func (s *RabbitServer) Node() string { return s.node }

// Start starts the node on its ports and directory, after a Stop, and waits until it accepts AMQP connections.
// The node recovers its durable queues and their persistent messages from the directory.
func (s *RabbitServer) Start(ctx context.Context) error {
	cmd := exec.Command(s.bin)
	cmd.Dir = s.dir
	cmd.Env = append(os.Environ(),
		"HOME="+s.dir, // Erlang reads, or makes, the node's cookie there
		"RABBITMQ_NODENAME="+s.node,
		"RABBITMQ_NODE_IP_ADDRESS=127.0.0.1",
		"RABBITMQ_NODE_PORT="+strconv.Itoa(s.port),
		"RABBITMQ_DIST_PORT="+strconv.Itoa(s.dist),
		"RABBITMQ_MNESIA_BASE="+filepath.Join(s.dir, "mnesia"),
		"RABBITMQ_LOG_BASE="+filepath.Join(s.dir, "log"),
		"RABBITMQ_PLUGINS_EXPAND_DIR="+filepath.Join(s.dir, "plugins-expand"),
		"RABBITMQ_CONFIG_FILE="+filepath.Join(s.dir, "rabbitmq.conf"),
		"RABBITMQ_ADVANCED_CONFIG_FILE="+filepath.Join(s.dir, "advanced.config"),
		"RABBITMQ_CONF_ENV_FILE="+filepath.Join(s.dir, "rabbitmq-env.conf"),
		"RABBITMQ_ENABLED_PLUGINS_FILE="+filepath.Join(s.dir, "enabled_plugins"),
		// The script then execs the Erlang VM instead of running it under a shell that traps signals: the
		// process started here is the node, so SIGTERM stops it cleanly, SIGKILL crashes it, and it dies with
		// the suite. -noinput keeps the VM from reading a shell from stdin.
		"RABBITMQ_ALLOW_INPUT=1",
		"RABBITMQ_SERVER_ADDITIONAL_ERL_ARGS=-noinput -kernel inet_dist_use_interface {127,0,0,1}",
	)
	if s.logs != nil {
		cmd.Stdout, cmd.Stderr = s.logs, s.logs
	}
	return s.proc.start(ctx, cmd, s.Addr())
}

// Stop sends sig to the node (SIGTERM shuts it down cleanly, which takes a few seconds; SIGKILL crashes it) and
// waits until it has exited.
func (s *RabbitServer) Stop(sig syscall.Signal) { s.proc.stop(sig) }

// Close kills the node if it is running.
func (s *RabbitServer) Close() { s.Stop(syscall.SIGKILL) }

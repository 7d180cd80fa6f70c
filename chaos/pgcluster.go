package chaos

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strconv"
	"time"
)

// PostgreSQL binary directories looked in, in order, when POSTBOX_PG_BIN is not set and initdb is not on the
// PATH.
var pgBinDirs = []string{"/usr/lib/postgresql/15/bin", "/usr/local/bin", "/usr/lib/postgresql/16/bin", "/usr/lib/postgresql/17/bin"}

// Shutdown modes of PGCluster.Stop, as pg_ctl names them.
const (
	// PGFast rolls back open transactions, disconnects the clients and checkpoints: an orderly restart.
	PGFast = "fast"
	// PGImmediate stops every server process at once, as a crash would; the next start replays the WAL.
	PGImmediate = "immediate"
)

// PGCluster is a PostgreSQL cluster of the suite's own: made with initdb in a temporary directory, run with
// pg_ctl on a port of its own, so that scenarios can stop and restart it without disturbing the shared server.
// PostgreSQL refuses to run as root, so when the suite runs as root the cluster belongs to, and runs as, the
// user "postgres".
type PGCluster struct {
	bin, dir string
	port     int
	uid, gid uint32
	asUser   bool
}

// NewPGCluster runs initdb in a new temporary directory and starts the cluster on a free port. It trusts local
// connections from the user "postgres" and keeps its socket in its own directory. Each of settings is a line
// added to postgresql.conf, such as "wal_level = logical". Close it when done.
func NewPGCluster(ctx context.Context, settings ...string) (*PGCluster, error) {
	bin, err := pgBin()
	if err != nil {
		return nil, err
	}
	dir, err := os.MkdirTemp("", "postbox-chaos-pg-")
	if err != nil {
		return nil, fmt.Errorf("chaos: temporary cluster directory: %w", err)
	}
	c := &PGCluster{bin: bin, dir: dir}
	if os.Geteuid() == 0 {
		u, err := user.Lookup("postgres")
		if err != nil {
			os.RemoveAll(dir)
			return nil, fmt.Errorf("chaos: PostgreSQL will not run as root and there is no user postgres to run it as: %w", err)
		}
		uid, _ := strconv.ParseUint(u.Uid, 10, 32)
		gid, _ := strconv.ParseUint(u.Gid, 10, 32)
		c.uid, c.gid, c.asUser = uint32(uid), uint32(gid), true
		if err := os.Chown(dir, int(c.uid), int(c.gid)); err != nil {
			os.RemoveAll(dir)
			return nil, fmt.Errorf("chaos: hand the cluster directory to postgres: %w", err)
		}
	}
	if c.port, err = FreePort(); err != nil {
		os.RemoveAll(dir)
		return nil, err
	}
	if err := c.run(ctx, "initdb", "-D", c.data(), "-U", "postgres", "-A", "trust", "-E", "UTF8", "--locale=C", "--no-sync"); err != nil {
		os.RemoveAll(dir)
		return nil, err
	}
	// fsync off: the scenarios crash processes, never the machine, and a killed server's writes are already in
	// the kernel's page cache. Commits still wait for their WAL write (synchronous_commit stays on).
	conf := fmt.Sprintf("listen_addresses = '127.0.0.1'\nport = %d\nunix_socket_directories = '%s'\n"+
		"fsync = off\nfull_page_writes = off\nmax_connections = 200\nlog_min_messages = warning\n", c.port, c.dir)
	for _, s := range settings {
		conf += s + "\n"
	}
	if err := c.appendConf(conf); err != nil {
		os.RemoveAll(dir)
		return nil, err
	}
	if err := c.Start(ctx); err != nil {
		os.RemoveAll(dir)
		return nil, err
	}
	return c, nil
}

// URL returns the connection URL of database db on the cluster.
func (c *PGCluster) URL(db string) string {
	return fmt.Sprintf("postgres://postgres@127.0.0.1:%d/%s?sslmode=disable", c.port, db)
}

// Start starts the cluster and waits until it accepts connections.
func (c *PGCluster) Start(ctx context.Context) error {
	return c.run(ctx, "pg_ctl", "-D", c.data(), "-l", filepath.Join(c.dir, "server.log"), "-w", "-t", "60", "start")
}

// Stop stops the cluster in the given mode (PGFast or PGImmediate) and waits until it has stopped.
func (c *PGCluster) Stop(ctx context.Context, mode string) error {
	return c.run(ctx, "pg_ctl", "-D", c.data(), "-m", mode, "-w", "-t", "60", "stop")
}

// Log returns the end of the server's log, for a failing scenario to show.
func (c *PGCluster) Log() string {
	b, _ := os.ReadFile(filepath.Join(c.dir, "server.log"))
	if len(b) > 4000 {
		b = b[len(b)-4000:]
	}
	return string(b)
}

// Close stops the cluster at once and removes its directory.
func (c *PGCluster) Close() error {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	err := c.Stop(ctx, PGImmediate)
	if err != nil && bytes.Contains([]byte(err.Error()), []byte("Is server running?")) {
		err = nil
	}
	return errors.Join(err, os.RemoveAll(c.dir))
}

func (c *PGCluster) data() string { return filepath.Join(c.dir, "data") }

func (c *PGCluster) appendConf(s string) error {
	f, err := os.OpenFile(filepath.Join(c.data(), "postgresql.conf"), os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		return fmt.Errorf("chaos: configure the temporary cluster: %w", err)
	}
	_, err = f.WriteString(s)
	return errors.Join(err, f.Close())
}

// run runs one of the cluster's programs, as the cluster's owner.
func (c *PGCluster) run(ctx context.Context, prog string, args ...string) error {
	cmd := exec.CommandContext(ctx, filepath.Join(c.bin, prog), args...)
	cmd.Dir = c.dir
	cmd.Env = append(os.Environ(), "LC_ALL=C")
	if c.asUser {
		runAs(cmd, c.uid, c.gid)
	}
	out, err := cmd.CombinedOutput()
	if err != nil {
		return fmt.Errorf("chaos: %s %v: %w\n%s", prog, args, err, out)
	}
	return nil
}

// pgBin finds the directory of initdb and pg_ctl: POSTBOX_PG_BIN, the PATH, or a usual install location.
func pgBin() (string, error) {
	if d := os.Getenv("POSTBOX_PG_BIN"); d != "" {
		return d, nil
	}
	if p, err := exec.LookPath("initdb"); err == nil {
		if real, err := filepath.EvalSymlinks(p); err == nil {
			return filepath.Dir(real), nil
		}
		return filepath.Dir(p), nil
	}
	for _, d := range pgBinDirs {
		if _, err := os.Stat(filepath.Join(d, "pg_ctl")); err == nil {
			return d, nil
		}
	}
	return "", fmt.Errorf("chaos: no initdb on the PATH nor in %v; install PostgreSQL's server binaries or set POSTBOX_PG_BIN", pgBinDirs)
}

package chaos

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"os/signal"
	"strings"
	"sync"
	"syscall"
	"time"
)

// childEnv carries a child process's roleConfig, as JSON.
const childEnv = "POSTBOX_CHAOS_CHILD"

func isChild() bool { return os.Getenv(childEnv) != "" }

// runChild plays the role in childEnv until SIGTERM (a clean stop) or SIGKILL. A relay prints each ID the broker
// acknowledged on a line of its own; its parent reads them as the publish ledger. It returns the exit code.
func runChild() int {
	var cfg roleConfig
	if err := json.Unmarshal([]byte(os.Getenv(childEnv)), &cfg); err != nil {
		fmt.Fprintln(os.Stderr, "chaos child:", err)
		return 2
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
	defer stop()
	log := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn})).With("pid", os.Getpid())
	var err error
	switch cfg.Role {
	case "relay":
		out := bufio.NewWriterSize(os.Stdout, 1<<16)
		var mu sync.Mutex
		err = runRelay(ctx, cfg, log, func(ids []string) {
			mu.Lock()
			defer mu.Unlock()
			for _, id := range ids {
				out.WriteString(id)
				out.WriteByte('\n')
			}
			// One write per batch, before the relay settles it: a kill after this line leaves a batch the
			// parent counts as published that will be published again.
			if err := out.Flush(); err != nil {
				log.Error("write the publish ledger", "err", err)
			}
		}, nil)
	case "consumer":
		hooks := consumerHooks{}
		if cfg.KillAfter > 0 {
			switch cfg.KillAt {
			case killBeforeCommit:
				hooks.beforeCommit = killer(cfg.KillAfter)
			case killAfterCommit:
				hooks.afterCommit = killer(cfg.KillAfter)
			}
		}
		err = runConsumer(ctx, cfg, log, hooks, nil)
	default:
		err = fmt.Errorf("unknown role %q", cfg.Role)
	}
	if err != nil {
		log.Error("chaos child failed", "role", cfg.Role, "err", err)
		return 1
	}
	return 0
}

// killSelf ends this process with SIGKILL, as the kernel's OOM killer or a node failure would: no deferred
// call, no rollback, no ack runs.
func killSelf() {
	_ = syscall.Kill(os.Getpid(), syscall.SIGKILL)
	select {} // SIGKILL is delivered before this goroutine could run on
}

// child is a role running in a child process.
type child struct {
	cmd  *exec.Cmd
	done chan struct{} // closed when the process has exited and its output is read
	// killed is set once the process has ended by SIGKILL, from the parent or from itself.
	killed bool
}

// startChild starts the test binary as a child playing cfg's role. Each line the child prints goes to line;
// its logs go to logs.
func startChild(cfg roleConfig, logs io.Writer, line func(string)) (*child, error) {
	b, err := json.Marshal(cfg)
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), childEnv+"="+string(b))
	cmd.Stderr = logs
	dieWithParent(cmd)
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("start %s child: %w", cfg.Role, err)
	}
	c := &child{cmd: cmd, done: make(chan struct{})}
	go func() {
		defer close(c.done)
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			// A kill can cut the last line short; an ID is 36 characters.
			if s := strings.TrimSpace(sc.Text()); len(s) == 36 {
				line(s)
			}
		}
		err := cmd.Wait()
		var exit *exec.ExitError
		if errors.As(err, &exit) {
			if ws, ok := exit.Sys().(syscall.WaitStatus); ok && ws.Signaled() && ws.Signal() == syscall.SIGKILL {
				c.killed = true
			}
		}
	}()
	return c, nil
}

// kill sends SIGKILL and waits for the process to end.
func (c *child) kill() {
	_ = c.cmd.Process.Signal(syscall.SIGKILL)
	<-c.done
}

// stop asks the child to finish (SIGTERM) and waits for it, killing it if it has not ended within a minute.
func (c *child) stop() {
	_ = c.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-c.done:
	case <-time.After(time.Minute):
		c.kill()
	}
}

// exited reports whether the child has ended.
func (c *child) exited() bool {
	select {
	case <-c.done:
		return true
	default:
		return false
	}
}

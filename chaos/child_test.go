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

// runChild plays the role in childEnv until SIGTERM (a clean stop) or SIGKILL, reporting to its parent on stdout
// (see report). It returns the exit code.
func runChild() int {
	var cfg roleConfig
	if err := json.Unmarshal([]byte(os.Getenv(childEnv)), &cfg); err != nil {
		fmt.Fprintln(os.Stderr, "chaos child:", err)
		return 2
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
	defer stop()
	log := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn})).With("pid", os.Getpid())
	rep := &reporter{out: bufio.NewWriterSize(os.Stdout, 1<<16), log: log}
	var err error
	switch cfg.Role {
	case "relay":
		// One write per batch, before the relay settles it: a kill after this write leaves a batch the parent
		// counts as published that will be published again.
		err = runRelay(ctx, cfg, log, func(ids []string) { rep.report(reportAcked, ids...) }, nil)
	case "consumer":
		hooks := consumerHooks{duplicate: func(id string) { rep.report(reportDuplicate, id) }}
		if cfg.KillAfter > 0 {
			switch cfg.KillAt {
			case killBeforeCommit:
				hooks.beforeCommit = killer(cfg.KillAfter, nil)
			case killAfterCommit:
				hooks.afterCommit = killer(cfg.KillAfter, func(id string) { rep.report(reportUnacked, id) })
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

// What a child reports to its parent: one line "kind id" per message.
const (
	reportAcked     = "acked"     // a relay: the broker acknowledged the message; its batch is not settled yet
	reportDuplicate = "duplicate" // a consumer: the inbox skipped the delivery as a duplicate; it is not acked yet
	reportUnacked   = "unacked"   // a consumer: it committed the message and is killing itself before the ack
)

// reporter writes a child's reports to its parent.
type reporter struct {
	mu  sync.Mutex
	out *bufio.Writer
	log *slog.Logger
}

// report writes one line of kind per ID, all in one write that is done when report returns, so that what the
// role does next (settle, ack, or die) comes after the parent can read it.
func (r *reporter) report(kind string, ids ...string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, id := range ids {
		r.out.WriteString(kind)
		r.out.WriteByte(' ')
		r.out.WriteString(id)
		r.out.WriteByte('\n')
	}
	if err := r.out.Flush(); err != nil {
		r.log.Error("report to the parent", "kind", kind, "err", err)
	}
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

// startChild starts the test binary as a child playing cfg's role. Each report the child prints goes to report;
// its logs go to logs.
func startChild(cfg roleConfig, logs io.Writer, report func(kind, id string)) (*child, error) {
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
			if kind, id, ok := strings.Cut(strings.TrimSpace(sc.Text()), " "); ok && len(id) == 36 {
				report(kind, id)
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

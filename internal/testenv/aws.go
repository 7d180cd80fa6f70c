package testenv

import (
	"bufio"
	_ "embed"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"
)

// FauxqsVersion is the fauxqs release scripts/aws/emulators.sh installs.
const FauxqsVersion = "1.9.2"

//go:embed fauxqs.mjs
var fauxqsLauncher string

// Fauxqs is a running fauxqs process: an SQS (AWS JSON 1.0) and SNS emulator on 127.0.0.1, in memory.
type Fauxqs struct {
	// Endpoint is its URL, for the SDK's BaseEndpoint.
	Endpoint string

	cmd   *exec.Cmd
	stdin io.Closer
	once  sync.Once
}

// FauxqsDir is where scripts/aws/emulators.sh installs fauxqs.
func FauxqsDir() string {
	tools := os.Getenv("POSTBOX_TOOLS")
	if tools == "" {
		home, _ := os.UserHomeDir()
		tools = filepath.Join(home, ".cache", "postbox-tools")
	}
	return filepath.Join(tools, "fauxqs-"+FauxqsVersion)
}

// StartFauxqs starts fauxqs on a free port of 127.0.0.1 and waits until it listens. Stop it with Stop; it also
// exits by itself when the test process dies (its standard input closes). It fails when fauxqs is not installed
// (run scripts/aws/emulators.sh) or node is missing.
func StartFauxqs() (*Fauxqs, error) {
	dir := FauxqsDir()
	if _, err := os.Stat(filepath.Join(dir, "node_modules", "fauxqs", "dist", "app.js")); err != nil {
		return nil, fmt.Errorf("fauxqs %s is not installed in %s: run scripts/aws/emulators.sh", FauxqsVersion, dir)
	}
	node, err := exec.LookPath("node")
	if err != nil {
		return nil, errors.New("node is not on PATH: install Node.js 20 or later, which fauxqs runs on")
	}
	cmd := exec.Command(node, "--input-type=module", "-e", fauxqsLauncher)
	cmd.Env = append(os.Environ(), "FAUXQS_DIR="+dir)
	cmd.Stderr = os.Stderr
	stdin, err := cmd.StdinPipe()
	if err != nil {
		return nil, err
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("start fauxqs: %w", err)
	}
	f := &Fauxqs{cmd: cmd, stdin: stdin}
	line := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			if l := sc.Text(); strings.HasPrefix(l, "listening ") {
				line <- strings.TrimPrefix(l, "listening ")
				break
			}
		}
		_, _ = io.Copy(io.Discard, stdout)
	}()
	select {
	case addr := <-line:
		f.Endpoint = addr
		return f, nil
	case <-time.After(30 * time.Second):
		f.Stop()
		return nil, errors.New("fauxqs did not print its address within 30s")
	}
}

// Stop ends the process and waits for it. It may be called twice.
func (f *Fauxqs) Stop() {
	f.once.Do(func() {
		_ = f.stdin.Close()
		_ = f.cmd.Process.Kill()
		_ = f.cmd.Wait()
	})
}

// NeedFauxqs fails the test under CI=true, and skips it otherwise, when err (from StartFauxqs) says fauxqs could
// not start.
func NeedFauxqs(t testing.TB, err error) {
	t.Helper()
	if err == nil {
		return
	}
	if os.Getenv("CI") == "true" {
		t.Fatal(err)
	}
	t.Skip(err)
}

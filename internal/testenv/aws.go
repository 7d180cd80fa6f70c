package testenv

import (
	"bufio"
	_ "embed"
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

// KinesaliteVersion is the kinesalite release scripts/aws/emulators.sh installs.
const KinesaliteVersion = "3.3.3"

//go:embed kinesalite.js
var kinesaliteLauncher string

// Emulator is a running AWS emulator process on 127.0.0.1, in memory.
type Emulator struct {
	// Endpoint is its URL, for the SDK's BaseEndpoint.
	Endpoint string

	cmd   *exec.Cmd
	stdin io.Closer
	once  sync.Once
}

// Fauxqs is a running fauxqs process: an SQS (AWS JSON 1.0) and SNS (query protocol) emulator.
type Fauxqs = Emulator

// Kinesalite is a running kinesalite process: a Kinesis Data Streams emulator (AWS JSON 1.1).
type Kinesalite = Emulator

// toolDir is where scripts/aws/emulators.sh installs name.
func toolDir(name string) string {
	tools := os.Getenv("POSTBOX_TOOLS")
	if tools == "" {
		home, _ := os.UserHomeDir()
		tools = filepath.Join(home, ".cache", "postbox-tools")
	}
	return filepath.Join(tools, name)
}

// FauxqsDir is where scripts/aws/emulators.sh installs fauxqs.
func FauxqsDir() string { return toolDir("fauxqs-" + FauxqsVersion) }

// KinesaliteDir is where scripts/aws/emulators.sh installs kinesalite.
func KinesaliteDir() string { return toolDir("kinesalite-" + KinesaliteVersion) }

// StartFauxqs starts fauxqs on a free port of 127.0.0.1 and waits until it listens. Stop it with Stop; it also
// exits by itself when the test process dies (its standard input closes). It fails when fauxqs is not installed
// (run scripts/aws/emulators.sh) or node is missing.
func StartFauxqs() (*Fauxqs, error) {
	dir := FauxqsDir()
	if _, err := os.Stat(filepath.Join(dir, "node_modules", "fauxqs", "dist", "app.js")); err != nil {
		return nil, fmt.Errorf("fauxqs %s is not installed in %s: run scripts/aws/emulators.sh", FauxqsVersion, dir)
	}
	return startNode("fauxqs", []string{"--input-type=module", "-e", fauxqsLauncher}, "FAUXQS_DIR="+dir)
}

// StartKinesalite starts kinesalite on a free port of 127.0.0.1, with streams that become active at once, and
// waits until it listens. Like StartFauxqs, it fails when kinesalite is not installed or node is missing.
func StartKinesalite() (*Kinesalite, error) {
	dir := KinesaliteDir()
	if _, err := os.Stat(filepath.Join(dir, "node_modules", "kinesalite", "index.js")); err != nil {
		return nil, fmt.Errorf("kinesalite %s is not installed in %s: run scripts/aws/emulators.sh", KinesaliteVersion, dir)
	}
	return startNode("kinesalite", []string{"-e", kinesaliteLauncher}, "KINESALITE_DIR="+dir)
}

// startNode runs node with args and env, and waits for the "listening URL" line of the emulator name.
func startNode(name string, args []string, env string) (*Emulator, error) {
	node, err := exec.LookPath("node")
	if err != nil {
		return nil, fmt.Errorf("node is not on PATH: install Node.js 20 or later, which %s runs on", name)
	}
	cmd := exec.Command(node, args...)
	cmd.Env = append(os.Environ(), env)
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
		return nil, fmt.Errorf("start %s: %w", name, err)
	}
	f := &Emulator{cmd: cmd, stdin: stdin}
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
		return nil, fmt.Errorf("%s did not print its address within 30s", name)
	}
}

// Stop ends the process and waits for it. It may be called twice.
func (f *Emulator) Stop() {
	f.once.Do(func() {
		_ = f.stdin.Close()
		_ = f.cmd.Process.Kill()
		_ = f.cmd.Wait()
	})
}

// NeedFauxqs fails the test under CI=true, and skips it otherwise, when err (from StartFauxqs or
// StartKinesalite) says the emulator could not start.
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

package deploytest

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// root is the repository's root; binary is the postbox command built by the Dockerfile's build line.
var (
	root   string
	binary string
)

func TestMain(m *testing.M) {
	os.Exit(func() int {
		var err error
		if root, err = filepath.Abs("../.."); err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
		dir, err := os.MkdirTemp("", "postbox-deploy-")
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
		defer os.RemoveAll(dir)
		binary = filepath.Join(dir, "postbox")
		if err := buildAsDockerfile(binary); err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
		return m.Run()
	}())
}

// buildAsDockerfile runs the Dockerfile's go build line in the repository's root, writing the binary to out
// instead of the image's /out/postbox.
func buildAsDockerfile(out string) error {
	line, err := dockerfileBuildLine()
	if err != nil {
		return err
	}
	line = strings.ReplaceAll(line, "${VERSION}", "deploytest")
	line = strings.Replace(line, "-o /out/postbox", "-o "+out, 1)
	cmd := exec.Command("sh", "-c", line)
	cmd.Dir = root
	cmd.Env = workspaceEnv()
	if b, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("the Dockerfile's build, %s: %v\n%s", line, err, b)
	}
	return nil
}

// dockerfileBuildLine returns the Dockerfile's command that builds the binary, from CGO_ENABLED=0 to the line's
// end (continuation lines joined).
func dockerfileBuildLine() (string, error) {
	b, err := os.ReadFile(filepath.Join(root, "Dockerfile"))
	if err != nil {
		return "", err
	}
	joined := strings.ReplaceAll(string(b), "\\\n", " ")
	for l := range strings.SplitSeq(joined, "\n") {
		if i := strings.Index(l, "CGO_ENABLED=0 go build "); i >= 0 && strings.Contains(l, "-o /out/postbox") {
			return l[i:], nil
		}
	}
	return "", fmt.Errorf("Dockerfile: no line runs CGO_ENABLED=0 go build ... -o /out/postbox")
}

// workspaceEnv is the environment without GOWORK=off, which runs this module's tests: the postbox command
// builds in the repository's workspace, as in the image.
func workspaceEnv() []string {
	var env []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "GOWORK=") {
			env = append(env, kv)
		}
	}
	return env
}

// tool returns the path of a pinned tool scripts/deploy-tools.sh built, from the environment variable name.
func tool(t *testing.T, name string) string {
	t.Helper()
	p := os.Getenv(name)
	if p == "" {
		t.Fatalf("%s is not set: run these tests with scripts/deploy-check.sh, which builds the pinned tools", name)
	}
	return p
}

// run runs a command and returns its standard output; it fails the test with the command's output on error.
func run(t *testing.T, name string, args ...string) string {
	t.Helper()
	out, err := runErr(name, args...)
	if err != nil {
		t.Fatalf("%s %s: %v", filepath.Base(name), strings.Join(args, " "), err)
	}
	return out
}

// runErr runs a command and returns its standard output, or an error carrying its standard error.
func runErr(name string, args ...string) (string, error) {
	var stdout, stderr bytes.Buffer
	cmd := exec.Command(name, args...)
	cmd.Dir = root
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		return stdout.String(), fmt.Errorf("%v\n%s%s", err, stdout.String(), stderr.String())
	}
	return stdout.String(), nil
}

// Command consumercheck proves that Postbox's modules work for a user outside this repository. It packs every
// module of the repository at the version the modules require each other at into a module proxy of its own, then,
// outside the workspace, builds fresh consumer modules that `go get` what the README tells users to use, runs
// `go mod tidy`, `go vet` and `go build` on them, and checks what lands in each consumer's go.sum. It also builds
// a few published modules on their own (GOWORK=off) against that proxy.
//
//	go run ./internal/consumercheck            (from the repository root; scripts/test.sh runs it)
//
// The proxy serves github.com/postbox-go/… from the packed modules and answers 404 for any other path under it,
// so no module path of ours reaches the network; every other module comes from the module cache already on the
// machine or, failing that, from the first proxy of `go env GOPROXY`. The consumers use a module cache of their
// own, removed at the end, so a packed module never lingers in the shared cache under a real version.
package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io/fs"
	"log"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"golang.org/x/mod/modfile"
	"golang.org/x/mod/module"
	modzip "golang.org/x/mod/zip"
)

// prefix is the module path prefix of every Postbox module.
const prefix = "github.com/postbox-go/postbox"

// A consumer is a fresh module holding one program of the README, the modules it gets, and what its go.sum must
// not hold. The quick start (PostgreSQL through pgx, NATS) is kept under testdata until examples/ has it.
type consumer struct {
	name   string   // the consumer module's name
	src    string   // its main.go, relative to the repository root
	get    []string // modules to `go get` (ours at the packed version, others at the version the README names)
	forbid []string // substrings no go.sum line may contain
	only   string   // when set, every go.sum line must start with it
}

// clients names the client libraries a consumer that does not use them must not download.
var clients = []string{"go-sql-driver/mysql", "sqlite", "amqp", "franz-go", "kafka", "redis", "pubsub", "aws-sdk-go-v2",
	prefix + "/internal/", prefix + "/bench", prefix + "/chaos"}

var consumers = []consumer{
	{name: "core", src: "internal/consumercheck/testdata/core/main.go", get: []string{prefix}, only: prefix + " "},
	{name: "quickstart", src: "internal/consumercheck/testdata/quickstart/main.go", get: []string{prefix, prefix + "/driver/pgxv5", prefix + "/broker/natsbroker",
		"github.com/jackc/pgx/v5", "github.com/nats-io/nats.go"}, forbid: clients},
	{name: "sqlite", src: "examples/consume/main.go", get: []string{prefix, prefix + "/driver/databasesql", "modernc.org/sqlite"},
		forbid: []string{"go-sql-driver/mysql", "jackc/pgx", "nats", "amqp", "franz-go", "redis", "pubsub",
			prefix + "/internal/", prefix + "/bench", prefix + "/chaos"}},
}

// A mod is a module of the repository.
type mod struct {
	path, dir string
	requires  []string // its direct requirements
}

// testOnly reports whether a module of ours is for tests and tools only: no published module may require it.
func testOnly(path string) bool {
	for _, p := range []string{"/internal/", "/bench", "/chaos", "/examples", "/deploy/deploytest"} {
		if strings.HasPrefix(path, prefix+p) {
			return true
		}
	}
	return false
}

func directRequires(f *modfile.File) []string {
	var out []string
	for _, r := range f.Require {
		if !r.Indirect {
			out = append(out, r.Mod.Path)
		}
	}
	return out
}

// unchecked names published modules whose requirement graph is printed but not held to the rule yet, with why.
var unchecked = map[string]string{
	prefix + "/cmd/postbox": "its tests require the test-only module internal/testenv",
}

// standalone lists published modules built on their own, outside the workspace, against the packed proxy.
var standalone = []string{"broker/natsbroker", "broker/sqsbroker", "driver/pgxv5", "driver/pgxv5/wal"}

func main() {
	root := flag.String("root", ".", "repository root")
	version := flag.String("version", "", "version to pack the modules at (default: the version broker/natsbroker requires the core at)")
	tidy := flag.Bool("tidy", false, "instead of checking, run go mod tidy in every module against the packed modules (scripts/release.sh does)")
	flag.Parse()
	if err := run(*root, *version, *tidy); err != nil {
		log.Fatalf("consumer check: %v", err)
	}
}

func run(root, version string, tidy bool) error {
	root, err := filepath.Abs(root)
	if err != nil {
		return err
	}
	if version == "" {
		if version, err = requiredVersion(filepath.Join(root, "broker/natsbroker/go.mod"), prefix); err != nil {
			return err
		}
	}
	work, err := os.MkdirTemp("", "postbox-consumercheck")
	if err != nil {
		return err
	}
	defer removeAll(work)

	// The consumers' module cache is kept between runs, for the third-party modules, but never holds ours
	// outside a run: a packed module cached under a real version would hide the next run's changes.
	modcache, err := consumerCache()
	if err != nil {
		return err
	}
	dropOurs(modcache)
	defer dropOurs(modcache)

	proxyDir := filepath.Join(work, "proxy")
	mods, err := pack(root, proxyDir, version)
	if err != nil {
		return err
	}
	fmt.Printf("packed %d modules at %s into a module proxy of their own\n", len(mods), version)

	upstream, err := upstreamProxy()
	if err != nil {
		return err
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return err
	}
	srv := &http.Server{Handler: proxyHandler(proxyDir, sharedCache(), upstream), ReadHeaderTimeout: 30 * time.Second}
	go srv.Serve(ln) //nolint:errcheck // Serve returns ErrServerClosed after Close below.
	defer srv.Close()

	env := append(os.Environ(),
		"GOWORK=off",
		"GOPROXY=http://"+ln.Addr().String(),
		"GONOSUMDB="+prefix, // ours are not in the checksum database; everything else is checked against it
		"GONOPROXY=", "GOPRIVATE=", "GOFLAGS=-mod=mod", "GOTOOLCHAIN=local",
		"GOMODCACHE="+modcache,
		// The go command indexes a module cache directory once per module version, in GOCACHE, trusting versions
		// never to change; ours are repacked at the same version on every run, so the index must be off.
		"GODEBUG=goindex=0",
	)
	if tidy {
		return tidyAll(root, proxyDir, version, env)
	}
	for _, c := range consumers {
		if err := checkConsumer(c, root, filepath.Join(work, "consumers", c.name), version, env); err != nil {
			return fmt.Errorf("consumer %s: %w", c.name, err)
		}
	}
	for _, m := range mods {
		if testOnly(m.path) || m.path == prefix+"/internal/consumercheck" {
			continue
		}
		if err := checkGraph(m, filepath.Join(work, "graph", strings.TrimPrefix(m.path, prefix)), env); err != nil {
			return fmt.Errorf("requirement graph of %s: %w", m.path, err)
		}
	}
	for _, dir := range standalone {
		if err := buildAlone(filepath.Join(root, dir), filepath.Join(work, "alone", dir), env); err != nil {
			return fmt.Errorf("GOWORK=off go build in %s: %w", dir, err)
		}
		fmt.Printf("== %s builds on its own (GOWORK=off)\n", dir)
	}
	return nil
}

// requiredVersion returns the version the go.mod at path requires mod at.
func requiredVersion(path, mod string) (string, error) {
	f, err := readModFile(path)
	if err != nil {
		return "", err
	}
	for _, r := range f.Require {
		if r.Mod.Path == mod {
			return r.Mod.Version, nil
		}
	}
	return "", fmt.Errorf("%s does not require %s", path, mod)
}

func readModFile(path string) (*modfile.File, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	return modfile.ParseLax(path, data, nil)
}

// pack writes every module of the repository at version into dir in the GOPROXY layout
// (<escaped path>/@v/list, <version>.info, .mod and .zip) and returns their paths.
func pack(root, dir, version string) ([]mod, error) {
	var mods []mod
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && path != root && (strings.HasPrefix(d.Name(), ".") || d.Name() == "testdata") {
			return filepath.SkipDir
		}
		if d.IsDir() || d.Name() != "go.mod" {
			return nil
		}
		f, err := readModFile(path)
		if err != nil {
			return err
		}
		if f.Module == nil || !strings.HasPrefix(f.Module.Mod.Path, prefix) {
			return nil
		}
		mods = append(mods, mod{path: f.Module.Mod.Path, dir: filepath.Dir(path), requires: directRequires(f)})
		return packOne(filepath.Dir(path), f.Module.Mod.Path, dir, version)
	})
	return mods, err
}

func packOne(src, path, dir, version string) error {
	esc, err := module.EscapePath(path)
	if err != nil {
		return err
	}
	v := filepath.Join(dir, esc, "@v")
	if err := os.MkdirAll(v, 0o755); err != nil {
		return err
	}
	gomod, err := os.ReadFile(filepath.Join(src, "go.mod"))
	if err != nil {
		return err
	}
	info, _ := json.Marshal(struct{ Version, Time string }{version, time.Now().UTC().Format(time.RFC3339)})
	for name, data := range map[string][]byte{"list": []byte(version + "\n"), version + ".info": info, version + ".mod": gomod} {
		if err := os.WriteFile(filepath.Join(v, name), data, 0o644); err != nil {
			return err
		}
	}
	z, err := os.Create(filepath.Join(v, version+".zip"))
	if err != nil {
		return err
	}
	// CreateFromDir leaves out nested modules, vendor directories and files a module zip may not hold.
	if err := modzip.CreateFromDir(z, module.Version{Path: path, Version: version}, src); err != nil {
		z.Close()
		return fmt.Errorf("pack %s: %w", path, err)
	}
	return z.Close()
}

// upstreamProxy returns the first HTTP proxy of `go env GOPROXY`.
func upstreamProxy() (*url.URL, error) {
	out, err := exec.Command("go", "env", "GOPROXY").Output()
	if err != nil {
		return nil, fmt.Errorf("go env GOPROXY: %w", err)
	}
	for _, p := range strings.FieldsFunc(strings.TrimSpace(string(out)), func(r rune) bool { return r == ',' || r == '|' }) {
		if strings.HasPrefix(p, "http://") || strings.HasPrefix(p, "https://") {
			return url.Parse(p)
		}
	}
	return nil, fmt.Errorf("go env GOPROXY (%s) names no HTTP proxy to fetch third-party modules from", strings.TrimSpace(string(out)))
}

// sharedCache returns the download cache of the machine's module cache, which is laid out like a proxy.
func sharedCache() string {
	out, err := exec.Command("go", "env", "GOMODCACHE").Output()
	if err != nil {
		return ""
	}
	return filepath.Join(strings.TrimSpace(string(out)), "cache", "download")
}

// proxyHandler serves our modules from packed, never asking the network about them, and every other module from
// the shared download cache when it holds the file, else from upstream.
func proxyHandler(packed, cache string, upstream *url.URL) http.Handler {
	ours, _ := module.EscapePath(prefix)
	rp := &httputil.ReverseProxy{Rewrite: func(r *httputil.ProxyRequest) {
		r.SetURL(upstream)
	}}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		p := strings.TrimPrefix(r.URL.Path, "/")
		if p == ours || strings.HasPrefix(p, ours+"/") {
			serveFile(w, r, packed, p)
			return
		}
		if cache != "" && !strings.HasSuffix(p, "/@v/list") && !strings.HasSuffix(p, "/@latest") && !strings.HasPrefix(p, "sumdb/") {
			if full := filepath.Join(cache, filepath.FromSlash(p)); fileExists(full) {
				http.ServeFile(w, r, full)
				return
			}
		}
		rp.ServeHTTP(w, r)
	})
}

func serveFile(w http.ResponseWriter, r *http.Request, dir, p string) {
	full := filepath.Join(dir, filepath.FromSlash(p))
	if !fileExists(full) {
		http.NotFound(w, r)
		return
	}
	http.ServeFile(w, r, full)
}

func fileExists(path string) bool {
	st, err := os.Stat(path)
	return err == nil && st.Mode().IsRegular()
}

// checkConsumer makes a fresh module holding the program c.src, gets its modules, tidies, vets and builds it, and
// checks its go.sum.
func checkConsumer(c consumer, root, dir, version string, env []string) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	src, err := os.ReadFile(filepath.Join(root, filepath.FromSlash(c.src)))
	if err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(dir, "main.go"), src, 0o644); err != nil {
		return err
	}
	get := []string{"get"}
	for _, m := range c.get {
		if strings.HasPrefix(m, prefix) {
			m += "@" + version
		}
		get = append(get, m)
	}
	for _, args := range [][]string{
		{"mod", "init", "example.com/" + c.name},
		get,
		{"mod", "tidy"},
		{"vet", "./..."},
		{"build", "-o", os.DevNull, "./..."},
	} {
		if err := goCmd(dir, env, args...); err != nil {
			return err
		}
	}
	sum, err := os.ReadFile(filepath.Join(dir, "go.sum"))
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return err
	}
	var bad []string
	sc := bufio.NewScanner(bytes.NewReader(sum))
	for sc.Scan() {
		line := sc.Text()
		if c.only != "" && !strings.HasPrefix(line, c.only) {
			bad = append(bad, line)
		}
		for _, f := range c.forbid {
			if strings.Contains(line, f) {
				bad = append(bad, line)
				break
			}
		}
	}
	if len(bad) > 0 {
		return fmt.Errorf("go.sum holds modules it must not:\n\t%s", strings.Join(bad, "\n\t"))
	}
	// The modules whose packages the program compiles, and the size of its go.sum.
	cmd := exec.Command("go", "list", "-deps", "-f", "{{with .Module}}{{.Path}} {{.Version}}{{end}}", "./...")
	cmd.Dir, cmd.Env = dir, env
	out, err := cmd.Output()
	if err != nil {
		return fmt.Errorf("go list -deps: %w", err)
	}
	built := uniqueLines(string(out), "example.com/")
	fmt.Printf("== consumer %s (go get %s): go.sum %d lines; builds packages of %d modules:\n\t%s\n",
		c.name, strings.Join(c.get, " "), bytes.Count(sum, []byte("\n")), len(built), strings.Join(built, "\n\t"))
	return nil
}

func uniqueLines(s, skip string) []string {
	seen := map[string]bool{}
	var out []string
	for _, l := range strings.Split(s, "\n") {
		if l = strings.TrimSpace(l); l != "" && !strings.HasPrefix(l, skip) && !seen[l] {
			seen[l] = true
			out = append(out, l)
		}
	}
	sort.Strings(out)
	return out
}

// checkGraph checks the requirement graph of a published module, as `go mod graph` prints it outside the
// workspace: it holds no test-only module of ours and no client library the module does not itself require.
func checkGraph(m mod, tmp string, env []string) error {
	if why, ok := unchecked[m.path]; ok {
		fmt.Printf("== graph %s: NOT CHECKED: %s\n", strings.TrimPrefix(m.path, prefix+"/"), why)
		return nil
	}
	if err := copyModFiles(m.dir, tmp); err != nil {
		return err
	}
	cmd := exec.Command("go", "mod", "graph")
	cmd.Dir, cmd.Env = tmp, env
	out, err := cmd.CombinedOutput()
	if err != nil {
		return fmt.Errorf("go mod graph: %w\n%s", err, out)
	}
	name := strings.TrimPrefix(strings.TrimPrefix(m.path, prefix), "/")
	if name == "" {
		name = "(core)"
	}
	inGraph := map[string]bool{}
	for _, f := range strings.Fields(string(out)) {
		path, _, _ := strings.Cut(f, "@")
		if path != m.path && path != "go" && path != "toolchain" {
			inGraph[path] = true
		}
	}
	paths := make([]string, 0, len(inGraph))
	for p := range inGraph {
		paths = append(paths, p)
	}
	sort.Strings(paths)
	var bad []string
	for _, p := range paths {
		if testOnly(p) {
			bad = append(bad, p)
			continue
		}
		for _, c := range clients {
			if strings.Contains(p, c) && !requiresLike(m.requires, c) {
				bad = append(bad, p)
				break
			}
		}
	}
	if len(bad) > 0 {
		return fmt.Errorf("it holds modules no user of it needs:\n\t%s", strings.Join(bad, "\n\t"))
	}
	fmt.Printf("== graph %s: %d modules, no test-only module and no client it does not use; requires %s\n",
		name, len(paths), strings.Join(append([]string{}, m.requires...), " "))
	return nil
}

// requiresLike reports whether one of the direct requirements contains s: a module may pull what it uses.
func requiresLike(requires []string, s string) bool {
	for _, r := range requires {
		if strings.Contains(r, s) {
			return true
		}
	}
	return false
}

// copyModFiles copies the go.mod and go.sum of the module in src to tmp.
func copyModFiles(src, tmp string) error {
	if err := os.MkdirAll(tmp, 0o755); err != nil {
		return err
	}
	for _, name := range []string{"go.mod", "go.sum"} {
		data, err := os.ReadFile(filepath.Join(src, name))
		if errors.Is(err, fs.ErrNotExist) {
			continue
		} else if err != nil {
			return err
		}
		if err := os.WriteFile(filepath.Join(tmp, name), data, 0o644); err != nil {
			return err
		}
	}
	return nil
}

// buildAlone builds the module in src outside the workspace, with copies of its go.mod and go.sum so the
// repository's files stay as they are.
func buildAlone(src, tmp string, env []string) error {
	if err := copyModFiles(src, tmp); err != nil {
		return err
	}
	return goCmd(src, env, "build", "-modfile="+filepath.Join(tmp, "go.mod"), "./...")
}

// tidyAll runs go mod tidy in every module outside the workspace, twice (a module's tidy reads its siblings'
// go.mod files as packed), then drops our own modules' lines from each go.sum: the workspace replaces them, and
// their hashes are only known once the release is tagged.
func tidyAll(root, proxyDir, version string, env []string) error {
	for round := 0; round < 2; round++ {
		if round > 0 {
			if _, err := pack(root, proxyDir, version); err != nil {
				return err
			}
		}
		mods, err := moduleDirs(root)
		if err != nil {
			return err
		}
		for _, dir := range mods {
			if err := goCmd(dir, env, "mod", "tidy"); err != nil {
				return err
			}
			sum := filepath.Join(dir, "go.sum")
			data, err := os.ReadFile(sum)
			if errors.Is(err, fs.ErrNotExist) {
				continue
			} else if err != nil {
				return err
			}
			var keep []string
			for _, l := range strings.SplitAfter(string(data), "\n") {
				if l != "" && !strings.HasPrefix(l, prefix+" ") && !strings.HasPrefix(l, prefix+"/") {
					keep = append(keep, l)
				}
			}
			if len(keep) == 0 {
				err = os.Remove(sum)
			} else {
				err = os.WriteFile(sum, []byte(strings.Join(keep, "")), 0o644)
			}
			if err != nil {
				return err
			}
		}
	}
	return nil
}

// moduleDirs returns the directory of every module go.work uses (read from the file: loading the workspace
// would need the very requirements being tidied).
func moduleDirs(root string) ([]string, error) {
	cmd := exec.Command("go", "work", "edit", "-json", filepath.Join(root, "go.work"))
	out, err := cmd.Output()
	if err != nil {
		return nil, fmt.Errorf("go work edit -json: %w", err)
	}
	var work struct{ Use []struct{ DiskPath string } }
	if err := json.Unmarshal(out, &work); err != nil {
		return nil, err
	}
	var dirs []string
	for _, u := range work.Use {
		dirs = append(dirs, filepath.Join(root, u.DiskPath))
	}
	return dirs, nil
}

func goCmd(dir string, env []string, args ...string) error {
	cmd := exec.Command("go", args...)
	cmd.Dir, cmd.Env = dir, env
	out, err := cmd.CombinedOutput()
	if err != nil {
		return fmt.Errorf("go %s: %w\n%s", strings.Join(args, " "), err, out)
	}
	return nil
}

// consumerCache returns the module cache the consumers use, $POSTBOX_TOOLS/consumercheck-modcache (by default
// under ~/.cache/postbox-tools, where scripts/test.sh keeps its tools).
func consumerCache() (string, error) {
	tools := os.Getenv("POSTBOX_TOOLS")
	if tools == "" {
		home, err := os.UserHomeDir()
		if err != nil {
			return "", err
		}
		tools = filepath.Join(home, ".cache", "postbox-tools")
	}
	dir := filepath.Join(tools, "consumercheck-modcache")
	return dir, os.MkdirAll(dir, 0o755)
}

// dropOurs removes our modules from the module cache at modcache.
func dropOurs(modcache string) {
	ours := filepath.FromSlash(prefix)
	removeAll(filepath.Join(modcache, ours))
	removeAll(filepath.Join(modcache, "cache", "download", ours))
	matches, _ := filepath.Glob(filepath.Join(modcache, ours) + "@*")
	for _, m := range matches {
		removeAll(m)
	}
}

// removeAll removes dir, module cache included (whose files the go command makes read-only).
func removeAll(dir string) {
	_ = filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err == nil && d.IsDir() {
			_ = os.Chmod(path, 0o755)
		}
		return nil
	})
	_ = os.RemoveAll(dir)
}

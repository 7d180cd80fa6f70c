// Package docs checks that every Go snippet in the README and docs/ is cut from a program under examples/ (or
// from an Example function, in an example_test.go file) that the tests compile and run, so that the
// documentation cannot drift from code that works.
//
// A snippet is marked in the Markdown by the comment line right above its fence:
//
//	<!-- go: examples/endtoend/main.go quick start -->
//
// and in the program by regions between "// docs: NAME" and "// docs: end" lines. The snippet must be the
// regions of that file whose NAME starts with the given prefix ("quick start" takes "quick start, client",
// "quick start, relay"...), in file order, each dedented, separated by one blank line.
//
// Snippets of the producers in other languages (```python, ```js, ```sql blocks) are checked the same way when
// they have a marker (<!-- python: examples/python/enqueue.py python -->); their regions are between comment
// lines of their own language ("# docs: NAME", "// docs: NAME", "-- docs: NAME") and the matching "docs: end".
package docs

import (
	"bufio"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// root is the repository's root, from this package's directory.
const root = "../.."

var marker = regexp.MustCompile(`^<!-- (go|python|js|sql): (\S+) (.+) -->$`)

// fences are the code blocks checked, by their info string: Go's always, the others' when they have a marker.
var fences = map[string]bool{"```go": true, "```python": false, "```js": false, "```sql": false}

func TestSnippetsMatchExamples(t *testing.T) {
	docs, err := filepath.Glob(filepath.Join(root, "docs", "*.md"))
	if err != nil {
		t.Fatal(err)
	}
	docs = append([]string{filepath.Join(root, "README.md")}, docs...)
	seen := 0
	for _, doc := range docs {
		for _, s := range snippets(t, doc) {
			where := fmt.Sprintf("%s:%d", strings.TrimPrefix(doc, root+"/"), s.line)
			if !fences[s.fence] && s.file == "" {
				continue // a SQL or shell reference block, not cut from a program
			}
			seen++
			if s.file == "" {
				t.Errorf("%s: a Go snippet with no <!-- go: examples/PROGRAM REGION --> line above it; cut it from a program under examples/", where)
				continue
			}
			if !strings.HasPrefix(s.file, "examples/") && !strings.HasSuffix(s.file, "_test.go") {
				t.Errorf("%s: snippet from %s; snippets come from programs under examples/ or Example functions", where, s.file)
				continue
			}
			want, err := regions(filepath.Join(root, s.file), s.region)
			if err != nil {
				t.Errorf("%s: %v", where, err)
				continue
			}
			if s.text != want {
				t.Errorf("%s: the snippet differs from %s, regions %q; paste this:\n%s", where, s.file, s.region, want)
			}
		}
	}
	if seen == 0 {
		t.Fatal("no Go snippet found in the README: is root right?")
	}
}

type snippet struct {
	line         int
	fence        string
	file, region string
	text         string
}

// snippets returns the blocks of a Markdown file whose fences are in fences, with the marker above each, if any.
func snippets(t *testing.T, path string) []snippet {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(string(b), "\n")
	var out []snippet
	for i := 0; i < len(lines); i++ {
		fence := strings.TrimSpace(lines[i])
		if _, ok := fences[fence]; !ok {
			continue
		}
		s := snippet{line: i + 1, fence: fence}
		if i > 0 {
			if m := marker.FindStringSubmatch(strings.TrimSpace(lines[i-1])); m != nil {
				s.file, s.region = m[2], m[3]
			}
		}
		var body []string
		for i++; i < len(lines) && strings.TrimSpace(lines[i]) != "```"; i++ {
			body = append(body, lines[i])
		}
		s.text = strings.Join(body, "\n")
		out = append(out, s)
	}
	return out
}

// regions returns the regions of a program whose names start with prefix, dedented and joined by a blank line.
// Region lines are comments in the program's language: //, # or --.
func regions(path, prefix string) (string, error) {
	f, err := os.Open(path)
	if err != nil {
		return "", err
	}
	defer f.Close()
	var parts []string
	var cur []string
	in := false
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := sc.Text()
		trimmed := strings.TrimSpace(line)
		for _, c := range []string{"# ", "-- "} {
			if strings.HasPrefix(trimmed, c+"docs: ") {
				trimmed = "// " + strings.TrimPrefix(trimmed, c)
			}
		}
		switch {
		case trimmed == "// docs: end":
			if in {
				parts = append(parts, dedent(cur))
			}
			in, cur = false, nil
		case strings.HasPrefix(trimmed, "// docs: "):
			in = strings.HasPrefix(strings.TrimPrefix(trimmed, "// docs: "), prefix)
		case in:
			cur = append(cur, line)
		}
	}
	if err := sc.Err(); err != nil {
		return "", err
	}
	if len(parts) == 0 {
		return "", fmt.Errorf("%s has no region named %q (between // docs: %s and // docs: end)", path, prefix, prefix)
	}
	return strings.Join(parts, "\n\n"), nil
}

// dedent removes the leading tabs (or spaces) every non-empty line has.
func dedent(lines []string) string {
	n := -1
	for _, l := range lines {
		if strings.TrimSpace(l) == "" {
			continue
		}
		if k := len(l) - len(strings.TrimLeft(l, "\t ")); n < 0 || k < n {
			n = k
		}
	}
	for i, l := range lines {
		if len(l) >= n && n > 0 {
			lines[i] = l[n:]
		}
	}
	return strings.TrimRight(strings.Join(lines, "\n"), "\n")
}

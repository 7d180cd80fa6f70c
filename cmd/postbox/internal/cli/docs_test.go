package cli

import (
	"errors"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// docsRoot is the repository's root, from this package's directory.
const docsRoot = "../../../.."

// TestDocsCommandLinesParse reads every `postbox …` command line of the README and docs/*.md, in shell blocks and
// in inline code, and parses it with the real command's flags: the command, its action (migrate up, dead list…)
// and every flag must exist, so that a command or flag renamed in the CLI fails here until the docs follow
// (issue 35: docs/POOLERS.md and docs/PERFORMANCE.md showed `postbox bench` long after it had gone).
func TestDocsCommandLinesParse(t *testing.T) {
	files, err := filepath.Glob(filepath.Join(docsRoot, "docs", "*.md"))
	if err != nil {
		t.Fatal(err)
	}
	files = append([]string{filepath.Join(docsRoot, "README.md")}, files...)
	seen := 0
	for _, path := range files {
		b, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		name := strings.TrimPrefix(filepath.ToSlash(path), docsRoot+"/")
		for _, l := range docCommandLines(string(b)) {
			seen++
			if err := checkDocCommand(l.words, l.inline); err != nil {
				t.Errorf("%s:%d: %s\n\t%s", name, l.line, err, strings.Join(l.words, " "))
			}
		}
	}
	if seen < 20 {
		t.Fatalf("found only %d postbox command lines in the README and docs/: is docsRoot right?", seen)
	}
}

// TestDocsCommandCheckCatchesDrift shows that the check fails for the mistakes it exists for.
func TestDocsCommandCheckCatchesDrift(t *testing.T) {
	for _, line := range []string{
		"postbox bench --db postgres://db/x",
		"postbox relay --db postgres://db/x --brokr nats://n:4222",
		"postbox dead requeue --db postgres://db/x",
		"postbox cleanup --db postgres://db/x --batch lots",
		"postbox migrate --db postgres://db/x",
	} {
		if err := checkDocCommand(strings.Fields(line), false); err == nil {
			t.Errorf("%s: accepted; want an error", line)
		}
	}
	md := "```sh\nPOSTBOX_DB=sqlite:x.db postbox relay \\\n    --broker stdout: # a comment\n```\n" +
		"Run `postbox status --db URL`, then `postbox topics pause|resume|list`.\n"
	var got []string
	for _, l := range docCommandLines(md) {
		got = append(got, fmt.Sprintf("%d %s", l.line, strings.Join(l.words, " ")))
	}
	want := []string{"2 postbox relay --broker stdout:", "5 postbox status --db URL", "5 postbox topics pause|resume|list"}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("command lines found:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}

type docLine struct {
	line   int
	words  []string // from "postbox" on
	inline bool     // from inline code in prose, where a command may be named without its action
}

var (
	inlineCode = regexp.MustCompile("``? ?(postbox [^`]+?) ?``?")
	envAssign  = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*=`)
)

// docCommandLines returns the postbox commands of a Markdown text: each line of a shell block (continuations
// joined) whose command, or one of whose piped or chained commands, is postbox; and each inline code span that
// starts with "postbox ".
func docCommandLines(md string) []docLine {
	var out []docLine
	lines := strings.Split(md, "\n")
	fence := ""
	for i := 0; i < len(lines); i++ {
		trimmed := strings.TrimSpace(lines[i])
		if strings.HasPrefix(trimmed, "```") {
			if fence == "" {
				fence = strings.TrimPrefix(trimmed, "```")
				if fence == "" {
					fence = "text"
				}
			} else {
				fence = ""
			}
			continue
		}
		if fence == "" {
			for _, m := range inlineCode.FindAllStringSubmatch(lines[i], -1) {
				out = append(out, docLine{line: i + 1, words: shellWords(m[1]), inline: true})
			}
			continue
		}
		if fence != "sh" && fence != "bash" && fence != "shell" && fence != "console" && fence != "text" {
			continue
		}
		start := i
		text := trimmed
		for strings.HasSuffix(text, `\`) && i+1 < len(lines) {
			i++
			text = strings.TrimSuffix(text, `\`) + " " + strings.TrimSpace(lines[i])
		}
		text = strings.TrimPrefix(text, "$ ")
		for _, cmd := range shellCommands(text) {
			for len(cmd) > 0 && envAssign.MatchString(cmd[0]) {
				cmd = cmd[1:]
			}
			if len(cmd) > 0 && (cmd[0] == "postbox" || strings.HasSuffix(cmd[0], "/postbox")) {
				cmd[0] = "postbox"
				out = append(out, docLine{line: start + 1, words: cmd})
			}
		}
	}
	return out
}

// shellCommands splits a shell line into its commands (at |, ||, &&, ;, and a trailing # comment), each as words.
func shellCommands(line string) [][]string {
	var cmds [][]string
	var cur []string
	for _, w := range shellWords(line) {
		switch {
		case w == "#" || strings.HasPrefix(w, "#"):
			return append(cmds, cur)
		case w == "|" || w == "||" || w == "&&" || w == ";":
			cmds, cur = append(cmds, cur), nil
		default:
			cur = append(cur, w)
		}
	}
	return append(cmds, cur)
}

// shellWords splits a line into words as a shell would for these purposes: single and double quotes group,
// a backslash escapes the next character.
func shellWords(s string) []string {
	var words []string
	var w strings.Builder
	inWord := false
	var quote rune
	for _, r := range s {
		switch {
		case quote != 0 && r == quote:
			quote = 0
		case quote != 0:
			w.WriteRune(r)
		case r == '\'' || r == '"':
			quote, inWord = r, true
		case r == ' ' || r == '\t':
			if inWord {
				words = append(words, w.String())
				w.Reset()
				inWord = false
			}
		default:
			w.WriteRune(r)
			inWord = true
		}
	}
	if inWord {
		words = append(words, w.String())
	}
	return words
}

// placeholder matches a value the docs leave for the reader to fill in: URL, N, …, <name>.
var placeholder = regexp.MustCompile(`^[A-Z][A-Z_]*$|…|\.\.\.|^<.*>$|^\$`)

// checkDocCommand parses a postbox command line with the real command's flags. A value the docs leave as a
// placeholder may fail its flag's parsing; an unknown command, action or flag never passes.
func checkDocCommand(words []string, inline bool) error {
	if len(words) < 2 {
		return nil // "postbox" alone names the program
	}
	name := words[1]
	switch name {
	case "--help", "-h", "help", "--version", "-v":
		return nil
	}
	if inline && strings.HasPrefix(name, "-") {
		// Prose naming a flag of the daemon in general ("postbox --db mysql://…"): some command must have it.
		flagName, _, _ := strings.Cut(strings.TrimLeft(name, "-"), "=")
		if !contains(knownKeys(), flagName) {
			return fmt.Errorf("no postbox command has the flag --%s", flagName)
		}
		return nil
	}
	c := lookup(name)
	if c == nil {
		return fmt.Errorf("postbox has no command %q", name)
	}
	f := newFlagSet(c.name)
	addCommon(f, &commonOptions{})
	c.setup(f)
	args := words[2:]
	for {
		positional, err := f.parse(args, func(string) string { return "" }, func(string) (map[string]any, error) { return nil, nil })
		if errors.Is(err, flag.ErrHelp) {
			return nil
		}
		if err == nil {
			return checkDocAction(c, positional, inline)
		}
		// A value left as a placeholder: drop the flag and its value, and parse the rest.
		if inline && strings.HasSuffix(err.Error(), " needs a value") {
			return nil // prose naming a flag: `postbox relay --http`
		}
		m := regexp.MustCompile(`^(-[^ ]+) "((?:[^"\\]|\\.)*)" `).FindStringSubmatch(err.Error())
		if m == nil || !placeholder.MatchString(m[2]) {
			return err
		}
		args = dropFlag(args, m[1], m[2])
	}
}

func dropFlag(args []string, flagName, value string) []string {
	for i, a := range args {
		bare := strings.TrimLeft(a, "-")
		switch {
		case bare == strings.TrimLeft(flagName, "-") && i+1 < len(args) && args[i+1] == value:
			return append(append([]string{}, args[:i]...), args[i+2:]...)
		case bare == strings.TrimLeft(flagName, "-")+"="+value:
			return append(append([]string{}, args[:i]...), args[i+1:]...)
		}
	}
	return nil
}

// checkDocAction checks a command's first positional argument against the actions its synopsis lists
// (migrate up|status|sql, dead list|count|retry|purge…); an inline mention may list several, as a|b.
func checkDocAction(c *command, positional []string, inline bool) error {
	actions := commandActions(c)
	if len(actions) == 0 {
		return nil
	}
	if len(positional) == 0 {
		if inline {
			return nil
		}
		return fmt.Errorf("postbox %s needs an action: %s", c.name, strings.Join(actions, ", "))
	}
	for _, a := range strings.Split(positional[0], "|") {
		if !contains(actions, a) {
			return fmt.Errorf("postbox %s has no action %q; it has %s", c.name, a, strings.Join(actions, ", "))
		}
	}
	return nil
}

func contains(list []string, s string) bool {
	for _, e := range list {
		if e == s {
			return true
		}
	}
	return false
}

// TestDocsConfigFileLoads loads the config file docs/DEPLOY.md shows (the yaml block under its
// <!-- config: postbox.yaml --> line) and builds its event registry, so the documented format of `events` cannot
// drift from what the CLI reads.
func TestDocsConfigFileLoads(t *testing.T) {
	b, err := os.ReadFile(filepath.Join(docsRoot, "docs", "DEPLOY.md"))
	if err != nil {
		t.Fatal(err)
	}
	_, rest, ok := strings.Cut(string(b), "<!-- config: postbox.yaml -->\n```yaml\n")
	if !ok {
		t.Fatal("docs/DEPLOY.md has no ```yaml block under <!-- config: postbox.yaml -->")
	}
	yamlText, _, _ := strings.Cut(rest, "```")
	dir := t.TempDir()
	path := filepath.Join(dir, "postbox.yaml")
	if err := os.WriteFile(path, []byte(yamlText), 0o600); err != nil {
		t.Fatal(err)
	}
	// The schema_file the example names, relative to the config file.
	if err := os.MkdirAll(filepath.Join(dir, "schemas"), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "schemas", "order-cancelled.json"), []byte(`{"type": "object"}`), 0o600); err != nil {
		t.Fatal(err)
	}
	fc, err := loadConfigFile(path)
	if err != nil {
		t.Fatalf("the config file of docs/DEPLOY.md does not load: %v", err)
	}
	reg, err := fc.registry()
	if err != nil || reg == nil {
		t.Fatalf("the events of docs/DEPLOY.md's config file make no registry: %v", err)
	}
	for _, typ := range []string{"order.created", "order.cancelled"} {
		if _, ok := reg.Lookup(typ); !ok {
			t.Errorf("the registry from docs/DEPLOY.md has no event type %s", typ)
		}
	}
	for _, key := range []string{"db", "broker", "route", "http", "batch-size"} {
		if _, ok := fc.values[key]; !ok {
			t.Errorf("docs/DEPLOY.md's config file: key %s not read", key)
		}
	}
}

// Package cli is the postbox command: the relay daemon and the operator's tools for the outbox (migrations,
// sending, status, dead letters). Run is the whole program; main only wires it to the process. The demo and the
// benchmark are commands of their own (cmd/postbox/demo, bench/cmd/postbox-bench), so that this binary links no
// embedded server and no benchmark harness.
//
// Every flag can also be set by an environment variable (POSTBOX_ and the flag's name in capitals, dashes as
// underscores: --publish-timeout is POSTBOX_PUBLISH_TIMEOUT) and by a key of the same name in a YAML config file
// (--config FILE or POSTBOX_CONFIG). A flag on the command line wins over the environment, which wins over the
// file, which wins over the default.
//
// Exit codes: 0 when the command did its job, 1 when it failed at run time (database or broker unreachable,
// nothing to retry...), 2 when it was called wrongly (unknown command or flag, missing or malformed value).
package cli

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"regexp"
	"slices"
	"strings"
)

// Exit codes of Run.
const (
	ExitOK      = 0 // the command did its job
	ExitFailure = 1 // the command failed at run time
	ExitUsage   = 2 // the command was called wrongly
)

// command is one subcommand. setup defines its flags and returns the function that runs it.
type command struct {
	name     string
	synopsis string // after "postbox NAME"
	summary  string // one line for the command list
	help     string // paragraphs for NAME --help
	examples []string
	setup    func(f *flagSet) func(ctx context.Context, rt *runtime, args []string) error
}

// commands are every subcommand, in the order the help lists them.
var commands []*command

func init() {
	commands = []*command{relayCommand, migrateCommand, sendCommand, statusCommand, deadCommand,
		topicsCommand, cleanupCommand, partitionsCommand, walCommand, consoleCommand, versionCommand}
}

func lookup(name string) *command {
	for _, c := range commands {
		if c.name == name {
			return c
		}
	}
	return nil
}

// commandActions returns the actions a command's synopsis lists before its flags ("up|status|sql --db URL" gives
// up, status and sql; "pause|resume TOPIC … | list …" gives pause, resume and list), or nil for a command that
// takes none.
func commandActions(c *command) []string {
	var actions []string
	words := strings.Fields(c.synopsis)
	for i, w := range words {
		if (i == 0 || words[i-1] == "|") && actionWords.MatchString(w) {
			actions = append(actions, strings.Split(w, "|")...)
		}
	}
	return actions
}

// checkWords catches the slips a parser cannot: an action the command does not have (dead lsit), and a broker
// written as its scheme alone (--broker stdout, for stdout:), each with what was probably meant.
func checkWords(c *command, f *flagSet, positional []string) error {
	if actions := commandActions(c); len(actions) > 0 && len(positional) > 0 && !slices.Contains(actions, positional[0]) {
		list := strings.Join(actions[:len(actions)-1], ", ") + " or " + actions[len(actions)-1]
		msg := fmt.Sprintf("unknown %s action %q: use %s", c.name, positional[0], list)
		if guess := suggest(positional[0], actions); guess != "" {
			msg += fmt.Sprintf("; did you mean %s %s?", c.name, guess)
		}
		return usageErrorf("%s", msg)
	}
	if o := f.byName["broker"]; o != nil {
		v := o.value.String()
		if _, known := brokerSchemes[strings.ToLower(v)]; known && !strings.Contains(v, ":") {
			if strings.EqualFold(v, "stdout") {
				return usageErrorf("--broker %s: write stdout: (with its colon, as every broker URL has)", v)
			}
			return usageErrorf("--broker %s is a scheme without its address: write %s://HOST… ('postbox relay --help' lists each URL's form)", v, strings.ToLower(v))
		}
	}
	return nil
}

// suggest returns the candidate closest to what the user typed when it is close enough to be a slip: at most
// one edit for a short word, two for a longer one (a swap of neighbours counts as one), else the one candidate
// it begins, or "" when none is.
func suggest(typed string, candidates []string) string {
	best, bestDist := "", 3
	limit := 1
	if len(typed) > 4 {
		limit = 2
	}
	typed = strings.ToLower(typed)
	for _, c := range candidates {
		if d := editDistance(typed, c); d <= limit && d < bestDist {
			best, bestDist = c, d
		}
	}
	if best == "" && len(typed) >= 3 { // the start of one candidate only: stat for status
		for _, c := range candidates {
			if strings.HasPrefix(c, typed) {
				if best != "" {
					return ""
				}
				best = c
			}
		}
	}
	return best
}

// editDistance is the optimal string alignment distance: insertions, deletions, substitutions and swaps of
// neighbouring characters each cost one.
func editDistance(a, b string) int {
	ra, rb := []rune(a), []rune(b)
	d := make([][]int, len(ra)+1)
	for i := range d {
		d[i] = make([]int, len(rb)+1)
		d[i][0] = i
	}
	for j := range rb {
		d[0][j+1] = j + 1
	}
	for i := 1; i <= len(ra); i++ {
		for j := 1; j <= len(rb); j++ {
			cost := 1
			if ra[i-1] == rb[j-1] {
				cost = 0
			}
			d[i][j] = min(d[i-1][j]+1, d[i][j-1]+1, d[i-1][j-1]+cost)
			if i > 1 && j > 1 && ra[i-1] == rb[j-2] && ra[i-2] == rb[j-1] {
				d[i][j] = min(d[i][j], d[i-2][j-2]+1)
			}
		}
	}
	return d[len(ra)][len(rb)]
}

var actionWords = regexp.MustCompile(`^[a-z][a-z-]*(\|[a-z][a-z-]*)*$`)

// runtime is what a running command uses to talk to the world.
type runtime struct {
	stdout  io.Writer
	stderr  io.Writer // scrubbed of secrets
	tty     bool      // stderr is a terminal: live progress lines are welcome
	env     func(string) string
	log     *slog.Logger
	secrets *secrets
	file    *fileConfig // nil without a config file
	common  *commonOptions
}

// commonOptions are the options every command has.
type commonOptions struct {
	config    string
	logLevel  string
	logFormat string
}

func addCommon(f *flagSet, c *commonOptions) {
	f.String(&c.config, "config", "c", "", "FILE", "YAML file setting any option by its name (see postbox --help)")
	f.String(&c.logLevel, "log-level", "", "info", "LEVEL", "log level: debug, info, warn or error")
	f.String(&c.logFormat, "log-format", "", "text", "FORMAT", "log format: text or json")
}

// Run runs the postbox command with args (without the program name), writing output to stdout and logs and
// errors to stderr, reading the environment through env. It returns the exit code. Cancelling ctx (main does it
// on SIGINT and SIGTERM) stops a long-running command gracefully.
func Run(ctx context.Context, args []string, stdout, stderr io.Writer, env func(string) string) int {
	sec := &secrets{}
	tty := isTerminal(stderr)
	stderr = scrubWriter{w: stderr, s: sec}
	if len(args) == 0 {
		printUsage(stderr)
		return ExitUsage
	}
	name := args[0]
	switch name {
	case "-h", "-help", "--help", "help":
		if name == "help" && len(args) > 1 {
			if c := lookup(args[1]); c != nil {
				printHelp(stdout, c)
				return ExitOK
			}
			fmt.Fprintf(stderr, "postbox: unknown command %q\n", args[1])
			printUsage(stderr)
			return ExitUsage
		}
		printUsage(stdout)
		return ExitOK
	case "-v", "-version", "--version":
		name, args = "version", []string{"version"}
	}
	c := lookup(name)
	if c == nil {
		names := make([]string, len(commands))
		for i, c := range commands {
			names[i] = c.name
		}
		if guess := suggest(name, names); guess != "" {
			fmt.Fprintf(stderr, "postbox: unknown command %q; did you mean %s?\nRun 'postbox --help' for the commands.\n", name, guess)
			return ExitUsage
		}
		fmt.Fprintf(stderr, "postbox: unknown command %q\n\n", name)
		printUsage(stderr)
		return ExitUsage
	}

	f := newFlagSet(c.name)
	common := &commonOptions{}
	addCommon(f, common)
	run := c.setup(f)
	var file *fileConfig
	positional, err := f.parse(args[1:], env, func(path string) (map[string]any, error) {
		var err error
		file, err = loadConfigFile(path)
		if err != nil {
			return nil, err
		}
		return file.values, nil
	})
	if errors.Is(err, flag.ErrHelp) {
		printHelp(stdout, c)
		return ExitOK
	}
	if err == nil {
		err = checkWords(c, f, positional)
	}
	if err != nil {
		return usageFailed(stderr, c, err)
	}
	for _, o := range f.opts {
		if o.secret {
			for _, v := range strings.Fields(o.value.String()) {
				sec.addURL(v)
			}
		}
		if o.secretValue {
			sec.add(o.value.String())
		}
	}
	log, err := newLogger(stderr, common)
	if err != nil {
		return usageFailed(stderr, c, err)
	}
	if keys := file.secretsReadable(f.opts); len(keys) > 0 {
		log.Warn(fmt.Sprintf("config file %s is readable by every user (mode %04o) and holds secrets (%s): run chmod 600 %s, "+
			"or chmod 640 with a group of the daemon's user", file.path, file.mode, strings.Join(keys, ", "), file.path))
	}
	rt := &runtime{stdout: stdout, stderr: stderr, tty: tty, env: env, log: log, secrets: sec, file: file, common: common}
	err = run(ctx, rt, positional)
	switch {
	case err == nil:
		return ExitOK
	case isUsage(err):
		return usageFailed(stderr, c, err)
	default:
		fmt.Fprintf(stderr, "postbox %s: %s\n", c.name, printableLines(err.Error()))
		return ExitFailure
	}
}

func usageFailed(w io.Writer, c *command, err error) int {
	fmt.Fprintf(w, "postbox %s: %s\nRun 'postbox %s --help' for usage.\n", c.name, printableLines(err.Error()), c.name)
	return ExitUsage
}

func newLogger(w io.Writer, c *commonOptions) (*slog.Logger, error) {
	var level slog.Level
	if err := level.UnmarshalText([]byte(c.logLevel)); err != nil {
		return nil, usageErrorf("--log-level %q: use debug, info, warn or error", c.logLevel)
	}
	opts := &slog.HandlerOptions{Level: level}
	switch c.logFormat {
	case "text":
		return slog.New(slog.NewTextHandler(w, opts)), nil
	case "json":
		return slog.New(slog.NewJSONHandler(jsonEscaper{w}, opts)), nil
	default:
		return nil, usageErrorf("--log-format %q: use text or json", c.logFormat)
	}
}

func printUsage(w io.Writer) {
	fmt.Fprint(w, `postbox runs the transactional outbox relay and the tools around it.

Usage:
  postbox COMMAND [flags]

Commands:
`)
	for _, c := range commands {
		fmt.Fprintf(w, "  %-11s %s\n", c.name, c.summary)
	}
	fmt.Fprint(w, `
Run 'postbox COMMAND --help' for a command's flags and examples.

Every flag can also be set by an environment variable, POSTBOX_ and the flag's name in capitals with dashes as
underscores (--db is POSTBOX_DB, --batch-size is POSTBOX_BATCH_SIZE; repeated flags take whitespace-separated
values), and by a key of the same name in a YAML file given with --config or POSTBOX_CONFIG. A flag on the
command line wins over the environment, which wins over the file, which wins over the default.

Database URLs: postgres://user:pass@host/db, mysql://user:pass@host:3306/db, sqlite:path/to/file.db.
Broker URLs: nats://host:4222, kafka://host:9092, amqp://user:pass@host:5672/, mqtt://host:1883,
redis://host:6379, pubsub://project, https://host/path (webhook), stdout: (see postbox relay --help).
Secrets in URLs (passwords, token parameters) are never printed.

Exit codes: 0 success, 1 run-time failure, 2 usage error.

New to Postbox? See it at work with no set-up, from a clone of the repository: go run ./cmd/postbox/demo
(or make demo). The README's Install section says how to install this command and use the library.
`)
}

func printHelp(w io.Writer, c *command) {
	fmt.Fprintf(w, "Usage: postbox %s %s\n\n%s\n", c.name, c.synopsis, strings.TrimSpace(c.help))
	f := newFlagSet(c.name)
	c.setup(f)
	addCommon(f, &commonOptions{})
	fmt.Fprint(w, "\nFlags (each also settable by the environment variable shown, or by its name in the config file):\n")
	for _, o := range f.opts {
		names := "--" + o.name
		if o.short != "" {
			names = "-" + o.short + ", " + names
		}
		if o.placeholder != "" {
			names += " " + o.placeholder
		}
		if o.list {
			names += " (repeatable)"
		}
		usage := o.usage
		if o.def != "" && o.def != "0" && o.def != "0s" {
			usage += " (default " + o.def + ")"
		}
		fmt.Fprintf(w, "  %s\n      %s [%s]\n", names, usage, o.env())
	}
	if len(c.examples) > 0 {
		fmt.Fprint(w, "\nExamples:\n")
		for _, e := range c.examples {
			fmt.Fprintf(w, "  %s\n", e)
		}
	}
	fmt.Fprint(w, "\nExit codes: 0 success, 1 run-time failure, 2 usage error.\n")
}

// readData reads a --data value: the text itself, the contents of a file for @path, or standard input for @-.
func readData(v string) ([]byte, error) {
	if v == "@-" {
		b, err := io.ReadAll(os.Stdin)
		if err != nil {
			return nil, fmt.Errorf("--data @-: %w", err)
		}
		return b, nil
	}
	if path, ok := strings.CutPrefix(v, "@"); ok {
		b, err := os.ReadFile(path)
		if err != nil {
			return nil, fmt.Errorf("--data %s: %w", v, err)
		}
		return b, nil
	}
	return []byte(v), nil
}

// isTerminal reports whether w is a character device, such as a terminal.
func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	if !ok {
		return false
	}
	fi, err := f.Stat()
	return err == nil && fi.Mode()&os.ModeCharDevice != 0
}

package cli

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"
)

// option is one flag of a command. Each one can also be set by an environment variable (POSTBOX_ and the name in
// capitals, dashes as underscores) and by the key of the same name in the config file. A flag on the command
// line wins over the environment, which wins over the file, which wins over the default.
type option struct {
	name, short, usage string
	placeholder        string // shown in help: URL, N, DURATION; empty for booleans
	def                string // shown in help when not empty
	list               bool   // repeatable; the environment separates values by whitespace
	secret             bool   // a URL whose password must never be printed
	secretValue        bool   // a value that is itself a secret
	from               string // where the value came from, in the user's words; "" for the default
	value              flag.Value
}

func (o *option) env() string { return envName(o.name) }

func envName(name string) string {
	return "POSTBOX_" + strings.ToUpper(strings.ReplaceAll(name, "-", "_"))
}

// flagSet is a command's options over the standard library's flag package, which accepts -name and --name alike.
type flagSet struct {
	fs     *flag.FlagSet
	opts   []*option
	byName map[string]*option
}

func newFlagSet(name string) *flagSet {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.SetOutput(io.Discard) // errors are reported by Run, help by printHelp
	return &flagSet{fs: fs, byName: map[string]*option{}}
}

func (f *flagSet) add(o *option) {
	f.fs.Var(o.value, o.name, o.usage)
	if o.short != "" {
		f.fs.Var(o.value, o.short, o.usage)
		f.byName[o.short] = o
	}
	f.byName[o.name] = o
	f.opts = append(f.opts, o)
}

// String defines a string option.
func (f *flagSet) String(p *string, name, short, def, placeholder, usage string) *option {
	*p = def
	o := &option{name: name, short: short, usage: usage, placeholder: placeholder, def: def, value: (*stringValue)(p)}
	f.add(o)
	return o
}

// URL defines a string option holding a URL with possible credentials.
func (f *flagSet) URL(p *string, name, short, usage string) *option {
	o := f.String(p, name, short, "", "URL", usage)
	o.secret = true
	return o
}

// Int defines an integer option.
func (f *flagSet) Int(p *int, name string, def int, usage string) {
	*p = def
	f.add(&option{name: name, usage: usage, placeholder: "N", def: strconv.Itoa(def), value: (*intValue)(p)})
}

// Duration defines a duration option such as 500ms or 2m.
func (f *flagSet) Duration(p *time.Duration, name string, def time.Duration, usage string) {
	*p = def
	f.add(&option{name: name, usage: usage, placeholder: "DURATION", def: def.String(), value: (*durationValue)(p)})
}

// Bool defines a boolean option.
func (f *flagSet) Bool(p *bool, name, short, usage string) {
	f.add(&option{name: name, short: short, usage: usage, value: (*boolValue)(p)})
}

// List defines a repeatable option.
func (f *flagSet) List(p *[]string, name, short, placeholder, usage string) *option {
	o := &option{name: name, short: short, usage: usage, placeholder: placeholder, list: true, value: (*listValue)(p)}
	f.add(o)
	return o
}

// parse reads args, then fills every option not given on the command line from the environment, then from the
// config file, and returns the positional arguments. Flags and positional arguments may be interleaved
// (`migrate up --db URL` and `migrate --db URL up` are the same). loadFile is called with the config file's path
// once the command line and environment are read, and returns the file's values by key.
func (f *flagSet) parse(args []string, env func(string) string, loadFile func(path string) (map[string]any, error)) ([]string, error) {
	var positional []string
	for {
		if err := f.fs.Parse(args); err != nil {
			return nil, f.flagError(err)
		}
		args = f.fs.Args()
		if len(args) == 0 {
			break
		}
		positional = append(positional, args[0])
		args = args[1:]
	}
	given := map[string]bool{}
	f.fs.Visit(func(fl *flag.Flag) {
		o := f.byName[fl.Name]
		given[o.name], o.from = true, "--"+o.name
	})

	fromEnv := map[string]bool{}
	for _, o := range f.opts {
		v := env(o.env())
		if given[o.name] || v == "" {
			continue
		}
		if err := setValue(o, strings.Fields(v), v); err != nil {
			return nil, usageErrorf("environment variable %s=%q %v", o.env(), v, err)
		}
		fromEnv[o.name], o.from = true, o.env()
	}

	var path string
	if o := f.byName["config"]; o != nil {
		path = o.value.String()
	}
	if path == "" {
		return positional, nil
	}
	file, err := loadFile(path)
	if err != nil {
		return nil, err
	}
	for _, o := range f.opts {
		v, ok := file[o.name]
		if given[o.name] || fromEnv[o.name] || !ok {
			continue
		}
		values, err := yamlValues(v)
		if err != nil {
			return nil, usageErrorf("config file %s, key %s: %v", path, o.name, err)
		}
		if err := setValue(o, values, strings.Join(values, " ")); err != nil {
			return nil, usageErrorf("config file %s, key %s: %q %v", path, o.name, strings.Join(values, " "), err)
		}
		o.from = fmt.Sprintf("config file %s, key %s", path, o.name)
	}
	return positional, nil
}

func setValue(o *option, values []string, whole string) error {
	if !o.list {
		return o.value.Set(whole)
	}
	o.value.(*listValue).reset()
	for _, v := range values {
		if err := o.value.Set(v); err != nil {
			return err
		}
	}
	return nil
}

// yamlValues turns a scalar or a list from the config file into option values.
func yamlValues(v any) ([]string, error) {
	switch x := v.(type) {
	case []any:
		out := make([]string, 0, len(x))
		for _, e := range x {
			s, err := yamlScalar(e)
			if err != nil {
				return nil, err
			}
			out = append(out, s)
		}
		return out, nil
	default:
		s, err := yamlScalar(x)
		return []string{s}, err
	}
}

func yamlScalar(v any) (string, error) {
	switch x := v.(type) {
	case string:
		return x, nil
	case int, int64, uint64, float64, bool:
		return fmt.Sprint(x), nil
	case nil:
		return "", nil
	case map[string]any:
		return "", errors.New("want a value, not a mapping; " + quoteHint)
	default:
		return "", fmt.Errorf("want a single value or a list of values, got %T", v)
	}
}

type stringValue string

func (s *stringValue) Set(v string) error { *s = stringValue(v); return nil }
func (s *stringValue) String() string     { return string(*s) }

type intValue int

func (i *intValue) Set(v string) error {
	n, err := strconv.Atoi(v)
	if err != nil {
		return errors.New("is not a whole number")
	}
	if n < 0 {
		return errors.New("is negative; use 0 or more")
	}
	*i = intValue(n)
	return nil
}
func (i *intValue) String() string { return strconv.Itoa(int(*i)) }

type durationValue time.Duration

func (d *durationValue) Set(v string) error {
	t, err := time.ParseDuration(v)
	if err != nil {
		return errors.New("is not a duration; write it like 500ms, 10s or 2m")
	}
	if t < 0 {
		return errors.New("is negative; use 0 or more")
	}
	*d = durationValue(t)
	return nil
}
func (d *durationValue) String() string { return time.Duration(*d).String() }

type boolValue bool

func (b *boolValue) Set(v string) error {
	t, err := strconv.ParseBool(v)
	if err != nil {
		return errors.New("is not true or false")
	}
	*b = boolValue(t)
	return nil
}
func (b *boolValue) String() string   { return strconv.FormatBool(bool(*b)) }
func (b *boolValue) IsBoolFlag() bool { return true }

type listValue []string

func (l *listValue) Set(v string) error { *l = append(*l, v); return nil }
func (l *listValue) String() string     { return strings.Join(*l, " ") }
func (l *listValue) reset()             { *l = nil }

// flagErrors match the errors of the flag package, which name a flag with one dash whatever the user typed.
var flagErrors = []struct {
	re     *regexp.Regexp
	format string // with the flag's name, then the value when the pattern has one
}{
	{regexp.MustCompile(`^flag provided but not defined: -+(.*)$`), "unknown flag %s"},
	{regexp.MustCompile(`^flag needs an argument: -+(.*)$`), "%s needs a value"},
	{regexp.MustCompile(`^invalid (?:boolean )?value ("(?:[^"\\]|\\.)*") for (?:flag )?-+([^:]*): ([\s\S]*)$`), ""},
}

// flagError rewrites an error of the flag package in the user's words: the flag as --name (or -x for a short
// one), the value as typed.
func (f *flagSet) flagError(err error) error {
	if errors.Is(err, flag.ErrHelp) {
		return err
	}
	msg := err.Error()
	for _, fe := range flagErrors {
		m := fe.re.FindStringSubmatch(msg)
		if m == nil {
			continue
		}
		if fe.format == "" { // invalid value: m[1] the quoted value, m[2] the name, m[3] the reason
			return usageErrorf("%s %s %s", dashed(m[2]), m[1], m[3])
		}
		if fe.format == "unknown flag %s" {
			names := make([]string, 0, len(f.opts))
			for _, o := range f.opts {
				names = append(names, o.name)
			}
			if guess := suggest(m[1], names); guess != "" {
				return usageErrorf("unknown flag %s; did you mean --%s?", dashed(m[1]), guess)
			}
		}
		return usageErrorf(fe.format, dashed(m[1]))
	}
	return usageErrorf("%s", msg)
}

// dashed writes a flag's name as the user would type it: --name, or -x for a one-letter short name.
func dashed(name string) string {
	if len(name) == 1 {
		return "-" + name
	}
	return "--" + name
}

// usageError is a mistake in how the command was called; Run exits with ExitUsage.
type usageError struct{ msg string }

func (e *usageError) Error() string { return e.msg }

func usageErrorf(format string, args ...any) error {
	return &usageError{msg: fmt.Sprintf(format, args...)}
}

func isUsage(err error) bool {
	var u *usageError
	return errors.As(err, &u)
}

// knownKeys returns every option name of every command, the keys a config file may hold.
func knownKeys() []string {
	seen := map[string]bool{}
	for _, c := range commands {
		f := newFlagSet(c.name)
		c.setup(f)
		addCommon(f, &commonOptions{})
		for _, o := range f.opts {
			seen[o.name] = true
		}
	}
	keys := make([]string, 0, len(seen))
	for k := range seen {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}

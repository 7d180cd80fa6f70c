package cli

import (
	"encoding/json"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"unicode/utf8"
)

// FuzzRedactURL: RedactURL never panics, and the password and secret query values of a URL never survive it,
// in any escaping.
func FuzzRedactURL(f *testing.F) {
	f.Add("postgres", "app", "s3cret!pw", "db:5432", "/app", "token", "t0ken-value")
	f.Add("nats", "", "", "nats:4222", "", "password", "p@ss/word")
	f.Add("amqp", "guest", "gu@st:x", "rabbit", "/vhost", "name", "relay")
	f.Add("redis", "", "hunter22", "cache:6379", "/0", "api_key", "%ZZ")
	f.Fuzz(func(t *testing.T, scheme, user, pass, host, path, param, value string) {
		u := url.URL{Scheme: scheme, Host: host, Path: path, RawQuery: url.Values{param: {value}}.Encode()}
		if pass != "" {
			u.User = url.UserPassword(user, pass)
		} else if user != "" {
			u.User = url.User(user)
		}
		raw := u.String()
		got := RedactURL(raw) // must not panic, whatever raw is
		_ = RedactURL(scheme + user + pass + host + path)
		back, err := url.Parse(raw)
		if err != nil || back.Scheme == "" || back.Host != host || back.String() != raw {
			return // not a URL that reads back as built: its parts are not what this test thinks they are
		}
		hidden := []string{}
		if pass != "" {
			hidden = append(hidden, pass)
		}
		if isSensitive(param) && value != "" {
			hidden = append(hidden, value)
		}
		for _, s := range hidden {
			// A secret that is also part of the visible URL (the host, the user) cannot be told apart from it.
			visible := strings.Count(raw, s) > 1 || strings.Contains(scheme+host+path+user+param, s) ||
				(!isSensitive(param) && strings.Contains(value, s))
			if len(s) < minScrubLen || visible {
				continue
			}
			for _, form := range []string{s, url.QueryEscape(s), url.PathEscape(s), url.UserPassword("", s).String()[1:]} {
				// The placeholder's own letters next to the user name ("st:" + "xxxxx") are not the secret.
				shown := strings.ReplaceAll(got, redacted, "\x00")
				if len(form) >= minScrubLen && strings.Contains(shown, form) && !strings.Contains(redacted, form) {
					t.Fatalf("RedactURL(%q) = %q still shows the secret %q", raw, got, form)
				}
			}
		}
		var s secrets
		s.addURL(raw)
		for _, sec := range hidden {
			if len(sec) >= minScrubLen && !strings.Contains(redacted, sec) {
				if out := s.scrub("error: " + sec + " refused"); strings.Contains(out, sec) {
					t.Fatalf("scrub left secret %q of %q in %q", sec, raw, out)
				}
			}
		}
	})
}

// FuzzConfigFile: any file given to the relay with --config is read without panicking; a file that is not
// accepted is refused with a usage error (exit status 2 and a message), and an accepted one has only known keys,
// and its events registry either builds or is refused with a usage error.
func FuzzConfigFile(f *testing.F) {
	f.Add("db: postgres://postbox@db/app\nbroker: nats://nats:4222\nbatch-size: 1000\n")
	f.Add("events:\n  - type: order.created\n    topic: orders\n    key_required: true\n    schema: {type: object, required: [id], properties: {id: {type: string}}}\n")
	f.Add("events:\n  - type: a\n    schema: {type: object, oneOf: []}\n")
	f.Add("route:\n  - 'payments.*=stdout:'\nhttp: :9090\npoll-interval: soon\n")
	f.Add("databse: x\n")
	f.Add("batch-size: [1, 2]\nworkers: {a: 1}\n")
	f.Add("events: [{type: x, schema: {type: array, items: {type: integer, minimum: 1}}, schema_file: y}]\n")
	dir := f.TempDir()
	path := filepath.Join(dir, "postbox.yaml")
	known := knownKeys()
	f.Fuzz(func(t *testing.T, content string) {
		if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
		fs := newFlagSet("relay")
		addCommon(fs, &commonOptions{})
		relayCommand.setup(fs)
		var fc *fileConfig
		_, err := fs.parse([]string{"--config", path}, func(string) string { return "" }, func(p string) (map[string]any, error) {
			var err error
			if fc, err = loadConfigFile(p); err != nil {
				return nil, err
			}
			return fc.values, nil
		})
		if err != nil {
			if !isUsage(err) || err.Error() == "" {
				t.Fatalf("a bad config file gave %v, not a usage error", err)
			}
			return
		}
		for k := range fc.values {
			if !slices.Contains(known, k) {
				t.Fatalf("accepted unknown key %q", k)
			}
		}
		if _, err := fc.registry(); err != nil && !isUsage(err) {
			t.Fatalf("a bad events registry gave %v, not a usage error", err)
		}
	})
}

// FuzzPrintable: whatever a database row holds, what the CLI prints of it is valid UTF-8 without a character a
// terminal acts on, and JSON output with the same characters escaped reads back as the same text.
func FuzzPrintable(f *testing.F) {
	f.Add("orders")
	f.Add("\x1b]0;owned\x07\x1b[2J\u009b31m\u202egnp.exe")
	f.Add("bad\xbf\x27 OR 1=1 -- ")
	f.Fuzz(func(t *testing.T, s string) {
		p := printable(s)
		if !utf8.ValidString(p) || strings.ContainsFunc(p, unsafeRune) {
			t.Fatalf("printable(%q) = %q", s, p)
		}
		var b strings.Builder
		if err := writeJSON(&b, s); err != nil {
			t.Fatal(err)
		}
		if strings.ContainsFunc(strings.TrimSuffix(b.String(), "\n"), unsafeRune) {
			t.Fatalf("writeJSON(%q) = %q", s, b.String())
		}
		plain, _ := json.Marshal(s)
		var back, want string
		if err := json.Unmarshal(plain, &want); err != nil {
			t.Fatal(err)
		}
		if err := json.Unmarshal([]byte(b.String()), &back); err != nil || back != want {
			t.Fatalf("writeJSON(%q) = %q reads back as %q, %v; want %q", s, b.String(), back, err, want)
		}
	})
}

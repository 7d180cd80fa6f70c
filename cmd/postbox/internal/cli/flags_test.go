package cli

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
)

// TestPrecedence: a flag on the command line wins over the environment, which wins over the config file, which
// wins over the default, for every kind of option.
func TestPrecedence(t *testing.T) {
	file := writeFile(t, "postbox.yaml", `
db: postgres://file/db
batch-size: 300
poll-interval: 3s
keep-published: true
route:
  - "a.*=stdout:"
  - "b.*=stdout:"
`)
	type opts struct {
		db, broker string
		batch      int
		poll       time.Duration
		keep       bool
		routes     []string
	}
	parse := func(environ func(string) string, args ...string) opts {
		t.Helper()
		var o opts
		var c commonOptions
		f := newFlagSet("test")
		addCommon(f, &c)
		f.URL(&o.db, "db", "", "")
		f.URL(&o.broker, "broker", "b", "")
		f.Int(&o.batch, "batch-size", 500, "")
		f.Duration(&o.poll, "poll-interval", time.Second, "")
		f.Bool(&o.keep, "keep-published", "", "")
		f.List(&o.routes, "route", "r", "", "")
		if _, err := f.parse(args, environ, func(path string) (map[string]any, error) {
			fc, err := loadConfigFile(path)
			if err != nil {
				return nil, err
			}
			return fc.values, nil
		}); err != nil {
			t.Fatal(err)
		}
		return o
	}

	def := parse(env())
	if def.db != "" || def.batch != 500 || def.poll != time.Second || def.keep || def.routes != nil {
		t.Errorf("defaults: %+v", def)
	}
	fromFile := parse(env(), "--config", file)
	if fromFile.db != "postgres://file/db" || fromFile.batch != 300 || fromFile.poll != 3*time.Second || !fromFile.keep ||
		!slices.Equal(fromFile.routes, []string{"a.*=stdout:", "b.*=stdout:"}) {
		t.Errorf("from the file: %+v", fromFile)
	}
	environ := env("POSTBOX_CONFIG", file, "POSTBOX_DB", "postgres://env/db", "POSTBOX_BATCH_SIZE", "200",
		"POSTBOX_KEEP_PUBLISHED", "false", "POSTBOX_ROUTE", "c.*=stdout: d.*=stdout:")
	fromEnv := parse(environ)
	if fromEnv.db != "postgres://env/db" || fromEnv.batch != 200 || fromEnv.poll != 3*time.Second || fromEnv.keep ||
		!slices.Equal(fromEnv.routes, []string{"c.*=stdout:", "d.*=stdout:"}) {
		t.Errorf("env over file: %+v", fromEnv)
	}
	fromFlags := parse(environ, "--db=postgres://flag/db", "-batch-size", "100", "--keep-published", "-r", "e=stdout:", "--route", "f=stdout:")
	if fromFlags.db != "postgres://flag/db" || fromFlags.batch != 100 || fromFlags.poll != 3*time.Second || !fromFlags.keep ||
		!slices.Equal(fromFlags.routes, []string{"e=stdout:", "f=stdout:"}) {
		t.Errorf("flags over env: %+v", fromFlags)
	}
}

// TestPrecedenceEndToEnd runs migrate up with the database named in the file, the environment and a flag, and
// checks which database got the tables.
func TestPrecedenceEndToEnd(t *testing.T) {
	dir := t.TempDir()
	db := func(name string) string { return "sqlite:" + filepath.Join(dir, name) }
	file := writeFile(t, "postbox.yaml", "db: "+db("file.db")+"\n")
	exists := func(name string) bool {
		_, err := os.Stat(filepath.Join(dir, name))
		return err == nil
	}
	if r := run(t, env("POSTBOX_CONFIG", file), "migrate", "up"); r.code != 0 || !exists("file.db") {
		t.Fatalf("file: exit %d, %s", r.code, r.stderr)
	}
	if r := run(t, env("POSTBOX_CONFIG", file, "POSTBOX_DB", db("env.db")), "migrate", "up"); r.code != 0 || !exists("env.db") {
		t.Fatalf("env: exit %d, %s", r.code, r.stderr)
	}
	if r := run(t, env("POSTBOX_CONFIG", file, "POSTBOX_DB", db("env.db")), "migrate", "up", "--db", db("flag.db")); r.code != 0 || !exists("flag.db") {
		t.Fatalf("flag: exit %d, %s", r.code, r.stderr)
	}
	// The env run found env.db already migrated by nobody else: its first run applied the migration.
	if r := run(t, nil, "migrate", "status", "--db", db("env.db")); r.code != 0 || strings.Contains(r.stdout, " no\n") {
		t.Fatalf("env.db not migrated: %s %s", r.stdout, r.stderr)
	}
}

func TestUsageErrorsExitTwo(t *testing.T) {
	cases := []struct {
		environ func(string) string
		args    []string
		want    string
	}{
		{nil, []string{}, "Usage:"},
		{nil, []string{"launch"}, `unknown command "launch"`},
		{nil, []string{"status", "--no-such-flag"}, "unknown flag --no-such-flag"},
		{nil, []string{"relay", "--db", "sqlite:x.db", "--broker", "stdout:", "--batch-size", "-1"}, `--batch-size "-1" is negative; use 0 or more`},
		{nil, []string{"relay", "--db", "sqlite:x.db", "--broker", "stdout:", "-batch-size", "lots"}, `--batch-size "lots" is not a whole number`},
		{env("POSTBOX_BATCH_SIZE", "-5"), []string{"relay", "--db", "sqlite:x.db", "--broker", "stdout:"}, `POSTBOX_BATCH_SIZE="-5" is negative`},
		{nil, []string{"send", "--db", "sqlite:x.db", "--type", "x", "-t"}, "-t needs a value"},
		{nil, []string{"status"}, "--db is required"},
		{nil, []string{"migrate", "--db", "sqlite:x.db"}, "say what to do: migrate up, migrate status or migrate sql"},
		{nil, []string{"migrate", "down", "--db", "sqlite:x.db"}, `unknown migrate action "down"`},
		{nil, []string{"status", "--db", "oracle://scott:tiger1@db/orcl"}, "unknown database"},
		{nil, []string{"send", "--db", "sqlite:x.db", "--type", "x"}, "--topic and --type are required"},
		{nil, []string{"dead", "purge", "--db", "sqlite:x.db"}, "dead purge needs a filter: --topic, --type, --key, --error, --failed-from, --failed-before, --id, or --all"},
		{env("POSTBOX_POLL_INTERVAL", "soon"), []string{"relay", "--db", "sqlite:x.db", "--broker", "stdout:"}, "POSTBOX_POLL_INTERVAL"},
		{nil, []string{"relay", "--db", "sqlite:x.db"}, "--broker is required"},
		{nil, []string{"relay", "--db", "sqlite:x.db", "--broker", "carrier-pigeon://coop"}, "unknown or unsupported broker; this build supports "},
		{nil, []string{"relay", "--db", "sqlite:x.db", "--route", "orders"}, "write PATTERN=URL"},
		{nil, []string{"relay", "--db", "sqlite:x.db", "--broker", "https://hooks.example/in"}, "needs --webhook-secret"},
		{nil, []string{"relay", "--db", "sqlite:x.db", "--broker", "https://hooks.example/in", "--webhook-secret", "k3y-k3y"}, "--webhook-secret: webhook: invalid secret: the secret is 7 bytes long; use at least 24"},
		{env("POSTBOX_WEBHOOK_SECRET", "whsec_!!notbase64"), []string{"relay", "--db", "sqlite:x.db", "--broker", "https://hooks.example/in"}, "POSTBOX_WEBHOOK_SECRET: webhook: invalid secret: the part after whsec_ is not standard base64"},
		{env("POSTBOX_WEBHOOK_SECRET", "whsec_c2hvcnQ="), []string{"relay", "--db", "sqlite:x.db", "--broker", "https://hooks.example/in"}, "the whsec_ secret decodes to 5 bytes"},
		{env("POSTBOX_WEBHOOK_SECRET", "k3y-k3y-k3y-k3y-k3y-k3y-k3y"), []string{"relay", "--db", "sqlite:x.db", "--broker", "https://{topic}.hooks.example/in"}, "would let a topic choose the server"},
		{nil, []string{"relay", "--db", "sqlite:x.db", "--broker", "nats://127.0.0.1:4222?streem=X"}, `unknown parameter "streem"`},
		{nil, []string{"status", "--db", "sqlite:x.db", "--log-level", "loud"}, "--log-level"},
		{nil, []string{"status", "--db", "sqlite:x.db", "--table", "drop table"}, "not a valid identifier"},
		{nil, []string{"relay", "--db", "sqlite:x.db", "--broker", "redis://127.0.0.1:6379/?maxlen=lots"}, `maxlen="lots": write a whole number`},
		{nil, []string{"relay", "--db", "sqlite:x.db", "--broker", "redis://127.0.0.1:6379/?maxlen=5&maxage=1h"}, "set maxlen or maxage, not both"},
		{nil, []string{"relay", "--db", "sqlite:x.db", "--broker", "redis://127.0.0.1:6379/?stream_prefx=a"}, "unexpected option: stream_prefx; Redis URLs take stream_prefix"},
		{nil, []string{"relay", "--db", "sqlite:x.db", "--broker", "redis://127.0.0.1:6379/db7"}, `invalid database number: "db7"`},
		{nil, []string{"relay", "--db", "sqlite:x.db", "--broker", "amqp://guest:guest@127.0.0.1:5672/?exchnage=x"}, `unknown parameter "exchnage"; AMQP URLs take exchange`},
		{nil, []string{"relay", "--db", "sqlite:x.db", "--broker", "amqp://guest:guest@127.0.0.1:5672/?transient=maybe"}, `transient="maybe" is not true or false`},
		{nil, []string{"relay", "--db", "sqlite:x.db", "--broker", "amqp://guest:guest@127.0.0.1:5672/?heartbeat=-1"}, "heartbeat is not an uint16"},
		{nil, []string{"relay", "--db", "sqlite:x.db", "--broker", "mqtt://127.0.0.1:1883/orders"}, "with no path"},
		{nil, []string{"relay", "--db", "sqlite:x.db", "--broker", "mqtt://127.0.0.1:1883?qos=2"}, `unknown parameter "qos"; MQTT URLs take client_id`},
		{nil, []string{"relay", "--db", "sqlite:x.db", "--broker", "mqtt://127.0.0.1:1883?keepalive=0s"}, `keepalive="0s": write a positive duration`},
		{nil, []string{"relay", "--db", "sqlite:x.db", "--broker", "mqtt://127.0.0.1:1883?client_id=a%2Fb%00"}, "ClientID"},
		{nil, []string{"relay", "--db", "sqlite:x.db", "--broker", "kafka://127.0.0.1:9092?sasl=plain"}, "sasl=plain needs a user and password"},
		{nil, []string{"relay", "--db", "sqlite:x.db", "--broker", "kafka://u:p@127.0.0.1:9092?sasl=gssapi"}, `sasl="gssapi": use plain, scram-sha-256 or scram-sha-512`},
		{nil, []string{"relay", "--db", "sqlite:x.db", "--broker", "kafka://127.0.0.1:9092?acks=1"}, `unknown parameter "acks"; Kafka URLs take topic_prefix`},
		{nil, []string{"relay", "--db", "sqlite:x.db", "--broker", "kafka://127.0.0.1:9092?topic_prefix=bad/prefix"}, "TopicPrefix"},
		{nil, []string{"relay", "--db", "sqlite:x.db", "--broker", "kafka://127.0.0.1:9092,,h2"}, "an empty broker address"},
		{nil, []string{"relay", "--db", "sqlite:x.db", "--broker", "pubsub://"}, "write pubsub://PROJECT"},
		{nil, []string{"relay", "--db", "sqlite:x.db", "--broker", "pubsub://p?topic=x"}, `unknown parameter "topic"; Pub/Sub URLs take topic_prefix`},
		{nil, []string{"relay", "--db", "sqlite:x.db", "--broker", "pubsub://p?timeout=soon"}, `timeout="soon": write a positive duration`},
		{nil, []string{"cleanup", "--db", "sqlite:x.db", "--json"}, "--json prints the result of --once"},
		{nil, []string{"cleanup", "--db", "sqlite:x.db", "--retention", "0s"}, "--retention 0s: use a positive duration"},
		{nil, []string{"cleanup", "--db", "sqlite:x.db", "--batch", "0", "--once"}, "--batch 0: use a positive number"},
		{env("POSTBOX_INTERVAL", "0s"), []string{"cleanup", "--db", "sqlite:x.db"}, "--interval 0s: use a positive duration"},
		{nil, []string{"cleanup", "--db", "sqlite:x.db", "--dead-retention", "-1h"}, `--dead-retention "-1h" is negative`},
		{nil, []string{"partitions", "--db", "sqlite:x.db", "--once"}, "SQLite has no table partitioning; keep its outbox small with postbox cleanup"},
		{nil, []string{"partitions", "--db", "sqlite:x.db", "--period", "weekly"}, `--period "weekly": use hourly, daily or monthly`},
		{nil, []string{"partitions", "--db", "sqlite:x.db", "--lookahead", "0"}, "--lookahead 0: use 1 or more"},
		{nil, []string{"migrate", "up", "--db", "sqlite:x.db", "--partitioned"}, "--partitioned: SQLite has no table partitioning"},
		{nil, []string{"relay", "--db", "sqlite:x.db", "--broker", "stdout:", "--dead-holds-key"}, "--dead-holds-key applies to ordered relays only; add --ordered"},
		// Malformed URLs are refused at start-up with what is wrong, never retried for ever.
		{nil, []string{"status", "--db", "postgres://u:pw@[::1"}, `matching "]"`},
		{nil, []string{"status", "--db", "postgres://u:pw@host:notaport/db"}, "invalid port"},
		{nil, []string{"status", "--db", "postgres://%zz"}, "invalid percent-encoded"},
		{nil, []string{"status", "--db", "postgres://db/app?sslmode=bogus"}, "sslmode is invalid"},
		{nil, []string{"status", "--db", "sqlite:"}, "write sqlite:path/to/file.db"},
		{nil, []string{"relay", "--db", "sqlite:x.db", "--broker", "nats://%zz"}, "is not host:port or a nats:// URL"},
		{nil, []string{"relay", "--db", "sqlite:x.db", "--broker", "nats://127.0.0.1:4222,:4223"}, `server ":4223"`},
		{nil, []string{"relay", "--db", "sqlite:x.db", "--broker", "nats:127.0.0.1:4222"}, "lacks the // after nats:; write nats://host:4222"},
		{nil, []string{"relay", "--db", "sqlite:x.db", "--broker", "nats://127.0.0.1:4222?key_in_subject=maybe"}, "is not true or false"},
		{nil, []string{"relay", "--db", "sqlite:x.db", "--broker", "nats://127.0.0.1:4222?stream=X"}, "set stream and subjects together"},
		{nil, []string{"relay", "--db", "sqlite:x.db", "--broker", "stdout:x"}, "takes no address"},
		{nil, []string{"relay", "--db", "sqlite:x.db", "--broker", "http://", "--webhook-secret", "k3y-k3y-k3y-k3y-k3y-k3y-k3y"}, "has no host"},
		{nil, []string{"relay", "--db", "sqlite:x.db", "--broker", "https://hooks.example/{topc}", "--webhook-secret", "k3y-k3y-k3y-k3y-k3y-k3y-k3y"}, "the only placeholder"},
		{nil, []string{"relay", "--db", "sqlite:x.db", "--broker", "https://hooks.example/a b%zz", "--webhook-secret", "k3y-k3y-k3y-k3y-k3y-k3y-k3y"}, "invalid URL escape"},
	}
	dir := t.TempDir()
	for _, c := range cases {
		args := c.args
		for i, a := range args {
			args[i] = strings.ReplaceAll(a, "sqlite:x.db", "sqlite:"+filepath.Join(dir, "x.db"))
		}
		r := run(t, c.environ, args...)
		if r.code != ExitUsage || !strings.Contains(r.stderr, c.want) {
			t.Errorf("postbox %v: exit %d, stderr %q; want exit 2 and %q", c.args, r.code, r.stderr, c.want)
		}
	}
}

func TestConfigFileErrors(t *testing.T) {
	typo := writeFile(t, "typo.yaml", "databse: sqlite:x.db\n")
	if r := run(t, nil, "status", "--config", typo); r.code != ExitUsage || !strings.Contains(r.stderr, `unknown key "databse"`) {
		t.Errorf("typo: exit %d, %s", r.code, r.stderr)
	}
	bad := writeFile(t, "bad.yaml", "db: [unclosed\n")
	if r := run(t, nil, "status", "--config", bad); r.code != ExitUsage || !strings.Contains(r.stderr, "not valid YAML") {
		t.Errorf("bad YAML: exit %d, %s", r.code, r.stderr)
	}
	if r := run(t, nil, "status", "--config", "/no/such/postbox.yaml"); r.code != ExitUsage || !strings.Contains(r.stderr, "no such file") {
		t.Errorf("missing file: exit %d, %s", r.code, r.stderr)
	}
	schema := writeFile(t, "schema.yaml", "events:\n  - type: a\n    topic: t\n    schema: {type: object, oneOf: []}\n")
	if r := run(t, nil, "send", "--config", schema, "--db", "sqlite:"+filepath.Join(t.TempDir(), "x.db"), "-t", "t", "--type", "a"); r.code != ExitUsage || !strings.Contains(r.stderr, `events[0] (a): jsonschema: the schema at #/oneOf`) {
		t.Errorf("invalid schema: exit %d, %s", r.code, r.stderr)
	}
}

func TestHelp(t *testing.T) {
	r := run(t, nil, "--help")
	mustContain(t, "postbox --help", r.stdout, "Commands:", "relay", "cmd/postbox/demo", "Exit codes: 0 success, 1 run-time failure, 2 usage error")
	if r.code != 0 {
		t.Errorf("--help exit %d", r.code)
	}
	for _, c := range commands {
		for _, args := range [][]string{{c.name, "--help"}, {c.name, "-h"}, {"help", c.name}} {
			r := run(t, nil, args...)
			if r.code != 0 {
				t.Errorf("%v: exit %d", args, r.code)
			}
			mustContain(t, strings.Join(args, " "), r.stdout, "Usage: postbox "+c.name, "Examples:", "[POSTBOX_CONFIG]", "Exit codes:")
		}
	}
	mustContain(t, "relay --help", run(t, nil, "relay", "--help").stdout, "--db URL", "[POSTBOX_DB]", "-r, --route PATTERN=URL (repeatable)",
		"[POSTBOX_BATCH_SIZE]", "(default 500)", "/readyz")
}

// The config file chooses the database, the brokers and the secrets (issue 29, Low): one every user may write is
// refused, and one every user may read that holds a secret is warned about, naming the keys and the fix.
func TestConfigFilePermissions(t *testing.T) {
	file := filepath.Join(t.TempDir(), "postbox.yaml")
	if err := os.WriteFile(file, []byte("db: postgres://app:s3cr3t-password@127.0.0.1:1/app\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		mode            os.FileMode
		refused, warned bool
	}{{0o666, true, false}, {0o602, true, false}, {0o644, false, true}, {0o640, false, false}, {0o600, false, false}} {
		if err := os.Chmod(file, tc.mode); err != nil {
			t.Fatal(err)
		}
		r := run(t, nil, "status", "--config", file)
		if refused := r.code == ExitUsage && strings.Contains(r.stderr, "writable by every user") && strings.Contains(r.stderr, "chmod o-w"); refused != tc.refused {
			t.Errorf("mode %04o: exit %d, %s; refused %v, want %v", tc.mode, r.code, r.stderr, refused, tc.refused)
		}
		if warned := strings.Contains(r.stderr, "readable by every user") && strings.Contains(r.stderr, "holds secrets (db)"); warned != tc.warned {
			t.Errorf("mode %04o: %s; warned %v, want %v", tc.mode, r.stderr, warned, tc.warned)
		}
		if strings.Contains(r.stderr, "s3cr3t-password") {
			t.Errorf("mode %04o: the password was printed: %s", tc.mode, r.stderr)
		}
	}
}

// No version of Postbox is published yet, so a help text that advertises `go run …@latest` sends a new user to a
// command that fails (issue 35): postbox --help must name the demo's command that works in a clone, and that
// command's package must exist there.
func TestHelpAdvertisesOnlyWhatWorks(t *testing.T) {
	r := run(t, nil, "--help")
	if strings.Contains(r.stdout, "@latest") {
		t.Errorf("postbox --help advertises an @latest command, which fails while no version is published:\n%s", r.stdout)
	}
	mustContain(t, "postbox --help", r.stdout, "go run ./cmd/postbox/demo", "make demo", "Install section")
	if _, err := os.Stat(filepath.Join("..", "..", "demo", "main.go")); err != nil {
		t.Errorf("postbox --help advertises go run ./cmd/postbox/demo, but the package is not there: %v", err)
	}
}

// TestDidYouMean: a slip in a command, a flag, an action or a broker URL's scheme exits 2 with what was probably
// meant (issue 35: no "did you mean" for statsu or --jsn, and --broker stdout did not suggest stdout:).
func TestDidYouMean(t *testing.T) {
	db := "sqlite:" + filepath.Join(t.TempDir(), "x.db")
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"statsu"}, `unknown command "statsu"; did you mean status?`},
		{[]string{"stat"}, `unknown command "stat"; did you mean status?`},
		{[]string{"relya", "--db", db}, "did you mean relay?"},
		{[]string{"status", "--db", db, "--jsn"}, "unknown flag --jsn; did you mean --json?"},
		{[]string{"migrate", "up", "--db", db, "--orderd"}, "unknown flag --orderd; did you mean --ordered?"},
		{[]string{"relay", "--db", db, "--brokr", "stdout:"}, "unknown flag --brokr; did you mean --broker?"},
		{[]string{"dead", "lsit", "--db", db}, `unknown dead action "lsit": use list, count, retry or purge; did you mean dead list?`},
		{[]string{"migrate", "stauts", "--db", db}, "did you mean migrate status?"},
		{[]string{"topics", "pasue", "orders", "--db", db}, "did you mean topics pause?"},
		{[]string{"relay", "--db", db, "--broker", "stdout"}, "--broker stdout: write stdout: (with its colon"},
		{[]string{"relay", "--db", db, "--broker", "nats"}, "--broker nats is a scheme without its address: write nats://HOST"},
	} {
		r := run(t, nil, c.args...)
		if r.code != ExitUsage || !strings.Contains(r.stderr, c.want) {
			t.Errorf("postbox %s: exit %d, stderr %q; want exit 2 and %q", strings.Join(c.args, " "), r.code, r.stderr, c.want)
		}
	}
	// Nothing close: no guess, and the command list for an unknown command.
	if r := run(t, nil, "launch"); r.code != ExitUsage || strings.Contains(r.stderr, "did you mean") || !strings.Contains(r.stderr, "Commands:") {
		t.Errorf("postbox launch: exit %d, stderr %q; want exit 2, no guess, and the commands", r.code, r.stderr)
	}
	if r := run(t, nil, "status", "--db", db, "--zzz"); r.code != ExitUsage || strings.Contains(r.stderr, "did you mean") {
		t.Errorf("postbox status --zzz: exit %d, stderr %q; want exit 2 and no guess", r.code, r.stderr)
	}
}

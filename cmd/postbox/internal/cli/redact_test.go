package cli

import (
	"strings"
	"testing"
)

func TestRedactURL(t *testing.T) {
	cases := map[string]string{
		"postgres://app:s3cret@db:5432/app?sslmode=disable": "postgres://app:xxxxx@db:5432/app?sslmode=disable",
		"postgres://app@db/app":                             "postgres://app@db/app",
		"nats://nats:4222?token=t0ken&name=relay":           "nats://nats:4222?name=relay&token=xxxxx",
		"amqp://guest:gu%40st@rabbit:5672/":                 "amqp://guest:xxxxx@rabbit:5672/",
		"https://hooks.example/in?api_key=abc123":           "https://hooks.example/in?api_key=xxxxx",
		"root:pa55w0rd@tcp(127.0.0.1:3306)/test":            "root:xxxxx@tcp(127.0.0.1:3306)/test",
		"sqlite:/var/lib/app.db":                            "sqlite:/var/lib/app.db",
		"stdout:":                                           "stdout:",
		"postgres://u:p%ZZ@host/db":                         "postgres://u:xxxxx@host/db",
		"redis://:hunter22@cache:6379/0":                    "redis://:xxxxx@cache:6379/0",
		"host=db user=app password=s3cret dbname=shop":      "host=db user=app password=xxxxx dbname=shop",
		"host=db password = 'p w\\' x' sslmode=require":     "host=db password = xxxxx sslmode=require",
		"Server=db;User=app;Password=s3cret;Database=shop":  "Server=db;User=app;Password=xxxxx;Database=shop",
	}
	for in, want := range cases {
		if got := RedactURL(in); got != want {
			t.Errorf("RedactURL(%q) = %q; want %q", in, got, want)
		}
	}
}

func TestSecretsScrubEveryForm(t *testing.T) {
	var s secrets
	s.addURL("amqp://guest:gu@st!x@rabbit:5672/")
	s.addURL("postgres://app:p%40ss%2Fword@db/app?password=other-secret")
	s.addURL("redis://:abc@cache") // short: scrubbed as a word of its own, not inside words
	s.addURL("host=db password='kw s3cret' user=app")
	text := `dial gu@st!x failed; auth p@ss/word and p%40ss%2Fword rejected; other-secret; abc; password=abc; the cabbage abcde`
	got := s.scrub(text)
	for _, leak := range []string{"gu@st!x", "p@ss/word", "p%40ss%2Fword", "other-secret", "; abc;", "=abc;"} {
		if strings.Contains(got, leak) {
			t.Errorf("scrub left %q in %q", leak, got)
		}
	}
	if !strings.Contains(got, "the cabbage abcde") {
		t.Errorf("a secret shorter than %d characters was scrubbed inside words: %q", minScrubLen, got)
	}
	if got := s.scrub("connect: password authentication failed for kw s3cret"); strings.Contains(got, "kw s3cret") {
		t.Errorf("scrub left a keyword-style password: %q", got)
	}
}

// TestSecretsNeverPrinted runs commands that fail while connecting and checks that neither the password nor a
// token appears in anything they print.
func TestSecretsNeverPrinted(t *testing.T) {
	const password, token = "Sup3rSecretPw", "T0kenValue99"
	db := "postgres://postbox:" + password + "@127.0.0.1:1/app?connect_timeout=2"
	for _, args := range [][]string{
		{"status", "--db", db},
		{"migrate", "up", "--db", db, "--log-level", "debug"},
		{"send", "--db", db, "-t", "t", "--type", "x"},
		{"relay", "--db", db, "--broker", "nats://relay:" + password + "@127.0.0.1:1?token=" + token},
		{"relay", "--db", db, "--route", "orders.*=https://hooks.example/in?token=" + token},
		// Brokers refused at start-up, with the password in the URL.
		{"relay", "--db", db, "--broker", "amqp://guest:" + password + "@127.0.0.1:5672/?nope=1"},
		{"relay", "--db", db, "--broker", "mqtt://relay:" + password + "@127.0.0.1:1883?nope=1"},
		{"relay", "--db", db, "--broker", "kafka://relay:" + password + "@127.0.0.1:9092?sasl=nope"},
		{"relay", "--db", db, "--broker", "redis://relay:" + password + "@127.0.0.1:6379/?maxlen=-1"},
		{"relay", "--db", db, "--broker", "redis://relay:" + password + "@127.0.0.1:port/"},
		// A real server refusing the password, and a closed port.
		{"status", "--db", "mysql://root:" + password + "@127.0.0.1:3306/test"},
		// A keyword/value connection string, which the CLI does not take, and a password too short to scrub inside words.
		{"status", "--db", "host=127.0.0.1 port=1 user=postbox password=" + password + " dbname=app"},
		{"status", "--db", "host=127.0.0.1 user=postbox password='" + password + "' dbname=app"},
		{"migrate", "up", "--db", "mysql://postbox:" + password + "@127.0.0.1:1/app?timeout=2s", "--log-level", "debug"},
	} {
		r := run(t, nil, args...)
		if r.code == 0 {
			t.Errorf("%v succeeded against a closed port", args)
		}
		for _, leak := range []string{password, token} {
			if strings.Contains(r.stdout+r.stderr, leak) {
				t.Errorf("%v printed a secret:\n%s%s", args[0], r.stdout, r.stderr)
			}
		}
	}
}

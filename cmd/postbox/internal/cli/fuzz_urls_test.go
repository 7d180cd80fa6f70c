package cli

import (
	"net/url"
	"strings"
	"testing"
)

// FuzzParseURLs: the parsers of --db and --broker URLs and --route values never panic, and their errors never
// show the URL's password, however malformed the rest of it is.
func FuzzParseURLs(f *testing.F) {
	f.Add("mysql", "app", "s3cret!pw", "db:3306", "/app", "tls=true")
	f.Add("kafka", "relay", "kafka-secret", "k1:9092,k2:9092", "", "sasl=scram-sha-512&tls=true")
	f.Add("sqlite", "", "", "", "/var/lib/app.db", "_txlock=deferred")
	f.Add("mysql", "root", "p%zzword", "[::1]:3306", "/db", "timeout=%")
	f.Add("kafka", "u", "pw@with:colon", "host", "/path", "x=y")
	f.Fuzz(func(t *testing.T, scheme, user, pass, host, path, query string) {
		userinfo := ""
		if user != "" || pass != "" {
			userinfo = user + ":" + pass + "@"
		}
		raw := scheme + "://" + userinfo + host + path + "?" + query
		check := func(what string, parse func(string) error) {
			err := parse(raw)
			if err == nil || len(pass) < 4 {
				return
			}
			// A password that also appears elsewhere in the URL may show up legitimately through that part.
			if elsewhere := strings.Replace(raw, pass, "", 1); strings.Contains(elsewhere, pass) {
				return
			}
			for _, form := range []string{pass, url.QueryEscape(pass), url.PathEscape(pass)} {
				if !strings.Contains(err.Error(), form) {
					continue
				}
				// The error's own words may hold the password's text ("kafk" in "kafka://host:9092"): they stay
				// when the URL carries another password, which the check also sees.
				other := strings.Replace(raw, pass, strings.Repeat("Z", len(pass)), 1)
				if err2 := parse(other); err2 != nil && strings.Contains(err2.Error(), form) {
					continue
				}
				t.Fatalf("%s(%q): error %q shows the password", what, raw, err)
			}
		}
		check("parseKafkaURL", func(u string) error { _, _, err := parseKafkaURL(u); return err })
		check("mysqlConfig", func(u string) error { _, err := mysqlConfig(u); return err })
		check("parseRoute", func(u string) error { _, _, err := parseRoute("orders.*=" + u); return err })
		check("parseRoute", func(u string) error { _, _, err := parseRoute(u); return err })
		_, _ = sqliteDSN("sqlite:" + path + "?" + query)
		_ = dbScheme(raw)
	})
}

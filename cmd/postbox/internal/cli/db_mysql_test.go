package cli

import (
	"strings"
	"testing"
	"time"
)

// TestMySQLURL: a mysql:// URL becomes the driver's configuration, whatever characters the password holds.
func TestMySQLURL(t *testing.T) {
	cfg, err := mysqlConfig("mysql://app:p%40ss%2Fw:rd%3F@db.internal/shop?timeout=3s&time_zone=%27%2B00%3A00%27&tls=true")
	if err != nil {
		t.Fatal(err)
	}
	if cfg.User != "app" || cfg.Passwd != "p@ss/w:rd?" || cfg.Net != "tcp" || cfg.Addr != "db.internal:3306" || cfg.DBName != "shop" ||
		cfg.Timeout != 3*time.Second || cfg.Params["time_zone"] != "'+00:00'" || !cfg.InterpolateParams {
		t.Errorf("config %+v", cfg)
	}
	if cfg.TLS == nil || cfg.TLS.ServerName != "db.internal" {
		t.Errorf("tls=true verifies server name %q; want db.internal", cfg.TLS.ServerName)
	}

	cfg, err = mysqlConfig("mariadb://root@[::1]:3307/test?interpolateParams=false")
	if err != nil {
		t.Fatal(err)
	}
	if cfg.User != "root" || cfg.Passwd != "" || cfg.Addr != "[::1]:3307" || cfg.InterpolateParams {
		t.Errorf("config %+v", cfg)
	}

	cfg, err = mysqlConfig("mysql://app:pw@/shop?socket=/run/mysqld/mysqld.sock")
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Net != "unix" || cfg.Addr != "/run/mysqld/mysqld.sock" || cfg.DBName != "shop" {
		t.Errorf("socket config %+v", cfg)
	}
}

func TestMySQLURLErrors(t *testing.T) {
	const password = "Hunter2Secret"
	for raw, want := range map[string]string{
		"mysql://app:" + password + "@db:3306":           "name one database in the path",
		"mysql://app:" + password + "@db:3306/a/b":       "name one database in the path",
		"mysql://app:" + password + "@tcp(db:3306)/shop": "this is a go-sql-driver DSN, not a URL",
		"mysql://app:" + password + "@db:port/shop":      "not a URL",
		"mysql:shop":                         "not a URL with a host",
		"mysql://app:" + password + "@/shop": "no host",
		"mysql://app:" + password + "@db/shop?socket=/tmp/m.sock":    "not both",
		"mysql://app:" + password + "@db/shop?timeout=soon":          "invalid duration",
		"mysql://app:" + password + "@db/shop?tls=maybe":             "invalid value / unknown config name: maybe",
		"mysql://app:" + password + "@db/shop?timeout=1s&timeout=2s": `parameter "timeout" is given 2 times`,
	} {
		_, err := mysqlConfig(raw)
		if err == nil || !strings.Contains(err.Error(), want) || !isUsage(err) {
			t.Errorf("mysqlConfig(%q) = %v; want a usage error with %q", RedactURL(raw), err, want)
			continue
		}
		if strings.Contains(err.Error(), password) {
			t.Errorf("mysqlConfig error shows the password: %v", err)
		}
	}
	r := run(t, nil, "status", "--db", "root:"+password+"@tcp(127.0.0.1:3306)/test")
	if r.code != ExitUsage || !strings.Contains(r.stderr, "write it as a URL, mysql://") || strings.Contains(r.stderr, password) {
		t.Errorf("a DSN for --db: exit %d, %s", r.code, r.stderr)
	}
}

package cli

import (
	"net"
	"net/url"
	"strconv"
	"strings"

	"github.com/jackc/pgx/v5/pgxpool"
)

// warnPlaintext logs a warning for each connection of the relay that may go without TLS to a host other than
// this machine: the database (pgx's default sslmode=prefer falls back to plain text, MySQL is plain text unless
// tls= is set) and the brokers whose URL does not require TLS. It does no I/O.
func warnPlaintext(rt *runtime, db string, brokers []string) {
	if host, hint := plaintextDB(db); host != "" {
		rt.log.Warn("the database connection may be plain text to a remote host; "+hint, "db", RedactURL(db), "host", host)
	}
	for _, b := range brokers {
		if host, hint := plaintextBroker(b); host != "" {
			rt.log.Warn("the broker connection may be plain text to a remote host; "+hint, "broker", RedactURL(b), "host", host)
		}
	}
}

// plaintextDB returns a remote host the database URL may reach without TLS, and how to require TLS; "" when
// every connection it makes is encrypted or local.
func plaintextDB(raw string) (host, hint string) {
	switch dbScheme(raw) {
	case "postgres":
		pc, err := pgxpool.ParseConfig(raw)
		if err != nil {
			return "", ""
		}
		const hint = "require TLS with sslmode=verify-full (or require)"
		c := pc.ConnConfig
		if c.TLSConfig == nil && remote(c.Host) {
			return c.Host, hint
		}
		for _, f := range c.Fallbacks {
			if f.TLSConfig == nil && remote(f.Host) {
				return f.Host, hint
			}
		}
	case "mysql":
		cfg, err := mysqlConfig(raw)
		if err != nil || cfg.Net == "unix" {
			return "", ""
		}
		h, _, _ := net.SplitHostPort(cfg.Addr)
		if (cfg.TLS == nil || cfg.AllowFallbackToPlaintext) && remote(h) {
			return h, "require TLS with tls=true (or the name of a registered TLS configuration)"
		}
	}
	return "", ""
}

// plaintextBroker returns a remote host a broker URL reaches without requiring TLS, and how to require it.
func plaintextBroker(raw string) (host, hint string) {
	scheme, rest, _ := strings.Cut(raw, ":")
	servers, query, _ := strings.Cut(strings.TrimPrefix(rest, "//"), "?")
	q, _ := url.ParseQuery(query)
	on, _ := strconv.ParseBool(q.Get("tls"))
	switch strings.ToLower(scheme) {
	case "nats":
		if on || q.Get("ca_file") != "" {
			return "", ""
		}
		hint = "nats:// uses TLS only when the server offers it; require it with tls://, tls=true or ca_file"
	case "kafka":
		if on {
			return "", ""
		}
		hint = "require TLS with tls=true"
	case "amqp", "mqtt", "tcp", "redis", "http", "ws":
		hint = "use " + strings.ToLower(scheme) + "s://"
		if scheme == "tcp" {
			hint = "use mqtts://"
		}
	default:
		return "", ""
	}
	if _, after, ok := strings.Cut(servers, "@"); ok {
		servers = after
	}
	servers, _, _ = strings.Cut(servers, "/")
	for _, s := range strings.Split(servers, ",") {
		s = strings.TrimPrefix(s, "nats://")
		h := s
		if hh, _, err := net.SplitHostPort(s); err == nil {
			h = hh
		}
		if remote(h) {
			return h, hint
		}
	}
	return "", ""
}

// remote reports whether host is a network host other than this machine: not a loopback address, not localhost,
// not a Unix socket. Names are not resolved.
func remote(host string) bool {
	host = strings.Trim(host, "[]")
	if host == "" || strings.HasPrefix(host, "/") || strings.EqualFold(host, "localhost") ||
		strings.HasSuffix(strings.ToLower(host), ".localhost") {
		return false
	}
	ip := net.ParseIP(host)
	return ip == nil || !ip.IsLoopback()
}

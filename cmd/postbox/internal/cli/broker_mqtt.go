package cli

import (
	"context"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"

	mqttbroker "github.com/postbox-go/postbox/broker/mqttbroker"
)

func init() {
	brokerSchemes["mqtt"] = openMQTT
	brokerSchemes["mqtts"] = openMQTT
}

// mqttParams are the query parameters of an mqtt:// URL.
var mqttParams = []string{"client_id", "allow_no_subscribers", "session_expiry", "keepalive", "connect_timeout", reconnectParam}

// openMQTT returns an MQTT 5 publisher for
//
//	mqtt[s]://[user:pass@]host:1883[?client_id=ID&allow_no_subscribers=true&session_expiry=D&keepalive=D&connect_timeout=D&reconnect_max=D]
//
// Each message is published at QoS 1 to the MQTT topic named by its topic, and counts as published on its PUBACK.
// A message no subscription matches is dropped by the server, so it fails and is retried, unless
// allow_no_subscribers=true. A lost connection is tried again at the relay's error-backoff pace, capped by
// reconnect_max (default --error-backoff-max), and the relay's probe waits for it (awaitingPublisher).
func openMQTT(_ context.Context, raw string, rt *runtime, o brokerOptions) (*brokerConn, error) {
	fail := brokerFail(raw)
	u, err := url.Parse(raw)
	if err != nil {
		return fail("not a URL (%v); write mqtt://user:pass@host:1883", scrubURLError(err))
	}
	if u.Host == "" || (u.Path != "" && u.Path != "/") {
		return fail("write mqtt://host:1883 (or mqtts://host:8883), with no path")
	}
	q := u.Query()
	for k := range q {
		if !slices.Contains(mqttParams, k) {
			return fail("unknown parameter %q; MQTT URLs take %s", k, strings.Join(mqttParams, ", "))
		}
	}
	cfg := mqttbroker.PublisherConfig{ClientID: q.Get("client_id"), Source: o.source, Logger: rt.log}
	if v := q.Get("allow_no_subscribers"); v != "" {
		if cfg.AllowNoSubscribers, err = strconv.ParseBool(v); err != nil {
			return fail("allow_no_subscribers=%q is not true or false", v)
		}
	}
	for name, p := range map[string]*time.Duration{"session_expiry": &cfg.SessionExpiry, "keepalive": &cfg.KeepAlive,
		"connect_timeout": &cfg.ConnectTimeout} {
		if v := q.Get(name); v != "" {
			if *p, err = time.ParseDuration(v); err != nil || *p <= 0 {
				return fail("%s=%q: write a positive duration, such as %s=30s", name, v, name)
			}
		}
	}
	pace, err := o.reconnect.fromURL(q)
	if err != nil {
		return fail("%v", err)
	}
	cfg.MinReconnectDelay, cfg.MaxReconnectDelay = pace.base, pace.max
	// The credentials go to the MQTT CONNECT packet, not into the server address.
	if u.User != nil {
		cfg.Username = u.User.Username()
		cfg.Password, _ = u.User.Password()
	}
	cfg.URL = (&url.URL{Scheme: u.Scheme, Host: u.Host}).String()
	pub, err := mqttbroker.NewPublisher(&cfg)
	if err != nil {
		return fail("%v", err)
	}
	return awaitBroker(ownConn(raw, pub), pace), nil
}

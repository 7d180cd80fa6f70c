package cli

import (
	"cmp"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/sasl"
	"github.com/twmb/franz-go/pkg/sasl/plain"
	"github.com/twmb/franz-go/pkg/sasl/scram"

	kafkabroker "github.com/postbox-go/postbox/broker/kafkabroker"
)

func init() { brokerSchemes["kafka"] = openKafka }

// kafkaDefaultPort is the port of a host in a kafka:// URL that names none.
const kafkaDefaultPort = "9092"

// kafkaParams are the query parameters of a kafka:// URL.
var kafkaParams = []string{"topic_prefix", "client_id", "tls", "sasl", "delivery_timeout", reconnectParam, "debezium"}

// kafkaSASL are the SASL mechanisms a kafka:// URL with a user and password can log in with.
var kafkaSASL = map[string]func(user, pass string) sasl.Mechanism{
	"plain":         func(u, p string) sasl.Mechanism { return plain.Auth{User: u, Pass: p}.AsMechanism() },
	"scram-sha-256": func(u, p string) sasl.Mechanism { return scram.Auth{User: u, Pass: p}.AsSha256Mechanism() },
	"scram-sha-512": func(u, p string) sasl.Mechanism { return scram.Auth{User: u, Pass: p}.AsSha512Mechanism() },
}

// openKafka returns a Kafka publisher (franz-go's idempotent producer) for
//
//	kafka://[user:pass@]host:9092[,host2:9092][?topic_prefix=P&client_id=ID&tls=true&sasl=MECH&delivery_timeout=D&reconnect_max=D]
//
// Each message becomes a record on topic P + topic, keyed by the message key. With debezium=defaults, or
// debezium=PATH of a Debezium connector's configuration, records take the layout of Debezium's Outbox Event
// Router instead (kafkaDebezium, docs/DEBEZIUM.md). With a user and password the
// client logs in with SASL (sasl=plain by default, or scram-sha-256, scram-sha-512); tls=true connects with TLS.
// The topics must exist, unless the cluster creates them on first use. franz-go holds a record and retries its
// request until it is delivered (or delivery_timeout, or the relay's publish timeout): the retries back off at
// the relay's error-backoff pace, capped by reconnect_max (default --error-backoff-max), instead of franz-go's
// 250 ms to 2.5 s.
func openKafka(_ context.Context, raw string, _ *runtime, o brokerOptions) (*brokerConn, error) {
	fail := brokerFail(raw)
	seeds, u, err := parseKafkaURL(raw)
	if err != nil {
		return fail("%v", err)
	}
	q := u.Query()
	for k := range q {
		if !slices.Contains(kafkaParams, k) {
			return fail("unknown parameter %q; Kafka URLs take %s", k, strings.Join(kafkaParams, ", "))
		}
	}
	pace, err := o.reconnect.fromURL(q)
	if err != nil {
		return fail("%v", err)
	}
	opts := []kgo.Opt{kgo.SeedBrokers(seeds...), kgo.ClientID(cmp.Or(q.Get("client_id"), "postbox-relay")),
		kgo.RetryBackoffFn(func(tries int) time.Duration { return pace.delay(tries, errNotRefused) })}
	if v := q.Get("tls"); v != "" {
		on, err := strconv.ParseBool(v)
		if err != nil {
			return fail("tls=%q is not true or false", v)
		}
		if on {
			// franz-go sets each broker's host name as the server name to verify.
			opts = append(opts, kgo.DialTLSConfig(&tls.Config{MinVersion: tls.VersionTLS12}))
		}
	}
	mech := strings.ToLower(q.Get("sasl"))
	switch pass, hasPass := u.User.Password(); {
	case u.User == nil && mech != "":
		return fail("sasl=%s needs a user and password: kafka://user:pass@host:9092?sasl=%s", mech, mech)
	case u.User != nil:
		if !hasPass {
			return fail("the user %q has no password; write kafka://user:pass@host:9092", u.User.Username())
		}
		newMech, ok := kafkaSASL[cmp.Or(mech, "plain")]
		if !ok {
			return fail("sasl=%q: use plain, scram-sha-256 or scram-sha-512", mech)
		}
		opts = append(opts, kgo.SASL(newMech(u.User.Username(), pass)))
	}
	if v := q.Get("delivery_timeout"); v != "" {
		d, err := time.ParseDuration(v)
		if err != nil || d <= 0 {
			return fail("delivery_timeout=%q: write a positive duration, such as delivery_timeout=2m", v)
		}
		opts = append(opts, kgo.RecordDeliveryTimeout(d))
	}
	cfg := kafkabroker.PublisherConfig{TopicPrefix: q.Get("topic_prefix"), Source: o.source}
	if v := q.Get("debezium"); v != "" {
		if cfg.Debezium, err = kafkaDebezium(v); err != nil {
			return fail("%v", err)
		}
	}
	cl, err := kgo.NewClient(opts...)
	if err != nil {
		return fail("%v", err)
	}
	pub, err := kafkabroker.NewPublisher(cl, &cfg)
	if err != nil {
		cl.Close()
		return fail("%v", err)
	}
	return &brokerConn{
		name:  RedactURL(raw),
		pub:   pub,
		ping:  cl.Ping,
		close: func(context.Context) error { cl.Close(); return nil },
	}, nil
}

// parseKafkaURL returns the seed brokers of a kafka:// URL, each with a port, and the URL's user and query. The
// host list is split off by hand: net/url reads a list only when every host but the last has a port.
func parseKafkaURL(raw string) (seeds []string, u *url.URL, err error) {
	const scheme = "kafka://"
	if len(raw) < len(scheme) || !strings.EqualFold(raw[:len(scheme)], scheme) {
		return nil, nil, errors.New("write the seed brokers as kafka://host:9092,host2:9092")
	}
	rest, query, _ := strings.Cut(raw[len(scheme):], "?")
	userinfo, hosts := "", rest
	if i := strings.LastIndex(rest, "@"); i >= 0 {
		userinfo, hosts = rest[:i+1], rest[i+1:]
	}
	hosts = strings.TrimSuffix(hosts, "/")
	if hosts == "" || strings.Contains(hosts, "/") {
		return nil, nil, errors.New("write the seed brokers as kafka://host:9092,host2:9092, with no path")
	}
	// The rest, with a stand-in host, is a URL.
	if u, err = url.Parse(scheme + userinfo + "seeds/?" + query); err != nil {
		return nil, nil, fmt.Errorf("not a URL (%v); write kafka://user:pass@host:9092,host2:9092", scrubURLError(err))
	}
	for _, h := range strings.Split(hosts, ",") {
		if h == "" {
			return nil, nil, errors.New("an empty broker address in the host list")
		}
		if _, _, err := net.SplitHostPort(h); err != nil {
			h = net.JoinHostPort(strings.Trim(h, "[]"), kafkaDefaultPort)
		}
		seeds = append(seeds, h)
	}
	return seeds, u, nil
}

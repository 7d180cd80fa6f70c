package cli

import (
	"context"
	"net/url"
	"slices"
	"strconv"
	"strings"

	amqpbroker "github.com/postbox-go/postbox/broker/amqpbroker"
)

func init() {
	brokerSchemes["amqp"] = openAMQP
	brokerSchemes["amqps"] = openAMQP
}

// amqpParams are the query parameters of an amqp:// URL that configure the publisher.
var amqpParams = []string{"exchange", "key_in_routing_key", "transient", reconnectParam}

// amqpClientParams are the ones amqp091-go reads from the URL itself.
var amqpClientParams = []string{"heartbeat", "connection_timeout", "channel_max", "auth_mechanism", "certfile", "keyfile",
	"cacertfile", "server_name_indication"}

// openAMQP returns a RabbitMQ publisher for
//
//	amqp[s]://user:pass@host:5672/[VHOST][?exchange=X&key_in_routing_key=true&transient=true&reconnect_max=D]
//
// Messages go to the topic exchange X (default amq.topic) with the topic as routing key, with publisher confirms
// and the mandatory flag, so that a message no queue is bound for fails and is retried instead of vanishing. A
// lost connection is tried again at the relay's error-backoff pace, capped by reconnect_max (default
// --error-backoff-max), and the relay's probe waits for it (awaitingPublisher).
func openAMQP(_ context.Context, raw string, rt *runtime, o brokerOptions) (*brokerConn, error) {
	fail := brokerFail(raw)
	u, err := url.Parse(raw)
	if err != nil {
		return fail("not a URL (%v); write amqp://user:pass@host:5672/vhost, with reserved characters in the password percent-encoded",
			scrubURLError(err))
	}
	q := u.Query()
	for k := range q {
		if !slices.Contains(amqpParams, k) && !slices.Contains(amqpClientParams, k) {
			return fail("unknown parameter %q; AMQP URLs take %s, and %s", k, strings.Join(amqpParams, ", "), strings.Join(amqpClientParams, ", "))
		}
	}
	cfg := amqpbroker.PublisherConfig{Exchange: q.Get("exchange"), Source: o.source, Logger: rt.log}
	for name, p := range map[string]*bool{"key_in_routing_key": &cfg.KeyInRoutingKey, "transient": &cfg.Transient} {
		if v := q.Get(name); v != "" {
			if *p, err = strconv.ParseBool(v); err != nil {
				return fail("%s=%q is not true or false", name, v)
			}
		}
	}
	pace, err := o.reconnect.fromURL(q)
	if err != nil {
		return fail("%v", err)
	}
	cfg.MinReconnectDelay, cfg.MaxReconnectDelay = pace.base, pace.max
	for _, p := range amqpParams {
		q.Del(p)
	}
	u.RawQuery = q.Encode()
	cfg.URL = u.String()
	pub, err := amqpbroker.NewPublisher(&cfg)
	if err != nil {
		return fail("%v", err)
	}
	conn := ownConn(raw, pub)
	ping := conn.ping
	conn.ping = func(ctx context.Context) error {
		err := ping(ctx)
		// RabbitMQ answered, and refused: a wrong user or password (403 ACCESS_REFUSED), or a virtual host the
		// user may not open (530 NOT_ALLOWED). No retry fixes it, and it is not "unreachable".
		if err != nil && (strings.Contains(err.Error(), "Exception (403)") || strings.Contains(err.Error(), "Exception (530)")) {
			return &refusedError{err: err, fix: "check the user, password and virtual host in the URL"}
		}
		return err
	}
	return awaitBroker(conn, pace), nil
}

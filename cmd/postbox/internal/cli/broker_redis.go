package cli

import (
	"context"
	"fmt"
	"log/slog"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/postbox-go/postbox/broker/redisstream"
)

func init() {
	brokerSchemes["redis"] = openRedis
	brokerSchemes["rediss"] = openRedis
}

// redisParams are the query parameters of a redis:// URL that configure the publisher; every other parameter goes
// to go-redis (dial_timeout, read_timeout, pool_size, client_name, protocol, skip_verify...).
var redisParams = []string{"stream_prefix", "maxlen", "maxage", "require_stream", reconnectParam}

// redisBreakerDials is the pool size the daemon gives go-redis, for the threshold of its dial circuit breaker (see
// openRedis); it costs a slice of that many pointers.
const redisBreakerDials = 10000

// openRedis returns a Redis Streams publisher for
//
//	redis[s]://[[user]:pass@]host:6379[/DB][?stream_prefix=P&maxlen=N|maxage=D&require_stream=true&reconnect_max=D]
//
// Each message is added to stream stream_prefix + topic. maxlen or maxage trims the streams as they grow: an
// entry trimmed before a consumer group read it is lost to that group. rediss:// connects with TLS. go-redis
// dials on each command while Redis is down; the relay's probe waits for Redis, pinging it at the relay's
// error-backoff pace capped by reconnect_max (default --error-backoff-max; see awaitingPublisher).
func openRedis(_ context.Context, raw string, rt *runtime, o brokerOptions) (*brokerConn, error) {
	fail := brokerFail(raw)
	u, err := url.Parse(raw)
	if err != nil {
		return fail("not a URL (%v); write redis://host:6379/?stream_prefix=orders:", scrubURLError(err))
	}
	q := u.Query()
	cfg := redisstream.PublisherConfig{Source: o.source, StreamPrefix: q.Get("stream_prefix")}
	if v := q.Get("maxlen"); v != "" {
		if cfg.MaxLen, err = strconv.ParseInt(v, 10, 64); err != nil || cfg.MaxLen < 0 {
			return fail("maxlen=%q: write a whole number of entries, such as maxlen=1000000 (0 keeps every entry)", v)
		}
	}
	if v := q.Get("maxage"); v != "" {
		if cfg.MaxAge, err = time.ParseDuration(v); err != nil || cfg.MaxAge < 0 {
			return fail("maxage=%q: write a duration, such as maxage=72h (0 keeps every entry)", v)
		}
	}
	if cfg.MaxLen > 0 && cfg.MaxAge > 0 {
		return fail("set maxlen or maxage, not both: Redis trims a stream by one of them at a time")
	}
	if v := q.Get("require_stream"); v != "" {
		if cfg.RequireStream, err = strconv.ParseBool(v); err != nil {
			return fail("require_stream=%q is not true or false", v)
		}
	}
	pace, err := o.reconnect.fromURL(q)
	if err != nil {
		return fail("%v", err)
	}
	for _, p := range redisParams {
		q.Del(p)
	}
	u.RawQuery = q.Encode()
	opts, err := redis.ParseURL(u.String())
	if err != nil {
		return fail("%v; Redis URLs take %s, and go-redis's options such as dial_timeout, read_timeout and pool_size",
			scrubURLError(err), strings.Join(redisParams, ", "))
	}
	// The relay's publish timeout then bounds each pipeline, not only the client's read timeout.
	opts.ContextTimeoutEnabled = true
	// go-redis's pool stops dialing, but for one attempt a second, once PoolSize connections in a row failed to
	// dial (a circuit breaker): after an outage of more than a few seconds the relay would find Redis up to a
	// second late. Unless the URL sizes the pool, the breaker's threshold is raised out of reach of any outage
	// the relay's own pace could produce (a few dials a second). The pool opens connections only as commands
	// need them, and the relay runs a few at a time (one pipeline per worker, and the pings), so it holds no
	// more connections than before.
	if !q.Has("pool_size") {
		opts.PoolSize = redisBreakerDials
	}
	redis.SetLogger(redisLogger{rt.log})
	rdb := redis.NewClient(opts)
	pub, err := redisstream.NewPublisher(rdb, &cfg)
	if err != nil {
		rdb.Close()
		return fail("%v", err)
	}
	return awaitBroker(&brokerConn{
		name:  RedactURL(raw),
		pub:   pub,
		ping:  func(ctx context.Context) error { return rdb.Ping(ctx).Err() },
		close: func(context.Context) error { return rdb.Close() },
	}, pace), nil
}

// redisLogger sends go-redis's own messages to the command's logger, which scrubs secrets, instead of the
// standard library's logger.
type redisLogger struct{ log *slog.Logger }

func (l redisLogger) Printf(ctx context.Context, format string, v ...any) {
	l.log.WarnContext(ctx, fmt.Sprintf(format, v...), "component", "go-redis")
}

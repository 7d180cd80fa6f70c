package cli

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"time"

	"github.com/postbox-go/postbox"
	"github.com/postbox-go/postbox/driver/pgxv5/wal"
)

var relayCommand = &command{
	name:     "relay",
	synopsis: "--db URL --broker URL [--route PATTERN=URL]... [--http ADDR] [flags]",
	summary:  "publish committed messages to brokers until stopped (the daemon)",
	help: `
Runs the relay: claims batches of committed messages, publishes them and settles them, until SIGINT or SIGTERM.
On a signal it stops claiming, lets the in-flight batches publish and settle, and exits 0. Run as many replicas as
you like on one database: claims skip rows another relay holds.

Each message goes to the broker of the first --route whose pattern matches its topic ('*' matches any run of
characters, dots included), or to --broker when none matches. Each broker is a destination of its own: one that is
down holds back only its own topics (probed with one of its messages, at most every --error-backoff-max), and one
slower than --slow-publish holds one batch at a time, while every other broker's topics flow at full speed; the
log says when each goes down and comes back, and /metrics and /readyz show each one's state. Broker URLs:

  nats://[user:pass@]host:4222[,host2:4222][?stream=NAME&subjects=a,b.>&key_in_subject=true&tls=true&ca_file=PATH]
      NATS JetStream; the message ID is the Nats-Msg-Id, so JetStream drops republished duplicates. With stream
      and subjects the relay creates or updates that stream at start-up; otherwise the streams must exist.
      nats:// uses TLS only when the server offers it; tls://host:4222, tls=true or ca_file (certificates to
      trust, PEM) require it.
  kafka://[user:pass@]host:9092[,host2:9092][?topic_prefix=P&client_id=ID&tls=true&sasl=MECH&delivery_timeout=D&debezium=PATH]
      Kafka, with franz-go's idempotent producer: a record on topic P + topic, keyed by the message key, with
      the message ID in the ce_id header. A user and password log in with SASL (sasl=plain by default,
      scram-sha-256 or scram-sha-512). The topics must exist unless the cluster creates them. debezium=PATH
      (a Debezium connector's configuration, JSON or .properties) or debezium=defaults writes each message as
      Debezium's Outbox Event Router would write its row (docs/DEBEZIUM.md).
  amqp[s]://user:pass@host:5672/[VHOST][?exchange=X&key_in_routing_key=true&transient=true]
      RabbitMQ: published to topic exchange X (default amq.topic) with the topic as routing key, the message ID
      as message-id, persistent unless transient=true, with publisher confirms and the mandatory flag: a message
      no queue is bound for fails and is retried. amqp091-go's parameters (heartbeat, connection_timeout,
      certfile, keyfile, cacertfile, server_name_indication, auth_mechanism) are accepted too.
  mqtt[s]://[user:pass@]host:1883[?client_id=ID&allow_no_subscribers=true&session_expiry=D&keepalive=D&connect_timeout=D]
      MQTT 5 at QoS 1 to the topic named by the message's topic; published on the PUBACK. A message no
      subscription matches is dropped by the server, so it fails and is retried unless allow_no_subscribers=true.
  pubsub://PROJECT[?topic_prefix=P&timeout=D&credentials_file=PATH]
      Google Cloud Pub/Sub: topic P + topic of PROJECT, the key as ordering key. Credentials are the
      Application Default Credentials or credentials_file; with PUBSUB_EMULATOR_HOST=host:port set, the
      emulator is used instead. The topics must exist. /readyz does not check Pub/Sub, since every call that
      would needs more than the publisher's permission.
  redis://[[user]:pass@]host:6379[/DB][?stream_prefix=P&maxlen=N&maxage=D&require_stream=true]
      Redis Streams: each message is added (XADD) to stream P + topic. maxlen (entries) or maxage (such as
      72h) trims each stream as it grows; an entry trimmed before a consumer group read it is lost to that
      group. require_stream=true fails messages whose stream does not exist yet instead of creating it. Redis
      does not dedup: the consumers' inbox does. rediss:// connects with TLS; go-redis's options, such as
      dial_timeout, read_timeout and pool_size, go in the query too.
  http://host/path, https://host/path
      a webhook: each message is POSTed in the CloudEvents HTTP binary mode, signed with --webhook-secret
      (Standard Webhooks headers, plus Postbox-Signature over the topic, type, key and headers). {topic} in
      the path or query is replaced by the message's topic, escaped. The secret is whsec_ and base64, as
      Standard Webhooks receivers take it, or other text of 24 bytes or more used as it is. Give it in
      POSTBOX_WEBHOOK_SECRET or the config file: on the command line, other users see it in ps.
  stdout:
      one JSON line per message in the CloudEvents JSON format, for debugging and pipes.

A broker connection that is lost is tried again at the pace of --error-backoff-max: from 100ms doubling up to it,
and every 50-100ms while the server refuses connections (it is restarting), so that the relay publishes again
within about 100ms of a restarted broker listening. nats, amqp, mqtt, redis, kafka and pubsub URLs take
reconnect_max=D to set that broker's cap instead. While a broker is down the relay sends it one message at a
time, each waiting up to --publish-timeout for the broker to answer.

With --http, the relay serves /healthz (the process is up), /readyz (the database and every broker answer;
503 otherwise; checked at most every 2s, with the reasons in the log) and /metrics, OpenTelemetry metrics in the
Prometheus format. None of them asks for credentials: bind a loopback or private address, such as 127.0.0.1:9090.

` + metricsHelp + "\n" + destinationHelp + `

Before it starts, the relay checks that the tables are migrated (exit 1 with the migrate command to run
otherwise) and pings every broker until it answers or --start-timeout passes: a broker that never answers is
named with its reason (refused connection, wrong password, no TLS) and the relay exits 1. A database that does
not answer yet (refused, unreachable, starting up) is waited for at the pace of --error-backoff-max, with one
log line and /readyz answering 503 meanwhile; a database that answers and refuses (password, privileges, no such
database) ends the relay at once. Running, it logs the
brokers' disconnects and reconnects (NATS, RabbitMQ, MQTT), and while messages flow one 'relay progress' line at
most every --progress-interval: messages published, failed and parked dead since the last line, then the ready
messages still pending, the scheduled ones, and the lag (how long the oldest ready message has waited). With
--log-level debug it also logs one line per batch.

With --ordered the relay publishes the messages of each key one at a time, in enqueue order: a failing message
holds back its own key and no other, and with --dead-holds-key a dead one holds it until it is retried or purged.
The tables need 'postbox migrate up --ordered'. An ordered relay runs one worker unless --workers says otherwise.

` + sourcesHelp + `

When the config file has an events registry, a message that breaks it (unknown type, wrong topic, missing key,
invalid payload) is parked as dead at once instead of being published.

` + walHelp + `

` + poolerHelp + `

` + tracingHelp,
	examples: []string{
		"postbox relay --db postgres://postbox@localhost/app --broker nats://localhost:4222",
		"postbox relay --db postgres://localhost/app --broker nats://localhost:4222 --route 'audit.*=stdout:'",
		"postbox relay --db sqlite:app.db --broker 'nats://localhost:4222?stream=ORDERS&subjects=orders.>'",
		"postbox relay --db sqlite:app.db --broker stdout: --http 127.0.0.1:9090",
		"postbox relay --db mysql://relay:secret@db:3306/shop --broker 'redis://:secret@cache:6379/0?stream_prefix=shop:&maxlen=1000000'",
		"postbox relay --db postgres://localhost/app --broker 'kafka://relay:secret@kafka-1:9092,kafka-2:9092?sasl=scram-sha-512&tls=true'",
		"postbox relay --db postgres://localhost/app --broker amqp://relay:secret@rabbit:5672/shop --route 'iot.*=mqtt://mosquitto:1883'",
		"PUBSUB_EMULATOR_HOST=localhost:8085 postbox relay --db sqlite:app.db --broker pubsub://my-project",
		"POSTBOX_WEBHOOK_SECRET=whsec_... postbox relay --db sqlite:app.db --broker 'https://hooks.example/in/{topic}'",
		"postbox relay --db postgres://localhost/app --broker kafka://kafka-1:9092 --ordered",
		"postbox relay --db postgres://app@pgbouncer:6432/app --db-pooler transaction --listen-db postgres://app@db-primary:5432/app --broker nats://localhost:4222",
		"postbox relay --db postgres://relay@localhost/app --broker nats://localhost:4222 --wal --http 127.0.0.1:9090",
		"postbox relay --config /etc/postbox.yaml",
		"postbox relay --db postgres://relay@db-1/tenant_a --db postgres://relay@db-1/tenant_b --broker nats://localhost:4222",
		"POSTBOX_DB=postgres://localhost/app POSTBOX_BROKER=stdout: postbox relay --workers 4",
	},
	setup: func(f *flagSet) func(ctx context.Context, rt *runtime, args []string) error {
		var o dbOptions
		var ro relayOptions
		addRelayDBFlags(f, &o, &ro)
		f.URL(&ro.broker, "broker", "b", "default broker URL, for topics no --route matches")
		f.List(&ro.routes, "route", "r", "PATTERN=URL", "send topics matching PATTERN to the broker at URL").secret = true
		f.String(&ro.http, "http", "", "", "ADDR", "serve /healthz, /readyz and /metrics on this address, such as 127.0.0.1:9090")
		f.String(&ro.source, "source", "", "postbox", "URI", "CloudEvents source of published messages")
		webhookSecret := f.String(&ro.webhookSecret, "webhook-secret", "", "", "SECRET",
			"key signing http(s) webhook requests: whsec_<base64> or text of 24+ bytes; never printed; prefer the environment variable, since ps shows flags")
		webhookSecret.secretValue = true
		f.Int(&ro.cfg.BatchSize, "batch-size", postbox.DefaultBatchSize, "most messages one claim takes")
		// Left at 0 unless given, so that the relay picks its default: one worker when ordered, two otherwise.
		f.add(&option{name: "workers", usage: "concurrent claim-publish-settle loops", placeholder: "N",
			def: fmt.Sprintf("%d, or 1 with --ordered", postbox.DefaultWorkers), value: (*intValue)(&ro.cfg.Workers)})
		f.Duration(&ro.cfg.PollInterval, "poll-interval", postbox.DefaultPollInterval, "how often an idle worker looks for messages once nothing happened for a while")
		f.Int(&ro.cfg.QuietDivisor, "quiet-divisor", postbox.DefaultQuietDivisor,
			"after activity an idle worker looks again after the quiet time divided by this (more: sooner), up to --poll-interval")
		f.Duration(&ro.cfg.PublishTimeout, "publish-timeout", postbox.DefaultPublishTimeout, "bound on each publish; a batch that times out is retried")
		f.Duration(&ro.cfg.SettleTimeout, "settle-timeout", postbox.DefaultSettleTimeout, "bound on recording a published batch; a batch whose settle fails is published again")
		f.Int(&ro.cfg.MaxAttempts, "max-attempts", postbox.DefaultMaxAttempts, "failed publishes after which a message is parked as dead")
		f.Duration(&ro.cfg.BackoffBase, "backoff-base", postbox.DefaultBackoffBase, "delay after the first failure, doubled after each")
		f.Duration(&ro.cfg.BackoffMax, "backoff-max", postbox.DefaultBackoffMax, "longest delay between attempts")
		f.Duration(&ro.cfg.ErrorBackoffMax, "error-backoff-max", postbox.DefaultErrorBackoffMax,
			"longest delay between attempts while the database or a broker is down, broker reconnections included (a broker URL's reconnect_max overrides it); the relay resumes within about this long of it answering, within 100ms of a restarted server listening again")
		f.Duration(&ro.cfg.SlowPublish, "slow-publish", postbox.DefaultSlowPublish,
			"a destination whose publishes take longer is slow: its messages are then claimed one batch at a time, so that it cannot hold up the others")
		f.Duration(&ro.cfg.StallAfter, "stall-after", postbox.DefaultStallAfter,
			"with messages ready and none published for this long, log that the relay is stalled, naming what waits, and set postbox_relay_stalled")
		f.Duration(&ro.cfg.PausedRefresh, "paused-refresh", postbox.DefaultPausedRefresh, "how often to read the paused topics (postbox topics pause); a pause takes effect within it")
		f.Bool(&ro.cfg.KeepPublished, "keep-published", "", "mark published messages instead of deleting them, for audit and replay")
		f.Duration(&ro.retention, "retention", postbox.DefaultRetention, "how long --keep-published keeps published messages")
		f.Bool(&o.ordered, "ordered", "", "publish each key's messages one at a time, in enqueue order (tables from migrate up --ordered)")
		f.Bool(&ro.cfg.DeadHoldsKey, "dead-holds-key", "", "with --ordered, a dead message holds back its key until retried or purged")
		f.URL(&o.pg.listenURL, "listen-db", "", "direct PostgreSQL URL the relay LISTENs on for wake-ups, when --db goes through a pooler")
		f.Bool(&ro.cfg.DisableListen, "no-listen", "", "do not LISTEN for wake-ups: poll every --poll-interval")
		f.Duration(&ro.startTimeout, "start-timeout", DefaultStartTimeout, "how long to wait at start for every broker to answer before exiting 1")
		f.Duration(&ro.progressEvery, "progress-interval", DefaultProgressInterval, "while messages flow, log a progress line at most this often (0: never)")
		addWALFlags(f, &ro.wal)
		return func(ctx context.Context, rt *runtime, args []string) error {
			if len(args) > 0 {
				return usageErrorf("unexpected argument %q", args[0])
			}
			ro.webhookSecretFrom = webhookSecret.from
			if err := ro.wal.checkSecret(); err != nil {
				return err
			}
			if ro.cfg.DeadHoldsKey && !o.ordered {
				return usageErrorf("--dead-holds-key applies to ordered relays only; add --ordered")
			}
			if len(ro.dbs) > 1 || (rt.file != nil && rt.file.sources != nil) {
				return runSources(ctx, rt, o, ro)
			}
			if len(ro.dbs) == 1 {
				o.url = ro.dbs[0]
			}
			o.pg.maxConns = ro.maxConns
			return runRelay(ctx, rt, o, ro)
		}
	},
}

type relayOptions struct {
	dbs                  []string // --db, repeated for many sources
	maxConns             int      // --db-max-conns
	broker, http, source string
	webhookSecret        string
	webhookSecretFrom    string
	routes               []string
	cfg                  postbox.RelayConfig
	retention            time.Duration // of published messages, with KeepPublished
	startTimeout         time.Duration // for the brokers to answer at start
	progressEvery        time.Duration // between progress lines; 0 for none
	wal                  walOptions
}

func runRelay(ctx context.Context, rt *runtime, o dbOptions, ro relayOptions) error {
	reg, err := rt.file.registry()
	if err != nil {
		return err
	}
	db, err := o.open(ctx, rt, reg)
	if err != nil {
		return err
	}
	defer db.Close()
	if ro.webhookSecretFrom == "--webhook-secret" {
		rt.log.Warn("--webhook-secret on the command line is visible to other users of this machine (ps, /proc); " +
			"set POSTBOX_WEBHOOK_SECRET or the config file's webhook-secret key instead")
	}
	if ro.wal.on && ro.wal.secret.from == "--wal-secret" {
		rt.log.Warn("--wal-secret on the command line is visible to other users of this machine (ps, /proc); " +
			"set POSTBOX_WAL_SECRET or the config file's wal-secret key instead")
	}
	rtr, err := openRouter(ctx, rt, ro.broker, ro.routes,
		brokerOptions{source: ro.source, webhookSecret: ro.webhookSecret, webhookSecretFrom: ro.webhookSecretFrom,
			reconnect: newReconnectPace(ro.cfg.ErrorBackoffMax)})
	if err != nil {
		return err
	}
	defer closeBrokers(context.WithoutCancel(ctx), rt, rtr.conns())
	tp, err := newTracing(ctx, rt)
	if err != nil {
		return err
	}
	if tp != nil {
		traceBrokers(rtr, tp)
		// Runs once the relay has drained, so the last batches' spans are exported too.
		defer func() {
			sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
			defer cancel()
			if err := tp.Shutdown(sctx); err != nil {
				rt.log.Warn("flushing trace spans", "err", err)
			}
		}()
	}

	metrics, err := newRelayMetrics(rt.log, func(ctx context.Context) (postbox.Stats, error) {
		ctx, cancel := context.WithTimeout(ctx, 5*time.Second) // a scrape waits no longer for the database
		defer cancel()
		return db.Stats(ctx)
	})
	if err != nil {
		return fmt.Errorf("metrics: %w", err)
	}
	defer metrics.shutdown(context.WithoutCancel(ctx))
	cfg := ro.cfg
	cfg.Logger, cfg.Observer = rt.log, batchLog{next: metrics.observer, log: rt.log}
	if err := configureListen(ctx, rt, o, &cfg); err != nil {
		return err
	}
	relay, err := db.NewRelay(rtr, &cfg)
	if err != nil {
		return usageErrorf("%v", err)
	}
	if err := destinationGauges(metrics, relay.Stats); err != nil {
		return fmt.Errorf("metrics: %w", err)
	}
	var cleaner *postbox.Cleaner
	if cfg.KeepPublished {
		// Kept messages leave after --retention; the inbox is left to postbox cleanup.
		cleaner, err = db.NewCleaner(&postbox.CleanupConfig{Retention: ro.retention, KeepInbox: true, Logger: rt.log})
		if err != nil {
			return usageErrorf("--retention: %v", err)
		}
	}

	routeURLs := make([]string, 0, len(ro.routes))
	for _, v := range ro.routes {
		if _, u, err := parseRoute(v); err == nil {
			routeURLs = append(routeURLs, u)
		}
	}
	warnPlaintext(rt, o.url, append([]string{ro.broker}, routeURLs...))

	// Every option is valid by now: check what they name, the tables first, and fail at start rather than
	// start a relay that cannot work.
	if ro.startTimeout <= 0 {
		return usageErrorf("--start-timeout %v: give a positive duration, such as 10s", ro.startTimeout)
	}
	// Served from here on, so that /readyz says why the relay is not ready while it waits for its database.
	var srv *http.Server
	serveErr := make(chan error, 1)
	if ro.http != "" {
		ln, err := net.Listen("tcp", ro.http)
		if err != nil {
			return fmt.Errorf("--http %s: %w", ro.http, err)
		}
		ready := newReadiness(db, rtr, rt.log)
		ready.destinations = func() []destinationState { return destinationStates(relay.Stats(), rtr.conns()) }
		srv = newHTTPServer(relayHandler(ready, metrics))
		go func() { serveErr <- srv.Serve(ln) }()
		rt.log.Info("serving health and metrics", "addr", ln.Addr().String())
		defer func() {
			sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
			defer cancel()
			if err := srv.Shutdown(sctx); err != nil && !errors.Is(err, http.ErrServerClosed) {
				rt.log.Warn("http shutdown", "err", err)
			}
		}()
	}
	if err := awaitDatabase(ctx, rt.log, o, db, newReconnectPace(cfg.ErrorBackoffMax), ro.startTimeout); err != nil {
		if ctx.Err() != nil {
			return nil // stopped while waiting: nothing was claimed
		}
		return err
	}
	if err := checkBrokers(ctx, rtr.conns(), ro.startTimeout); err != nil {
		return err
	}
	var walRelay *wal.Relay
	counts := tableCounts(relay)
	if ro.wal.on {
		wr, closeWAL, err := startWAL(ctx, rt, o, ro.wal, reg, rtr, cfg.Observer, metrics)
		if err != nil {
			return err
		}
		defer closeWAL()
		walRelay, counts = wr, withWAL(counts, wr)
		rt.log.Info("WAL relay started", "slot", wr.Slot())
	}

	names := make([]string, 0)
	for _, c := range rtr.conns() {
		names = append(names, c.name)
	}
	workers := cfg.Workers
	if workers == 0 {
		workers = postbox.DefaultWorkers
		if o.ordered {
			workers = 1 // NewRelay's default for an ordered client
		}
	}
	rt.log.Info("relay started", "db", RedactURL(o.url), "brokers", names, "routes", len(rtr.routes),
		"workers", workers, "batch_size", cfg.BatchSize, "ordered", o.ordered)

	runCtx, stop := context.WithCancel(ctx)
	defer stop()
	relayDone := make(chan error, 1)
	go func() { relayDone <- relay.Run(runCtx) }()
	walDone := make(chan error, 1)
	if walRelay != nil {
		go func() {
			err := walRelay.Run(runCtx)
			if err != nil {
				stop() // the WAL relay refused to work: stop the daemon rather than run half of it
			}
			walDone <- err
		}()
	} else {
		walDone <- nil
	}
	progressDone := make(chan struct{})
	go func() {
		defer close(progressDone)
		if ro.progressEvery > 0 {
			logProgress(runCtx, rt.log, ro.progressEvery, counts, db.Stats)
		}
	}()
	cleanerDone := make(chan struct{})
	go func() {
		defer close(cleanerDone)
		if cleaner != nil {
			_ = cleaner.Run(runCtx) // it logs its own errors and returns nil
		}
	}()

	var runErr error
	select {
	case runErr = <-relayDone:
	case err := <-serveErr:
		stop()
		<-relayDone
		runErr = fmt.Errorf("http server: %w", err)
	}
	stop()
	if err := <-walDone; err != nil && runErr == nil {
		runErr = fmt.Errorf("WAL relay: %w", err)
	}
	<-cleanerDone
	<-progressDone
	rt.log.Info("relay stopping: in-flight batches settled", counts().stopAttrs()...)
	return runErr
}

// relayHandler serves the relay's health, readiness and metrics.
func relayHandler(ready *readiness, m *relayMetrics) http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprintln(w, "ok")
	})
	mux.HandleFunc("GET /readyz", func(w http.ResponseWriter, r *http.Request) {
		checks := ready.get(r.Context())
		ok := isReady(checks)
		w.Header().Set("Content-Type", "application/json")
		if !ok {
			w.WriteHeader(http.StatusServiceUnavailable)
		}
		body := map[string]any{"ready": ok, "checks": checks}
		if ready.destinations != nil {
			body["destinations"] = ready.destinations()
		}
		writeJSON(w, body)
	})
	mux.Handle("GET /metrics", m.handler)
	return mux
}

// newHTTPServer is the relay's HTTP server, with every timeout set: a client that is slow to send its headers,
// to read an answer, or that holds an idle connection open, is cut off.
func newHTTPServer(h http.Handler) *http.Server {
	return &http.Server{
		Handler:           h,
		ReadHeaderTimeout: 10 * time.Second,
		ReadTimeout:       30 * time.Second,
		WriteTimeout:      30 * time.Second, // a /metrics scrape waits at most 5s for the database
		IdleTimeout:       2 * time.Minute,
	}
}

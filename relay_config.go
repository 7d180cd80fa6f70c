package postbox

import (
	"fmt"
	"log/slog"
	"time"
)

// Defaults for RelayConfig.
const (
	DefaultBatchSize      = 500
	DefaultWorkers        = 2
	DefaultPollInterval   = 500 * time.Millisecond
	DefaultPublishTimeout = 10 * time.Second
	DefaultSettleTimeout  = 30 * time.Second
	DefaultMaxAttempts    = 20
	DefaultBackoffBase    = time.Second
	DefaultBackoffMax     = 10 * time.Minute
	DefaultRecheckDelay   = 2 * time.Millisecond
	DefaultQuietDivisor   = 4
	DefaultStallAfter     = time.Minute
	// DefaultErrorBackoffBase and DefaultErrorBackoffMax shape how often a relay that cannot work tries again.
	DefaultErrorBackoffBase = 100 * time.Millisecond
	DefaultErrorBackoffMax  = time.Second
	// MaxLastErrorLen bounds the error text kept on a record.
	MaxLastErrorLen = 2000
)

// RelayConfig configures a Relay. The zero value is valid: every field has a default.
type RelayConfig struct {
	// BatchSize is the most records one claim takes. Default: DefaultBatchSize (500).
	BatchSize int
	// Workers is the number of claim-publish-settle loops in this relay. Each holds one database connection
	// while it publishes. With two, one worker claims and settles while the other waits for the broker's acks.
	// Default: DefaultWorkers (2), or 1 for an ordered client (Config.Ordered).
	Workers int
	// PollInterval is how often an idle worker looks for messages when no wake-up comes and nothing happened for
	// a while (see QuietDivisor): it is the latency bound of a message after a long quiet spell without LISTEN,
	// and the backstop with it. An idle worker looks with one cheap statement, and claims only when that finds
	// something. After a full batch it claims again at once. Default: DefaultPollInterval (500ms).
	PollInterval time.Duration
	// QuietDivisor shapes how an idle worker slows down after activity (messages claimed, a wake-up, or an
	// enqueue by the relay's own client in this process): it looks again after the time since that activity
	// divided by QuietDivisor, at least 4·RecheckDelay and at most PollInterval. A message committed without a
	// wake-up after a quiet spell of d (a producer in another process, on MySQL or SQLite, or behind PgBouncer) is
	// so found within about d/QuietDivisor, and a relay that falls idle sends a few looks (about 23 with the defaults)
	// before it settles at one per PollInterval. A larger value looks more often. Default: DefaultQuietDivisor (4).
	QuietDivisor int
	// PublishTimeout bounds each Publish call; a batch that times out is retried. Default: DefaultPublishTimeout
	// (10s).
	PublishTimeout time.Duration
	// SettleTimeout bounds the statement that records a published batch. A settle that fails leaves the batch
	// to be published again, so it gets more room than a publish. Default: DefaultSettleTimeout (30s).
	SettleTimeout time.Duration
	// MaxAttempts is how many failed publishes park a message as dead. Default: DefaultMaxAttempts (20), which
	// with the default backoff keeps retrying for one to two hours. A batch the broker refused whole because it
	// was unavailable (see ErrorBackoffMax) costs its messages no attempt.
	MaxAttempts int
	// BackoffBase and BackoffMax shape a failed message's retry delay: d = BackoffBase·2^(attempts-1), at most
	// BackoffMax, with equal jitter (a uniform draw between d/2 and d) so that failed batches spread out.
	// Defaults: DefaultBackoffBase (1s), DefaultBackoffMax (10m).
	BackoffBase time.Duration
	BackoffMax  time.Duration
	// Backoff, when set, replaces the default delay of a failed message: it returns how long to wait after the
	// given failed attempt (1 after the first failure). It does not change ErrorBackoffBase and ErrorBackoffMax.
	Backoff func(attempt int) time.Duration
	// ErrorBackoffBase and ErrorBackoffMax shape how often a relay that cannot work tries again: after a claim or
	// settle fails (the database is down, restarting or unreachable), or after the broker refused a whole batch
	// because it was unavailable (every message failed with a timeout, a refused or reset connection, or an error
	// the adapter marked with Unavailable). The delay starts at ErrorBackoffBase and doubles up to
	// ErrorBackoffMax, with equal jitter. While the database is down the relay pings it (a connection and an
	// empty statement, where the driver implements driver.Pinger) at that pace and claims as soon as it answers;
	// a refused connection and PostgreSQL's "not yet accepting connections" (SQLSTATE 57P03) do not make the
	// delay grow. While the broker is down each worker publishes one message at that pace, and full batches
	// again as soon as one is acknowledged. So a relay resumes within about ErrorBackoffMax of its database or
	// broker answering. With a publisher of several destinations (Destinations, such as Router) this holds per
	// destination: a destination that is down holds back only its own messages, which the relay's ordinary claims
	// skip while one of them probes it at this pace. Defaults: DefaultErrorBackoffBase (100ms, or ErrorBackoffMax when that is lower),
	// DefaultErrorBackoffMax (1s, or ErrorBackoffBase when that is higher).
	ErrorBackoffBase time.Duration
	ErrorBackoffMax  time.Duration
	// KeepPublished marks published messages as published instead of deleting them, for audit and replay. Run a
	// Cleaner to delete them once past CleanupConfig.Retention. Default: false (delete at once).
	KeepPublished bool
	// Logger receives the relay's logs. Default: the client's logger.
	Logger *slog.Logger

	// DeadHoldsKey, in ordered mode (Config.Ordered), keeps a dead message's key blocked until an operator
	// retries or purges it. NewRelay refuses it for a client that is not ordered. Default: false, a dead message
	// releases its key.
	DeadHoldsKey bool
	// DisableListen stops the relay from listening for the wake-ups that clients send when they enqueue
	// (PostgreSQL LISTEN through pgxv5), so it finds messages by polling alone. Set it behind a connection pooler
	// in transaction mode, such as PgBouncer, where LISTEN does not work. Default: false.
	DisableListen bool
	// RecheckDelay is how soon a worker claims again after a claim that found fewer than BatchSize messages, or
	// after a wake-up: transactions that committed just after the one that woke the relay are caught then rather
	// than at the next poll. When that claim finds nothing the worker falls idle, looking again after 4 times
	// RecheckDelay and then ever less often (see QuietDivisor), up to PollInterval. While messages flow, the time
	// from commit to publish is about half of RecheckDelay plus one claim. Default: DefaultRecheckDelay (2ms).
	RecheckDelay time.Duration
	// Observer, when set, receives the outcome of every batch, for metrics. Default: none.
	Observer RelayObserver
	// PausedRefresh is how often the relay reads the paused topics (Client.PauseTopic), which its claims skip: a
	// pause or resume takes effect within it. The read is one small query per relay, not per claim, so a relay
	// with nothing paused claims exactly as before. Default: DefaultPausedRefresh (2s).
	PausedRefresh time.Duration
	// SlowPublish is how long one destination's share of a batch may take before the destination counts as slow:
	// its messages are then claimed by one claim at a time, so that it cannot hold every worker while the other
	// destinations' messages wait. Default: DefaultSlowPublish (1s).
	SlowPublish time.Duration
	// StallAfter is how long a relay may go with ready messages and nothing published before it reports itself
	// stalled (Stats().Stalled, a log line naming the destinations and topics that wait). Default:
	// DefaultStallAfter (1m).
	StallAfter time.Duration
	// HeartbeatInterval is how often the relay records its heartbeat (instance, version, totals, health per
	// destination) in the table set's relays table, which Client.Relays, `postbox status` and the console read.
	// Negative turns heartbeats off. A relay serving a source of a RelayGroup beats at most once a minute, so that
	// idle sources cost little. Default: DefaultHeartbeatInterval (10s).
	HeartbeatInterval time.Duration
	// Instance names the relay in its heartbeat. Default: host:pid:random.
	Instance string
}

// Retry returns the retry policy of c, which the relay's delivery step rules by.
func (c RelayConfig) Retry() RetryPolicy {
	return RetryPolicy{MaxAttempts: c.MaxAttempts, BackoffBase: c.BackoffBase, BackoffMax: c.BackoffMax, Backoff: c.Backoff,
		ErrorBackoffBase: c.ErrorBackoffBase, ErrorBackoffMax: c.ErrorBackoffMax}
}

// WithDefaults returns a copy of c with every zero field set to its default. A nil c gives the defaults.
func (c *RelayConfig) WithDefaults() RelayConfig {
	var out RelayConfig
	if c != nil {
		out = *c
	}
	setDefault(&out.BatchSize, DefaultBatchSize)
	setDefault(&out.Workers, DefaultWorkers)
	setDefault(&out.PollInterval, DefaultPollInterval)
	setDefault(&out.PublishTimeout, DefaultPublishTimeout)
	setDefault(&out.SettleTimeout, DefaultSettleTimeout)
	setDefault(&out.RecheckDelay, DefaultRecheckDelay)
	setDefault(&out.PausedRefresh, DefaultPausedRefresh)
	setDefault(&out.QuietDivisor, DefaultQuietDivisor)
	setDefault(&out.SlowPublish, DefaultSlowPublish)
	setDefault(&out.StallAfter, DefaultStallAfter)
	setDefault(&out.HeartbeatInterval, DefaultHeartbeatInterval)
	if out.Instance == "" {
		out.Instance = defaultInstance()
	}
	p := out.Retry().WithDefaults()
	out.MaxAttempts, out.BackoffBase, out.BackoffMax = p.MaxAttempts, p.BackoffBase, p.BackoffMax
	out.ErrorBackoffBase, out.ErrorBackoffMax = p.ErrorBackoffBase, p.ErrorBackoffMax
	return out
}

func setDefault[T comparable](p *T, def T) {
	var zero T
	if *p == zero {
		*p = def
	}
}

func (c RelayConfig) validate() error {
	positive := []struct {
		name string
		v    int64
	}{
		{"BatchSize", int64(c.BatchSize)}, {"Workers", int64(c.Workers)}, {"PollInterval", int64(c.PollInterval)},
		{"PublishTimeout", int64(c.PublishTimeout)}, {"SettleTimeout", int64(c.SettleTimeout)}, {"MaxAttempts", int64(c.MaxAttempts)},
		{"BackoffBase", int64(c.BackoffBase)}, {"BackoffMax", int64(c.BackoffMax)},
		{"RecheckDelay", int64(c.RecheckDelay)}, {"QuietDivisor", int64(c.QuietDivisor)}, {"ErrorBackoffBase", int64(c.ErrorBackoffBase)},
		{"ErrorBackoffMax", int64(c.ErrorBackoffMax)}, {"PausedRefresh", int64(c.PausedRefresh)},
		{"SlowPublish", int64(c.SlowPublish)}, {"StallAfter", int64(c.StallAfter)},
	}
	for _, p := range positive {
		if p.v < 0 {
			return fmt.Errorf("%w: RelayConfig.%s is negative; use a positive value or 0 for the default", ErrInvalidConfig, p.name)
		}
	}
	if c.BackoffMax < c.BackoffBase {
		return fmt.Errorf("%w: RelayConfig.BackoffMax (%v) is below BackoffBase (%v)", ErrInvalidConfig, c.BackoffMax, c.BackoffBase)
	}
	if c.ErrorBackoffMax < c.ErrorBackoffBase {
		return fmt.Errorf("%w: RelayConfig.ErrorBackoffMax (%v) is below ErrorBackoffBase (%v)", ErrInvalidConfig,
			c.ErrorBackoffMax, c.ErrorBackoffBase)
	}
	return nil
}

package chaos

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/postbox-go/postbox"
	"github.com/postbox-go/postbox/broker"
	"github.com/postbox-go/postbox/driver/pgxv5"
)

// The roles a scenario's processes play. The same code runs in the test process and in child processes (the
// test binary run again with roleConfig in its environment), so a role killed as a process behaves exactly as
// it does in process.

// poisonType marks a message every handler refuses.
const poisonType = "chaos.poison"

// roleConfig is everything a relay or consumer needs to join a scenario.
type roleConfig struct {
	Role     string // "relay" or "consumer"
	DB       string // PostgreSQL URL
	Broker   string // brokerNATS, brokerAMQP or brokerSQS
	Topic    string // the scenario's topic
	URL      string // the broker's URL (a proxy's, when the scenario puts one in between)
	Prefix   string // the scenario's table prefix
	Stream   string
	Consumer string // the durable consumer's and the inbox consumer's name
	Ordered  bool   // the clients are ordered: the outbox is migrated for it, and relays claim in per-key order
	WAL      bool   // clients write messages into the WAL (package wal) and relays read them from its slot

	// Relay
	BatchSize    int
	Workers      int
	MaxAttempts  int
	PollInterval time.Duration
	Backoff      time.Duration // constant retry delay, so faults do not push retries minutes away; 0: the default
	DeadHoldsKey bool          // in ordered mode, a dead message holds back its key

	// Consumer
	MaxFailures int
	KillAfter   int    // kill this process at its KillAfter-th processed message (0: never)
	KillAt      string // killBeforeCommit or killAfterCommit
}

const (
	killBeforeCommit = "before-commit" // in the handler, its writes done, before the inbox transaction commits
	killAfterCommit  = "after-commit"  // after the commit, before the broker ack
)

func (c roleConfig) outbox() string { return c.Prefix + "_outbox" }
func (c roleConfig) inbox() string  { return c.Prefix + "_inbox" }

func (c roleConfig) ledger() (*Ledger, error) { return NewLedger(c.Prefix, c.outbox(), c.inbox()) }

func (c roleConfig) client(pool *pgxpool.Pool, log *slog.Logger) (*postbox.Client[pgx.Tx], error) {
	if c.WAL {
		return postbox.NewClient(walDriver(pool), &postbox.Config{Table: c.outbox(), InboxTable: c.inbox(), Logger: log})
	}
	return postbox.NewClient(pgxv5.New(pool), &postbox.Config{Table: c.outbox(), InboxTable: c.inbox(), Ordered: c.Ordered, Logger: log})
}

// connect opens a pool on c.DB and the scenario's client on it; closeClient closes the pool.
func (c roleConfig) connect(ctx context.Context, log *slog.Logger) (client *postbox.Client[pgx.Tx], closeClient func(), err error) {
	pool, err := pgxpool.New(ctx, c.DB)
	if err != nil {
		return nil, nil, err
	}
	if client, err = c.client(pool, log); err != nil {
		pool.Close()
		return nil, nil, err
	}
	return client, pool.Close, nil
}

// roleStats add up what in-process roles saw, so that a scenario can show that its fault was felt.
type roleStats struct {
	mu       sync.Mutex
	relay    postbox.RelayStats
	outcomes [5]atomic.Int64 // deliveries by postbox.Outcome
}

func (s *roleStats) addRelay(r postbox.RelayStats) {
	if s == nil {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.relay.Published += r.Published
	s.relay.Failed += r.Failed
	s.relay.Dead += r.Dead
	s.relay.Batches += r.Batches
	s.relay.Errors += r.Errors
	s.relay.Unavailable += r.Unavailable
}

func (s *roleStats) addOutcome(o postbox.Outcome) {
	if s != nil && int(o) < len(s.outcomes) {
		s.outcomes[o].Add(1)
	}
}

func (s *roleStats) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return fmt.Sprintf("in-process relays: %d published, %d failed publishes retried, %d dead, %d claim or settle errors; "+
		"in-process consumers: %d processed, %d duplicates, %d retries, %d failed, %d rejected",
		s.relay.Published, s.relay.Failed, s.relay.Dead, s.relay.Errors,
		s.outcomes[postbox.Processed].Load(), s.outcomes[postbox.Duplicate].Load(), s.outcomes[postbox.Retry].Load(),
		s.outcomes[postbox.Failed].Load(), s.outcomes[postbox.Rejected].Load())
}

// redeliveries is what consumers report about messages delivered again: the IDs that consumer processes
// committed and then died holding unacknowledged, and each delivery the inbox skipped as a duplicate. It is safe
// for concurrent use.
type redeliveries struct {
	mu       sync.Mutex
	unacked  []string
	absorbed map[string]int
}

// add records one report of a consumer: reportUnacked or reportDuplicate.
func (r *redeliveries) add(kind, id string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	switch kind {
	case reportUnacked:
		r.unacked = append(r.unacked, id)
	case reportDuplicate:
		if r.absorbed == nil {
			r.absorbed = map[string]int{}
		}
		r.absorbed[id]++
	}
}

// absorbedUnacked returns how many duplicates the inbox absorbed, how many messages consumers died holding
// unacknowledged after their commit, and those of them that never came back as an absorbed duplicate.
func (r *redeliveries) absorbedUnacked() (absorbed, unacked int, missing []string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, n := range r.absorbed {
		absorbed += n
	}
	for _, id := range r.unacked {
		if r.absorbed[id] == 0 {
			missing = append(missing, id)
		}
	}
	return absorbed, len(r.unacked), missing
}

// runRelay relays the scenario's outbox to JetStream until ctx ends, calling acked with the IDs of each batch
// the broker acknowledged before the relay settles the batch. It adds the relay's totals to stats (which may be
// nil) when it returns.
func runRelay(ctx context.Context, cfg roleConfig, log *slog.Logger, acked func(ids []string), stats *roleStats) error {
	if cfg.WAL {
		return runWALRelay(ctx, cfg, log, acked)
	}
	client, closeClient, err := cfg.connect(ctx, log)
	if err != nil {
		return err
	}
	defer closeClient()
	pub, closePub, err := publisher(cfg, log)
	if err != nil {
		return err
	}
	defer closePub()
	rc := &postbox.RelayConfig{
		BatchSize: cfg.BatchSize, Workers: cfg.Workers, MaxAttempts: cfg.MaxAttempts, PollInterval: cfg.PollInterval,
		PublishTimeout: 3 * time.Second, DeadHoldsKey: cfg.DeadHoldsKey,
	}
	if backoff := cfg.Backoff; backoff > 0 {
		rc.Backoff = func(int) time.Duration { return backoff }
	}
	relay, err := postbox.NewRelay(client, ackLog{pub, acked}, rc)
	if err != nil {
		return err
	}
	defer func() { stats.addRelay(relay.Stats()) }()
	return relay.Run(ctx)
}

// ackLog reports the records the broker acknowledged, after Publish returns and before the relay settles them:
// a relay killed in between has reported a batch it will publish again, which is what duplicates_published
// counts.
type ackLog struct {
	pub   postbox.Publisher
	acked func(ids []string)
}

func (a ackLog) Publish(ctx context.Context, batch []postbox.Record) error {
	err := a.pub.Publish(ctx, batch)
	ids := make([]string, 0, len(batch))
	var be *postbox.BatchError
	switch {
	case err == nil:
		for _, r := range batch {
			ids = append(ids, r.ID)
		}
	case errors.As(err, &be) && len(be.Errs) == len(batch):
		for i, r := range batch {
			if be.Errs[i] == nil {
				ids = append(ids, r.ID)
			}
		}
	}
	if len(ids) > 0 {
		a.acked(ids)
	}
	return err
}

// consumerHooks run at the points where the consumer-kill scenario kills a consumer, and where the inbox absorbs
// a redelivery. Each gets the message's ID; each may be nil.
type consumerHooks struct {
	beforeCommit func(id string) // in the handler, after its writes
	afterCommit  func(id string) // after the inbox transaction committed, before the ack
	duplicate    func(id string) // the inbox skipped the delivery as a duplicate, before the ack
}

// runConsumer processes the scenario's stream through the inbox until ctx ends: each message writes one effect
// into the ledger in the inbox transaction. A Receive that fails (the broker went away for long) is started
// again. Each delivery's outcome is counted in stats, which may be nil.
func runConsumer(ctx context.Context, cfg roleConfig, log *slog.Logger, hooks consumerHooks, stats *roleStats) error {
	client, closeClient, err := cfg.connect(ctx, log)
	if err != nil {
		return err
	}
	defer closeClient()
	ledger, err := cfg.ledger()
	if err != nil {
		return err
	}
	consumer, err := postbox.NewConsumer(client, cfg.Consumer, &postbox.ConsumerConfig{MaxFailures: cfg.MaxFailures, Logger: log})
	if err != nil {
		return err
	}
	receive, closeReceiver, err := receiver(cfg, log)
	if err != nil {
		return err
	}
	defer closeReceiver()
	apply := func(ctx context.Context, tx pgx.Tx, m postbox.Message) ([]postbox.Message, error) {
		if m.Type == poisonType {
			return nil, errors.New("chaos: this message is poison; no handler accepts it")
		}
		if err := ledger.Effect(ctx, tx, m.ID, m.Key, cfg.Consumer); err != nil {
			return nil, err
		}
		if hooks.beforeCommit != nil {
			hooks.beforeCommit(m.ID)
		}
		return nil, nil
	}
	ccfg := &broker.ConsumeConfig{Logger: log, NackDelay: func(int) time.Duration { return 200 * time.Millisecond },
		OnOutcome: func(_ context.Context, d *broker.Delivery, res postbox.Result, err error) {
			stats.addOutcome(res.Outcome)
			switch {
			case err != nil:
			case res.Outcome == postbox.Processed && hooks.afterCommit != nil:
				hooks.afterCommit(d.Message.ID) // committed, not yet acked
			case res.Outcome == postbox.Duplicate && hooks.duplicate != nil:
				hooks.duplicate(d.Message.ID)
			}
		}}
	for ctx.Err() == nil {
		err := broker.Consume(ctx, receive, consumer, apply, ccfg)
		if err != nil && ctx.Err() == nil {
			log.Warn("receive ended; starting again", "err", err)
			wait(ctx, 200*time.Millisecond)
		}
	}
	return nil
}

// killer returns a hook that kills this process with SIGKILL at its n-th call, after passing that call's
// message ID to last (which may be nil).
func killer(n int, last func(id string)) func(id string) {
	var calls atomic.Int64
	return func(id string) {
		if calls.Add(1) == int64(n) {
			if last != nil {
				last(id)
			}
			killSelf()
		}
	}
}

// wait returns after d or when ctx ends.
func wait(ctx context.Context, d time.Duration) {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
	case <-t.C:
	}
}

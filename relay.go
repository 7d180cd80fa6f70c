package postbox

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/postbox-go/postbox/driver"
)

// Relay moves committed messages from the outbox to a Publisher. Any number of relays, in one process or many,
// may run on the same table: each claim locks its rows and skips rows locked by others.
type Relay struct {
	client  relayClient
	pub     Publisher
	cfg     RelayConfig
	log     *slog.Logger
	wake    chan struct{}
	wakes   atomic.Uint64 // Wake calls so far, which a worker compares before and after a claim
	running atomic.Bool
	stats   relayCounters
	outage  outage
	polls   pollGate
	paused  pausedSet
	// hint carries expect's signal to an idle worker; lastActive is the time of the last activity, in
	// nanoseconds since epoch, and busy the number of workers not idle (see lookDelay).
	hint       chan struct{}
	epoch      time.Time
	lastActive atomic.Int64
	busy       atomic.Int32
	pace       *groupPace // set when the relay serves a source of a RelayGroup
	// deliver is the delivery step, which keeps the health of each destination; lastPublished is when a batch
	// last published something, in nanoseconds of the client's clock (see stallWatch).
	deliver       *Deliverer
	lastPublished atomic.Int64
	stall         stallWatch
}

// relayClient is what a relay uses of its client. It has no transaction type: a relay never touches the caller's
// transactions, so Relay needs no type parameter.
type relayClient struct {
	cfg      Config
	store    claimer
	ordered  driver.OrderedClaimer // set exactly when cfg.Ordered
	peeker   driver.Peeker         // nil when the store cannot peek
	listener driver.Listener       // nil when the driver cannot listen
	pinger   driver.Pinger         // nil when the driver cannot ping
	pauser   driver.TopicPauser    // nil when the store cannot pause topics
	local    *localRelays          // the relays of the client, which its enqueues wake
	// stats counts pending and dead records per topic, for the line a relay logs when it resumes.
	stats func(ctx context.Context, now time.Time) ([]driver.TopicStats, error)
}

// claimer is the part of a driver.Store that a relay claims through.
type claimer interface {
	Claim(ctx context.Context, p driver.ClaimParams) (driver.Claim, error)
}

// RelayStats are a relay's running totals since it was made.
type RelayStats struct {
	Published int64 // messages the broker acknowledged
	Failed    int64 // failed publish attempts that will be retried
	Dead      int64 // messages parked as dead
	Batches   int64 // batches settled
	Errors    int64 // failed claims and settles, and lost listening connections (database trouble); retried
	Wakeups   int64 // notifications received from enqueuing clients (LISTEN)
	Listening bool  // whether the relay is listening for notifications now
	// Unavailable is the time the relay has spent unable to work, its database or its broker down, including
	// the outage going on now, if any.
	Unavailable time.Duration
	// Destinations is the health of each destination the relay has published to, in name order: one, named "",
	// for a publisher that is not a Destinations.
	Destinations []DestinationHealth
	// StalledSince is set while the relay is stalled (see RelayConfig.StallAfter): when it last published.
	StalledSince time.Time
	// Waiting names, while the relay is stalled, the destinations that are down or slow and their topics.
	Waiting []string
}

type relayCounters struct {
	published, failed, dead, batches, errors, wakeups atomic.Int64
	listening                                         atomic.Bool
}

// NewRelay returns a relay publishing client's outbox through pub. cfg may be nil for the defaults. The relay is
// ordered when the client is (Config.Ordered). It does no I/O; call Run.
func NewRelay[TTx any](client *Client[TTx], pub Publisher, cfg *RelayConfig) (*Relay, error) {
	if client == nil {
		return nil, fmt.Errorf("%w: NewRelay needs a client from NewClient", ErrInvalidConfig)
	}
	if pub == nil {
		return nil, fmt.Errorf("%w: NewRelay needs a Publisher", ErrInvalidConfig)
	}
	var c RelayConfig
	if cfg != nil {
		c = *cfg
	}
	if c.Workers == 0 && client.cfg.Ordered {
		// A second worker would hold heads of keys that the first must scan past: see Config.Ordered.
		c.Workers = 1
	}
	c = c.WithDefaults()
	if err := c.validate(); err != nil {
		return nil, err
	}
	rc := relayClient{cfg: client.cfg, store: client.store}
	rc.peeker, _ = client.store.(driver.Peeker)
	rc.listener, _ = client.drv.(driver.Listener)
	rc.pinger, _ = client.drv.(driver.Pinger)
	rc.pauser, _ = client.store.(driver.TopicPauser)
	rc.stats = client.store.Stats
	rc.local = client.local
	if client.cfg.Ordered {
		var ok bool
		if rc.ordered, ok = client.store.(driver.OrderedClaimer); !ok {
			return nil, fmt.Errorf("%w: Config.Ordered is set but the %s driver cannot claim in order; leave Ordered false",
				ErrInvalidConfig, client.drv.Capabilities().Dialect)
		}
	} else if c.DeadHoldsKey {
		return nil, fmt.Errorf("%w: RelayConfig.DeadHoldsKey applies to ordered relays only; set Config.Ordered on the client (and run Migrate) or leave DeadHoldsKey false",
			ErrInvalidConfig)
	}
	log := c.Logger
	if log == nil {
		log = client.cfg.Logger
	}
	r := &Relay{client: rc, pub: pub, cfg: c, log: log.With("component", "postbox.relay", "table", client.cfg.Table),
		wake: make(chan struct{}, 1), hint: make(chan struct{}, 1), epoch: time.Now()}
	r.deliver = NewDeliverer(pub, DelivererConfig{Retry: c.Retry(), Registry: client.cfg.Registry, Clock: client.cfg.Clock,
		SlowPublish: c.SlowPublish, Logger: r.log})
	r.lastActive.Store(math.MinInt64 / 2) // no activity yet: idle workers look once per PollInterval
	return r, nil
}

// Stats returns the relay's running totals.
func (r *Relay) Stats() RelayStats {
	s := RelayStats{Published: r.stats.published.Load(), Failed: r.stats.failed.Load(), Dead: r.stats.dead.Load(),
		Batches: r.stats.batches.Load(), Errors: r.stats.errors.Load(), Wakeups: r.stats.wakeups.Load(),
		Listening: r.stats.listening.Load(), Unavailable: r.outage.total(r.client.cfg.Clock.Now()),
		Destinations: r.deliver.Health()}
	s.StalledSince, s.Waiting = r.stalled()
	return s
}

// Wake makes an idle worker claim at once instead of waiting for the poll interval. The client the relay was made
// from wakes it by itself: after InTx commits a transaction that enqueued, and (sooner looks) whenever it enqueues.
// Call Wake after committing a transaction that enqueued through another client of the same tables, when the
// relay runs in the same process. It never blocks.
func (r *Relay) Wake() {
	r.wakes.Add(1)
	select {
	case r.wake <- struct{}{}:
	default:
	}
}

// Run relays until ctx is cancelled, then lets every in-flight batch finish publishing and settle (a batch a
// worker claimed with its last settle is one: it is published, not handed back), and returns nil.
// Database and broker errors are logged and retried, never returned. Run returns an error only if the relay is
// already running.
func (r *Relay) Run(ctx context.Context) error {
	if !r.running.CompareAndSwap(false, true) {
		return errors.New("postbox: relay is already running; make one relay per Run")
	}
	defer r.running.Store(false)
	r.client.local.add(r)
	defer r.client.local.remove(r)
	var wg sync.WaitGroup
	for range r.cfg.Workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			r.work(ctx)
		}()
	}
	wg.Add(2)
	go func() {
		defer wg.Done()
		r.lane(ctx)
	}()
	go func() {
		defer wg.Done()
		r.heartbeat(ctx)
	}()
	if r.client.listener != nil && !r.cfg.DisableListen {
		wg.Add(1)
		go func() {
			defer wg.Done()
			r.listen(ctx, r.client.listener)
		}()
	}
	wg.Wait()
	return nil
}

func (r *Relay) work(ctx context.Context) {
	retry := r.cfg.Retry().errorBackoff()
	limit := r.cfg.BatchSize
	woke := false // whether the last wait ended with a wake-up
	r.busy.Add(1)
	defer r.busy.Add(-1)
	// next is a claim taken with the last settle, to publish before claiming again. One left when the relay stops
	// is an in-flight batch like the one before it: it is published and settled before Run returns, as rolling it
	// back would throw away the claim's writes for the next relay to do again.
	var next driver.Claim
	var look recheck
	defer func() {
		look.stop()
		if next == nil {
			return
		}
		// ctx is done, so runOnce takes no claim ahead of this one.
		if _, err := r.runOnce(ctx, limit, &next, nil, false); err != nil && !isBrokerDown(err) {
			r.log.WarnContext(ctx, "the batch claimed last did not settle; its messages are pending again", "err", err)
		}
	}()
	for ctx.Err() == nil {
		if r.deliver.AllDown() {
			// Every destination is down: the lane probes them, and wakes the workers when one is back. Claims
			// now would only walk past the messages that wait.
			woke = r.wait(ctx, r.cfg.PollInterval)
			continue
		}
		wakes, published := r.wakes.Load(), r.stats.published.Load()
		n, err := r.runOnce(ctx, limit, &next, &look, false)
		switch {
		case err != nil && ctx.Err() != nil:
			return // stopping: a claim cut short by cancellation is not a failure
		case err != nil:
			woke = r.pause(ctx, err, &retry)
			continue
		}
		working := r.resumed(ctx, n, r.stats.published.Load() > published)
		switch {
		case n == limit:
			r.active()
			if r.cfg.Workers > 1 {
				r.Wake() // a backlog: bring in an idle worker too, while this one claims again at once
			}
		case n == 0 && r.wakes.Load() != wakes:
			// A wake-up came while this claim ran, and may have been taken by another worker whose claim then
			// skipped the new message: this claim held it locked for a moment (SKIP LOCKED) though it read the
			// clock before the message was due. Claim again, so that the wake-up is not lost.
			woke = true
		case n > 0 || woke:
			// Messages are flowing, or a client just woke us: transactions that committed a moment later carry
			// no wake-up of their own, so look again shortly: RecheckDelay after the claim returned, by this
			// worker if it is done by then, else by an idle one (see recheck).
			r.active()
			if d, mine := look.take(r.cfg.RecheckDelay); mine {
				woke = r.wait(ctx, d)
				break
			}
			r.busy.Add(-1)
			woke = r.idle(ctx) // takes the look's wake-up at once unless another worker did
			r.busy.Add(1)
		default:
			r.busy.Add(-1)
			woke = r.idle(ctx)
			r.busy.Add(1)
		}
		if working {
			retry.Reset()
		}
	}
}

// wait returns after d, on a wake-up, or when ctx is done, and reports whether a wake-up ended it.
func (r *Relay) wait(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
	case <-t.C:
	case <-r.wake:
		return true
	}
	return false
}

// RunOnce claims one batch, publishes it and settles it, and returns the number of records it claimed. Once a
// batch is claimed it is published and settled even if ctx is cancelled meanwhile (bounded by PublishTimeout and SettleTimeout), so
// shutting down never strands a batch. Run calls it in a loop; tests and tools may call it directly.
func (r *Relay) RunOnce(ctx context.Context) (int, error) {
	n, err := r.runOnce(ctx, r.cfg.BatchSize, nil, nil, true)
	if isBrokerDown(err) {
		return n, nil // settled: the messages are pending again
	}
	return n, err
}

// runOnce is RunOnce claiming at most limit records. When every destination is down and the batch was held
// whole, it settles the batch without counting an attempt and returns a brokerDownError.
//
// An ordinary claim (lane false) skips the topics of destinations that are down or slow, which the relay's lane
// claims (see lane). With chain, runOnce publishes the claim *chain holds, if any, instead of claiming; and when
// the batch was full and published, and the store can (driver.ChainClaimer), it settles and claims the next batch
// in one round trip and leaves that claim in *chain.
func (r *Relay) runOnce(ctx context.Context, limit int, chain *driver.Claim, look *recheck, lane bool) (int, error) {
	clock := r.client.cfg.Clock
	params := func() driver.ClaimParams {
		skip := r.skipTopics(ctx)
		if avoid := r.deliver.Avoid(); !lane && len(avoid) > 0 {
			skip = append(slices.Clip(skip), avoid...)
		}
		return driver.ClaimParams{Limit: limit, Now: clock.Now(), DeletePublished: !r.cfg.KeepPublished, SkipTopics: skip}
	}
	var claim driver.Claim
	if chain != nil && *chain != nil {
		claim, *chain = *chain, nil
	} else {
		var err error
		if claim, err = r.claim(ctx, params()); err != nil {
			return 0, fmt.Errorf("claim: %w", err)
		}
	}
	recs := fromRows(claim.Records())
	if len(recs) == 0 {
		return 0, nil
	}
	if look != nil && len(recs) < limit && r.cfg.Workers > 1 {
		look.arm(r)
	}
	started := clock.Now()
	// From here on the batch must settle: detach from ctx so cancellation means "finish this batch".
	detached := context.WithoutCancel(ctx)
	pctx, cancel := context.WithTimeout(detached, r.cfg.PublishTimeout)
	verdicts := r.deliver.Deliver(pctx, recs)
	cancel()

	st := driver.Settlement{Keep: r.cfg.KeepPublished, Now: clock.Now().UTC(), Published: make([]string, 0, len(recs))}
	var dead, held int64
	errs, deadFlags := make([]error, len(recs)), make([]bool, len(recs))
	for i, v := range verdicts {
		rec := recs[i]
		errs[i] = v.Err
		switch v.Kind {
		case VerdictPublished:
			st.Published = append(st.Published, rec.ID)
			continue
		case VerdictHeld:
			held++
		case VerdictDead:
			dead++
			deadFlags[i] = true
			r.log.WarnContext(ctx, "message parked as dead", "id", rec.ID, "topic", rec.Topic, "attempts", v.Attempts, "err", v.Err)
		}
		st.Failed = append(st.Failed, driver.Failure{ID: rec.ID, Attempts: v.Attempts, LastError: v.LastError,
			AvailableAt: v.RetryAt.UTC(), Dead: v.Kind == VerdictDead})
	}
	var down *brokerDownError
	if held == int64(len(recs)) && r.deliver.AllDown() {
		down = &brokerDownError{errs[0]}
	}
	sctx, cancel := context.WithTimeout(detached, r.cfg.SettleTimeout)
	defer cancel()
	var err error
	if chainer, ok := claim.(driver.ChainClaimer); ok && chain != nil && len(recs) == limit && held == 0 && ctx.Err() == nil {
		var next driver.Claim
		var claimErr error
		next, err, claimErr = chainer.SettleAndClaim(sctx, st, params())
		if claimErr != nil {
			// The batch is settled; the worker claims again on its own, and meets the trouble there if it lasts.
			r.log.DebugContext(ctx, "claim with settle failed", "err", claimErr)
		} else if next != nil && len(next.Records()) > 0 {
			*chain = next
		}
	} else {
		err = claim.Settle(sctx, st)
	}
	if r.cfg.Observer != nil {
		r.cfg.Observer.ObserveBatch(ctx, BatchReport{Records: recs, Errs: errs, Dead: deadFlags, Started: started,
			SettledAt: clock.Now(), Err: err})
	}
	if err != nil {
		// The claim's transaction is gone, so the records are pending again and will be republished: the only
		// duplicates the relay makes.
		return len(recs), fmt.Errorf("settle %d records: %w", len(recs), err)
	}
	r.stats.batches.Add(1)
	r.stats.published.Add(int64(len(st.Published)))
	r.stats.failed.Add(int64(len(st.Failed)) - dead - held)
	r.stats.dead.Add(dead)
	if len(st.Published) > 0 {
		r.lastPublished.Store(clock.Now().UnixNano())
	}
	if down != nil {
		return len(recs), down // logged once for the outage, not per batch
	}
	if failed := int64(len(st.Failed)) - held; failed > 0 {
		r.log.WarnContext(ctx, "publish failed", "failed", failed, "dead", dead, "published", len(st.Published),
			"first_err", firstFailure(verdicts))
	}
	return len(recs), nil
}

// firstFailure returns the text of the first verdict that counted an attempt.
func firstFailure(vs []Verdict) string {
	for _, v := range vs {
		if v.Kind == VerdictRetry || v.Kind == VerdictDead {
			return v.LastError
		}
	}
	return ""
}

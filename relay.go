package postbox

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/postbox-go/postbox/driver"
	"github.com/postbox-go/postbox/internal/backoff"
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
	r.lastActive.Store(math.MinInt64 / 2) // no activity yet: idle workers look once per PollInterval
	return r, nil
}

// Stats returns the relay's running totals.
func (r *Relay) Stats() RelayStats {
	return RelayStats{Published: r.stats.published.Load(), Failed: r.stats.failed.Load(), Dead: r.stats.dead.Load(),
		Batches: r.stats.batches.Load(), Errors: r.stats.errors.Load(), Wakeups: r.stats.wakeups.Load(),
		Listening: r.stats.listening.Load(), Unavailable: r.outage.total(r.client.cfg.Clock.Now())}
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
	retry := backoff.Backoff{Base: r.cfg.ErrorBackoffBase, Max: r.cfg.ErrorBackoffMax}
	limit := r.cfg.BatchSize // 1 while the broker is down: one message probes it
	woke := false            // whether the last wait ended with a wake-up
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
		if _, err := r.runOnce(ctx, limit, &next, nil); err != nil && !isBrokerDown(err) {
			r.log.WarnContext(ctx, "the batch claimed last did not settle; its messages are pending again", "err", err)
		}
	}()
	for ctx.Err() == nil {
		wakes := r.wakes.Load()
		n, err := r.runOnce(ctx, limit, &next, &look)
		switch {
		case err != nil && ctx.Err() != nil:
			return // stopping: a claim cut short by cancellation is not a failure
		case err != nil:
			woke, limit = r.pause(ctx, err, &retry), r.cfg.BatchSize
			if isBrokerDown(err) {
				limit = 1
			}
			continue
		}
		working := r.resumed(ctx, n)
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
			limit = r.cfg.BatchSize
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
	n, err := r.runOnce(ctx, r.cfg.BatchSize, nil, nil)
	if isBrokerDown(err) {
		return n, nil // settled: the messages are pending again
	}
	return n, err
}

// runOnce is RunOnce claiming at most limit records. When the broker refused the whole batch as unavailable, it
// settles the batch without counting an attempt and returns a brokerDownError.
//
// With chain, runOnce publishes the claim *chain holds, if any, instead of claiming; and when the batch was full
// and published, and the store can (driver.ChainClaimer), it settles and claims the next batch in one round trip
// and leaves that claim in *chain.
func (r *Relay) runOnce(ctx context.Context, limit int, chain *driver.Claim, look *recheck) (int, error) {
	clock := r.client.cfg.Clock
	params := func() driver.ClaimParams {
		return driver.ClaimParams{Limit: limit, Now: clock.Now(), DeletePublished: !r.cfg.KeepPublished,
			SkipTopics: r.skipTopics(ctx)}
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
	errs := r.publishChecked(pctx, recs)
	cancel()

	st := driver.Settlement{Keep: r.cfg.KeepPublished, Now: clock.Now().UTC(), Published: make([]string, 0, len(recs))}
	down := brokerDown(errs)
	var dead int64
	deadFlags := make([]bool, len(recs))
	for i, rec := range recs {
		if errs[i] == nil {
			st.Published = append(st.Published, rec.ID)
			continue
		}
		f := driver.Failure{ID: rec.ID, Attempts: rec.Attempts + 1, LastError: truncate(errs[i].Error(), MaxLastErrorLen)}
		if down != nil {
			// The broker took nothing: the failure is the broker's, not the message's. The message keeps its
			// attempts and is available again within ErrorBackoffBase; the worker waits and probes the broker
			// (see pause).
			f.Attempts, f.AvailableAt = rec.Attempts, st.Now.Add(backoff.Jitter(r.cfg.ErrorBackoffBase))
			st.Failed = append(st.Failed, f)
			continue
		}
		f.Dead = IsPermanent(errs[i]) || f.Attempts >= r.cfg.MaxAttempts
		f.AvailableAt = st.Now.Add(r.cfg.backoff(f.Attempts))
		if f.Dead {
			dead++
			deadFlags[i] = true
			r.log.WarnContext(ctx, "message parked as dead", "id", rec.ID, "topic", rec.Topic, "attempts", f.Attempts, "err", errs[i])
		}
		st.Failed = append(st.Failed, f)
	}
	sctx, cancel := context.WithTimeout(detached, r.cfg.SettleTimeout)
	defer cancel()
	var err error
	if chainer, ok := claim.(driver.ChainClaimer); ok && chain != nil && len(recs) == limit && down == nil && ctx.Err() == nil {
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
	r.stats.failed.Add(int64(len(st.Failed)) - dead)
	r.stats.dead.Add(dead)
	if down != nil {
		return len(recs), down // logged once for the outage, not per batch
	}
	if len(st.Failed) > 0 {
		r.log.WarnContext(ctx, "publish failed", "failed", len(st.Failed), "dead", dead, "published", len(st.Published),
			"first_err", st.Failed[0].LastError)
	}
	return len(recs), nil
}

// publishChecked publishes the records that meet the client's registry, if it has one, and fails the others
// permanently, so that a message no consumer could accept is parked as dead instead of published.
func (r *Relay) publishChecked(ctx context.Context, recs []Record) []error {
	reg := r.client.cfg.Registry
	if reg == nil {
		return r.publish(ctx, recs)
	}
	errs := make([]error, len(recs))
	valid := make([]Record, 0, len(recs))
	idx := make([]int, 0, len(recs))
	for i, rec := range recs {
		if err := reg.Check(rec.Message); err != nil {
			errs[i] = Permanent(fmt.Errorf("refused by the event registry, not published: %w", err))
			continue
		}
		valid = append(valid, rec)
		idx = append(idx, i)
	}
	if len(valid) > 0 {
		for j, err := range r.publish(ctx, valid) {
			errs[idx[j]] = err
		}
	}
	return errs
}

// publish calls the publisher and returns one error per record.
func (r *Relay) publish(ctx context.Context, recs []Record) (errs []error) {
	errs = make([]error, len(recs))
	defer func() {
		if p := recover(); p != nil {
			err := fmt.Errorf("postbox: publisher panicked: %v", p)
			for i := range errs {
				errs[i] = err
			}
		}
	}()
	err := r.pub.Publish(ctx, recs)
	if err == nil {
		return errs
	}
	var be *BatchError
	if errors.As(err, &be) && len(be.Errs) == len(recs) {
		copy(errs, be.Errs)
		return errs
	}
	for i := range errs {
		errs[i] = err
	}
	return errs
}

// truncate makes s fit a text column: valid UTF-8 without NUL (PostgreSQL rejects both, and a settle that fails on
// an error's text would republish its batch for ever), at most n bytes.
func truncate(s string, n int) string {
	s = strings.ToValidUTF8(strings.ReplaceAll(s, "\x00", ""), "\uFFFD")
	if len(s) <= n {
		return s
	}
	return strings.ToValidUTF8(s[:n], "") // never cut a character in half
}

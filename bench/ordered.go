package bench

import (
	"context"
	"runtime/debug"
	"sync"

	"github.com/postbox-go/postbox"
)

// benchOrdered drains the same backlog, spread over o.Keys keys, with an unordered relay (the baseline) and with
// an ordered one, which publishes each key's messages one at a time in enqueue order. It counts any message
// published before an earlier one of its key, which must be none.
func benchOrdered[TTx any](ctx context.Context, t *target[TTx], o Options) (Result, error) {
	const table, unorderedTable = "bench_ordered", "bench_unordered"
	var closers []func()
	c, err := t.open(ctx, 4)
	if err != nil {
		return Result{}, err
	}
	defer c.close()
	// Both tables have the ordered index (Config.Ordered), so that only the claim differs: the baseline's client
	// leaves Ordered off after migrating, so its relay claims unordered.
	cfg := o.clientConfig()
	cfg.Ordered = true
	client, err := loadBacklog(ctx, t, c, o, cfg, table, unorderedTable)
	if err != nil {
		return Result{}, err
	}
	defer dropOutbox(context.WithoutCancel(ctx), t, c, table)
	defer dropOutbox(context.WithoutCancel(ctx), t, c, unorderedTable)
	unordered, err := sameClient(c, client, func(cfg *postbox.Config) {
		cfg.Table, cfg.InboxTable = unorderedTable, unorderedTable+"_inbox"
		cfg.Ordered = false
	})
	if err != nil {
		return Result{}, err
	}

	newRelayOn := func(client *postbox.Client[TTx], pub postbox.Publisher) (*postbox.Relay, error) {
		relay, rc, err := openRelay(ctx, t, client, pub, o)
		if err != nil {
			return nil, err
		}
		closers = append(closers, rc.close)
		return relay, nil
	}
	defer func() {
		for _, c := range closers {
			c()
		}
	}()
	base, err := newRelayOn(unordered, noopPublisher)
	if err != nil {
		return Result{}, err
	}
	check := &keyOrder{last: map[string]string{}}
	inOrder, err := newRelayOn(client, check)
	if err != nil {
		return Result{}, err
	}
	o.Logger.Info("draining in order and unordered, in turns", "events", o.Events, "keys", o.Keys)
	debug.FreeOSMemory()
	total := int64(o.Events)
	rates, err := interleave(o.Turns, total,
		timed(func(share int64, last bool) (int64, error) { return relayShare(ctx, inOrder, share, total, last) }),
		timed(func(share int64, last bool) (int64, error) { return relayShare(ctx, base, share, total, last) }))
	if err != nil {
		return Result{}, err
	}
	res := newResult(rates[0], rates[1])
	res.Extra["keys"] = float64(o.Keys)
	res.Extra["order_violations"] = float64(check.violations)
	res.Extra["workers"] = float64(o.workers(true))
	res.Extra["unordered_workers"] = float64(o.workers(false))
	return res, nil
}

// keyOrder is a publisher that counts messages published before an earlier message of their key.
type keyOrder struct {
	mu         sync.Mutex
	last       map[string]string
	violations int
}

func (k *keyOrder) Publish(_ context.Context, batch []postbox.Record) error {
	k.mu.Lock()
	defer k.mu.Unlock()
	for _, r := range batch {
		if last, ok := k.last[r.Key]; ok && r.ID < last {
			k.violations++
		}
		k.last[r.Key] = r.ID
	}
	return nil
}

package bench

import (
	"context"
	"strconv"

	"github.com/postbox-go/postbox"
	"github.com/postbox-go/postbox/driver"
)

// benchNotify measures what waking relays costs producers: NotifyClients concurrent transactions, each writing a
// domain row and enqueuing one event, with no notification (the baseline), with Postbox's coalesced notification,
// and with one NOTIFY in every transaction. A relay listens throughout, as it would in production.
func benchNotify[TTx any](ctx context.Context, t *target[TTx], o Options) (Result, error) {
	if t.dialect != "postgres" {
		return Result{Skipped: "notifications are a PostgreSQL feature"}, nil
	}
	const table = "bench_notify"
	c, coalesced, closeDomain, err := openDomain(ctx, t, o, o.NotifyClients+2, table)
	if err != nil {
		return Result{}, err
	}
	defer closeDomain()
	quiet, err := sameClient(c, coalesced, func(cfg *postbox.Config) { cfg.DisableNotify = true })
	if err != nil {
		return Result{}, err
	}
	if err := settle(ctx, t, c, table); err != nil {
		return Result{}, err
	}
	channel := driver.Names{Outbox: table, Inbox: table + "_inbox"}.Channel()

	relay, err := startRelay(ctx, t, coalesced, noopPublisher, o)
	if err != nil {
		return Result{}, err
	}
	defer relay.close()

	domain := insertDomain(t)
	producer := func(client *postbox.Client[TTx], notifyEach bool) func(ctx context.Context, i int64) error {
		return func(ctx context.Context, i int64) error {
			return client.InTx(ctx, func(ctx context.Context, tx TTx) error {
				if err := c.txExec(ctx, tx, domain, "customer-"+strconv.FormatInt(i, 10), i); err != nil {
					return err
				}
				if _, err := client.Enqueue(ctx, tx, o.message(int(i))); err != nil {
					return err
				}
				if notifyEach {
					return c.txExec(ctx, tx, "SELECT pg_notify($1, '')", channel)
				}
				return nil
			})
		}
	}
	o.Logger.Info("producing with and without notifications", "clients", o.NotifyClients)
	rates, err := compare(ctx, o.NotifyClients, o.Duration,
		producer(coalesced, false), producer(quiet, false), producer(quiet, true))
	if err != nil {
		return Result{}, err
	}
	if err := relay.stop(); err != nil {
		return Result{}, err
	}
	res := newResult(rates[0], rates[1])
	res.Extra["notify_each_tx_per_s"] = rates[2]
	res.Extra["notify_each_tx_ratio"] = rates[2] / rates[1]
	res.Extra["relay_wakeups"] = float64(relay.Stats().Wakeups)
	res.Extra["clients"] = float64(o.NotifyClients)
	return res, nil
}

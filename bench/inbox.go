package bench

import (
	"context"

	"github.com/postbox-go/postbox"
)

// benchInbox measures the consumer's side: Process (begin, inbox claim, handler, commit) against the same handler
// in a plain transaction, both writing one domain row per message.
func benchInbox[TTx any](ctx context.Context, t *target[TTx], o Options) (Result, error) {
	const table = "bench_inbox"
	c, client, closeDomain, err := openDomain(ctx, t, o, o.Clients+2, table)
	if err != nil {
		return Result{}, err
	}
	defer closeDomain()
	consumer, err := postbox.NewConsumer(client, "bench", nil)
	if err != nil {
		return Result{}, err
	}
	if err := settle(ctx, t, c); err != nil {
		return Result{}, err
	}

	domain := insertDomain(t)
	handler := func(ctx context.Context, tx TTx, m postbox.Message) ([]postbox.Message, error) {
		return nil, c.txExec(ctx, tx, domain, "customer-"+m.Key, len(m.Payload))
	}
	delivery := func(i int64) postbox.Message {
		m := o.message(int(i))
		m.ID = postbox.NewID()
		return m
	}
	with := func(ctx context.Context, i int64) error {
		_, err := consumer.Process(ctx, delivery(i), handler)
		return err
	}
	without := func(ctx context.Context, i int64) error {
		m := delivery(i)
		return client.InTx(ctx, func(ctx context.Context, tx TTx) error {
			_, err := handler(ctx, tx, m)
			return err
		})
	}
	o.Logger.Info("processing deliveries", "clients", o.Clients)
	rates, err := compare(ctx, o.Clients, o.Duration, with, without)
	if err != nil {
		return Result{}, err
	}
	res := newResult(rates[0], rates[1])
	res.Extra["clients"] = float64(o.Clients)
	return res, nil
}

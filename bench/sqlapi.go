package bench

import (
	"context"
	"strconv"
	"strings"

	"github.com/postbox-go/postbox"
	"github.com/postbox-go/postbox/driver"
)

// benchSQLAPI measures the SQL enqueue API (Config.SQLAPI, docs/SCHEMA.md) that producers in other languages call,
// PostgreSQL only. Single: a business transaction with one call of <table>_enqueue against the same transaction
// with a bare INSERT of the same row (the ratio). Batch: <table>_enqueue_batch of 100 against a multi-row INSERT of
// the same rows (batch_ratio). Wake-up: NotifyClients producers calling <table>_enqueue, whose pg_notify is
// coalesced across sessions, against the bare INSERT with no wake-up and with a NOTIFY in every transaction, the
// notify scenario's shape, and against the API's own helpers without the wake-up (wake_vs_unwoken_ratio), with a
// relay listening throughout.
func benchSQLAPI[TTx any](ctx context.Context, t *target[TTx], o Options) (Result, error) {
	if t.dialect != "postgres" {
		return Result{Skipped: "the scenario measures the PostgreSQL SQL API and its wake-up"}, nil
	}
	const table, rawTable = "bench_sqlapi", "bench_sqlapi_raw"
	c, client, closeDomain, err := openDomain(ctx, t, o, max(o.Clients, o.NotifyClients)+2, table)
	if err != nil {
		return Result{}, err
	}
	defer closeDomain()
	apiCfg := client.Config()
	apiCfg.SQLAPI = true
	api, err := postbox.NewClient(c.drv, &apiCfg)
	if err != nil {
		return Result{}, err
	}
	if _, err := api.Migrate(ctx); err != nil {
		return Result{}, err
	}
	if _, err := newOutbox(ctx, t, c, rawTable, o.clientConfig()); err != nil {
		return Result{}, err
	}
	defer dropOutbox(context.WithoutCancel(ctx), t, c, rawTable)
	if err := settle(ctx, t, c, table, rawTable); err != nil {
		return Result{}, err
	}

	domain := insertDomain(t)
	business := func(ctx context.Context, tx TTx, i int64) error {
		return c.txExec(ctx, tx, domain, "customer-"+strconv.FormatInt(i, 10), i)
	}
	enqueue := "SELECT " + table + "_enqueue($1, $2, $3::bytea, $4)"
	viaAPI := func(ctx context.Context, i int64) error {
		m := o.message(int(i))
		return client.InTx(ctx, func(ctx context.Context, tx TTx) error {
			if err := business(ctx, tx, i); err != nil {
				return err
			}
			return c.txExec(ctx, tx, enqueue, m.Topic, m.Type, m.Payload, m.Key)
		})
	}
	bare := t.insertRow(rawTable)
	channel := driver.Names{Outbox: rawTable, Inbox: rawTable + "_inbox"}.Channel()
	insert := func(notify bool) func(ctx context.Context, i int64) error {
		return func(ctx context.Context, i int64) error {
			row := rawRows(t, []postbox.Message{o.message(int(i))})[0]
			return client.InTx(ctx, func(ctx context.Context, tx TTx) error {
				if err := business(ctx, tx, i); err != nil {
					return err
				}
				if err := c.txExec(ctx, tx, bare, row...); err != nil {
					return err
				}
				if notify {
					return c.txExec(ctx, tx, "SELECT pg_notify($1, '')", channel)
				}
				return nil
			})
		}
	}
	o.Logger.Info("SQL API single enqueue", "clients", o.Clients)
	rates, err := compare(ctx, o.Clients, o.Duration, viaAPI, insert(false))
	if err != nil {
		return Result{}, err
	}
	res := newResult(rates[0], rates[1])

	batchQ := "SELECT count(*) FROM " + table + "_enqueue_batch($1::text[], $2::text[], $3::bytea[], $4::text[])"
	batch := func(ctx context.Context, i int64) error {
		msgs := o.messages(int(i)*enqueueBatch, enqueueBatch)
		topics, types, payloads, keys := make([]string, len(msgs)), make([]string, len(msgs)), make([][]byte, len(msgs)), make([]string, len(msgs))
		for k, m := range msgs {
			topics[k], types[k], payloads[k], keys[k] = m.Topic, m.Type, m.Payload, m.Key
		}
		return client.InTx(ctx, func(ctx context.Context, tx TTx) error {
			return c.txExec(ctx, tx, batchQ, topics, types, payloads, keys)
		})
	}
	multiRow := func(ctx context.Context, i int64) error {
		q, args := multiRowInsert(t, rawTable, rawRows(t, o.messages(int(i)*enqueueBatch, enqueueBatch)))
		return client.InTx(ctx, func(ctx context.Context, tx TTx) error { return c.txExec(ctx, tx, q, args...) })
	}
	o.Logger.Info("SQL API batch enqueue", "clients", o.Clients)
	if rates, err = compare(ctx, o.Clients, o.Duration, batch, multiRow); err != nil {
		return Result{}, err
	}
	res.Extra["batch_events_per_s"] = rates[0] * enqueueBatch
	res.Extra["batch_baseline_per_s"] = rates[1] * enqueueBatch
	res.Extra["batch_ratio"] = rates[0] / rates[1]

	// The SQL API without its wake-up: its own helpers and INSERT in one statement, so that wake_vs_unwoken_ratio
	// isolates what the coalesced wake-up costs.
	unwokenQ := "INSERT INTO " + table + " (id, topic, key, type, payload, headers, available_at, created_at)" +
		" SELECT " + table + "_new_id(), $1, $4, $2, $3::bytea, " + table + "_check($1, $2, $3::bytea, $4, NULL, ''), clock_timestamp(), clock_timestamp()"
	unwoken := func(ctx context.Context, i int64) error {
		m := o.message(int(i))
		return client.InTx(ctx, func(ctx context.Context, tx TTx) error {
			if err := business(ctx, tx, i); err != nil {
				return err
			}
			return c.txExec(ctx, tx, unwokenQ, m.Topic, m.Type, m.Payload, m.Key)
		})
	}
	relay, err := startRelay(ctx, t, api, noopPublisher, o)
	if err != nil {
		return Result{}, err
	}
	defer relay.close()
	o.Logger.Info("SQL API wake-up", "clients", o.NotifyClients)
	if rates, err = compare(ctx, o.NotifyClients, o.Duration, viaAPI, insert(false), insert(true), unwoken); err != nil {
		return Result{}, err
	}
	if err := relay.stop(); err != nil {
		return Result{}, err
	}
	res.Extra["wake_per_s"] = rates[0]
	res.Extra["wake_baseline_per_s"] = rates[1]
	res.Extra["wake_ratio"] = rates[0] / rates[1]
	res.Extra["notify_each_tx_ratio"] = rates[2] / rates[1]
	res.Extra["unwoken_per_s"] = rates[3]
	res.Extra["wake_vs_unwoken_ratio"] = rates[0] / rates[3]
	res.Extra["relay_wakeups"] = float64(relay.Stats().Wakeups)
	res.Extra["clients"] = float64(o.Clients)
	res.Extra["wake_clients"] = float64(o.NotifyClients)
	return res, nil
}

// multiRowInsert is one INSERT of rows into table with a VALUES row each: the documented batch of a plain writer.
func multiRowInsert[TTx any](t *target[TTx], table string, rows [][]any) (string, []any) {
	var b strings.Builder
	b.WriteString("INSERT INTO " + table + " (" + t.cols(outboxCols) + ") VALUES ")
	args := make([]any, 0, len(rows)*len(outboxCols))
	for i, r := range rows {
		if i > 0 {
			b.WriteString(", ")
		}
		b.WriteByte('(')
		for j := range r {
			if j > 0 {
				b.WriteString(", ")
			}
			b.WriteString(t.ph(len(args) + 1))
			args = append(args, r[j])
		}
		b.WriteByte(')')
	}
	return b.String(), args
}

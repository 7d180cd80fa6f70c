package bench

import (
	"context"
	"errors"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/postbox-go/postbox"
)

const enqueueBatch = 100

// benchEnqueue measures the producer's side: a business transaction with and without one Enqueue (and with one
// Enqueue into a table with the ordered index, Config.Ordered), and a batch of 100 events per transaction through
// EnqueueBatch against COPY (multi-row INSERT where there is no COPY) of the same rows into a table of the same
// shape. The single Enqueue is also measured against its own bound: the business transaction with a bare INSERT of
// the same row instead (insert_ratio).
func benchEnqueue[TTx any](ctx context.Context, t *target[TTx], o Options) (Result, error) {
	const table, rawTable, orderedTable = "bench_enqueue", "bench_enqueue_raw", "bench_enqueue_ordered"
	c, client, closeDomain, err := openDomain(ctx, t, o, o.Clients+2, table)
	if err != nil {
		return Result{}, err
	}
	defer closeDomain()
	if _, err := newOutbox(ctx, t, c, rawTable, o.clientConfig()); err != nil {
		return Result{}, err
	}
	defer dropOutbox(context.WithoutCancel(ctx), t, c, rawTable)
	orderedCfg := o.clientConfig()
	orderedCfg.Ordered = true
	orderedClient, err := newOutbox(ctx, t, c, orderedTable, orderedCfg)
	if err != nil {
		return Result{}, err
	}
	defer dropOutbox(context.WithoutCancel(ctx), t, c, orderedTable)
	if err := settle(ctx, t, c); err != nil {
		return Result{}, err
	}

	domain := insertDomain(t)
	business := func(ctx context.Context, tx TTx, i int64) error {
		return c.txExec(ctx, tx, domain, "customer-"+strconv.FormatInt(i, 10), i)
	}
	without := func(ctx context.Context, i int64) error {
		return client.InTx(ctx, func(ctx context.Context, tx TTx) error { return business(ctx, tx, i) })
	}
	with := func(client *postbox.Client[TTx]) func(ctx context.Context, i int64) error {
		return func(ctx context.Context, i int64) error {
			return client.InTx(ctx, func(ctx context.Context, tx TTx) error {
				if err := business(ctx, tx, i); err != nil {
					return err
				}
				_, err := client.Enqueue(ctx, tx, o.message(int(i)))
				return err
			})
		}
	}
	// Enqueue's own bound: the same transaction with a bare INSERT of the row Enqueue writes.
	bare := t.insertRow(rawTable)
	insert := func(ctx context.Context, i int64) error {
		row := rawRows(t, []postbox.Message{o.message(int(i))})[0]
		return client.InTx(ctx, func(ctx context.Context, tx TTx) error {
			if err := business(ctx, tx, i); err != nil {
				return err
			}
			return c.txExec(ctx, tx, bare, row...)
		})
	}
	o.Logger.Info("single enqueue", "clients", o.Clients)
	rates, err := compare(ctx, o.Clients, o.Duration, with(client), without, with(orderedClient), insert)
	if err != nil {
		return Result{}, err
	}
	res := newResult(rates[0], rates[1])
	res.Extra["ordered_index_ratio"] = rates[2] / rates[1]
	res.Extra["insert_baseline_per_s"] = rates[3]
	res.Extra["insert_ratio"] = rates[0] / rates[3]

	batch := func(ctx context.Context, i int64) error {
		msgs := o.messages(int(i)*enqueueBatch, enqueueBatch)
		return client.InTx(ctx, func(ctx context.Context, tx TTx) error { return client.EnqueueBatch(ctx, tx, msgs) })
	}
	raw := func(ctx context.Context, i int64) error {
		rows := rawRows(t, o.messages(int(i)*enqueueBatch, enqueueBatch))
		return client.InTx(ctx, func(ctx context.Context, tx TTx) error { return rawInsert(ctx, t, c, tx, rawTable, rows) })
	}
	o.Logger.Info("batch enqueue", "clients", o.Clients)
	if rates, err = compare(ctx, o.Clients, o.Duration, batch, raw); err != nil {
		return Result{}, err
	}
	res.Extra["batch_events_per_s"] = rates[0] * enqueueBatch
	res.Extra["batch_baseline_per_s"] = rates[1] * enqueueBatch
	res.Extra["batch_ratio"] = rates[0] / rates[1]
	res.Extra["clients"] = float64(o.Clients)
	return res, nil
}

// rawRows returns the rows Enqueue would write for msgs, in outboxCols order.
func rawRows[TTx any](t *target[TTx], msgs []postbox.Message) [][]any {
	rows := make([][]any, len(msgs))
	for i, m := range msgs {
		now := t.now()
		var id any = postbox.NewID()
		if t.dialect == "mysql" {
			id = mysqlID(id.(string))
		}
		rows[i] = []any{id, m.Topic, m.Key, m.Type, m.Payload, nil, now, now}
	}
	return rows
}

// insertRow is a bare INSERT of one row of rawRows into table.
func (t *target[TTx]) insertRow(table string) string {
	return "INSERT INTO " + table + " (" + t.cols(outboxCols) + ") VALUES (" + t.phList(len(outboxCols)) + ")"
}

// rawInsert writes rows into table with COPY, or one multi-row INSERT where the client has no COPY.
func rawInsert[TTx any](ctx context.Context, t *target[TTx], c *conns[TTx], tx TTx, table string, rows [][]any) error {
	if c.txCopy != nil {
		return c.txCopy(ctx, tx, table, outboxCols, rows)
	}
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
	return c.txExec(ctx, tx, b.String(), args...)
}

// turnsEach is how many turns compare gives each contestant.
const turnsEach = 6

// compare runs each function in turn, for d in all split into turnsEach turns, from clients goroutines, and returns each
// one's calls per second. Taking short turns spreads the shared machine's changing load over every contestant.
func compare(ctx context.Context, clients int, d time.Duration, fns ...func(ctx context.Context, i int64) error) ([]float64, error) {
	counts := make([]int64, len(fns))
	spent := make([]time.Duration, len(fns))
	var seq atomic.Int64
	for turn := range turnsEach {
		for k := range fns {
			i := (k + turn) % len(fns)
			n, elapsed, err := runFor(ctx, clients, d/turnsEach, &seq, fns[i])
			if err != nil {
				return nil, err
			}
			counts[i] += n
			spent[i] += elapsed
		}
	}
	out := make([]float64, len(fns))
	for i := range fns {
		out[i] = rate(counts[i], spent[i])
	}
	return out, nil
}

// runFor calls fn from clients goroutines until d has passed, numbering calls from seq, and returns how many
// calls succeeded and how long they took.
func runFor(ctx context.Context, clients int, d time.Duration, seq *atomic.Int64, fn func(ctx context.Context, i int64) error) (int64, time.Duration, error) {
	var done atomic.Int64
	var mu sync.Mutex
	var first error
	var wg sync.WaitGroup
	start := time.Now()
	deadline := start.Add(d)
	for range clients {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for ctx.Err() == nil && time.Now().Before(deadline) {
				if err := fn(ctx, seq.Add(1)); err != nil {
					mu.Lock()
					if first == nil {
						first = err
					}
					mu.Unlock()
					return
				}
				done.Add(1)
			}
		}()
	}
	wg.Wait()
	if first == nil && ctx.Err() != nil {
		first = ctx.Err()
	}
	if first != nil && !errors.Is(first, context.Canceled) {
		return 0, 0, first
	}
	return done.Load(), time.Since(start), first
}

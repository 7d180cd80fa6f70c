package chaos

import (
	"context"
	"fmt"
	"maps"
	"regexp"
	"sync"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// Ledger is the scenario's record of truth. Producers insert every event ID into its committed table in the
// transaction that enqueues the event, so a row exists exactly when the event committed, whatever the producer
// was told when a fault cut its commit short. Consumers insert one row into its effects table per handler run, in
// the inbox transaction, with no unique constraint, so a second effect of one message shows up as a second row.
// Relays report each ID the broker acknowledged to Published.
type Ledger struct {
	committed, effects string // quoted table names
	outbox, inbox      string // quoted names of the outbox and inbox, to find parked messages

	mu        sync.Mutex
	published map[string]int
}

var ledgerName = regexp.MustCompile(`^[a-z_][a-z0-9_]{0,40}$`)

// NewLedger returns the ledger whose tables are called prefix_committed and prefix_effects, for the outbox and
// inbox tables named outbox and inbox. It does no I/O; call Migrate.
func NewLedger(prefix, outbox, inbox string) (*Ledger, error) {
	for _, n := range []string{prefix, outbox, inbox} {
		if !ledgerName.MatchString(n) {
			return nil, fmt.Errorf("chaos: ledger table name %q: use lower-case letters, digits and '_' (at most 41)", n)
		}
	}
	q := func(s string) string { return pgx.Identifier{s}.Sanitize() }
	return &Ledger{committed: q(prefix + "_committed"), effects: q(prefix + "_effects"), outbox: q(outbox), inbox: q(inbox),
		published: map[string]int{}}, nil
}

// Migrate creates the ledger's tables.
func (l *Ledger) Migrate(ctx context.Context, pool *pgxpool.Pool) error {
	_, err := pool.Exec(ctx, "CREATE TABLE IF NOT EXISTS "+l.committed+" (id uuid PRIMARY KEY, at timestamptz NOT NULL DEFAULT clock_timestamp());"+
		"CREATE TABLE IF NOT EXISTS "+l.effects+" (seq bigserial PRIMARY KEY, id uuid NOT NULL, key text NOT NULL, consumer text NOT NULL,"+
		" at timestamptz NOT NULL DEFAULT clock_timestamp());"+
		"CREATE INDEX IF NOT EXISTS "+pgx.Identifier{unquote(l.effects) + "_id"}.Sanitize()+" ON "+l.effects+" (id)")
	if err != nil {
		return fmt.Errorf("chaos: create ledger tables: %w", err)
	}
	return nil
}

func unquote(s string) string { return s[1 : len(s)-1] }

// Commit records in tx that the events with these IDs are enqueued in tx. Call it in the enqueuing transaction.
func (l *Ledger) Commit(ctx context.Context, tx pgx.Tx, ids []string) error {
	if _, err := tx.Exec(ctx, "INSERT INTO "+l.committed+" (id) SELECT unnest($1::uuid[])", ids); err != nil {
		return fmt.Errorf("chaos: ledger commit: %w", err)
	}
	return nil
}

// Effect records in tx one effect of message id, whose key is key, by consumer. Call it in the handler, in the
// inbox transaction.
func (l *Ledger) Effect(ctx context.Context, tx pgx.Tx, id, key, consumer string) error {
	if _, err := tx.Exec(ctx, "INSERT INTO "+l.effects+" (id, key, consumer) VALUES ($1, $2, $3)", id, key, consumer); err != nil {
		return fmt.Errorf("chaos: ledger effect: %w", err)
	}
	return nil
}

// Published records that the broker acknowledged the message with this ID once more. It is safe for concurrent
// use.
func (l *Ledger) Published(ids ...string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, id := range ids {
		l.published[id]++
	}
}

// PublishCounts returns how many times the broker acknowledged each ID.
func (l *Ledger) PublishCounts() map[string]int {
	l.mu.Lock()
	defer l.mu.Unlock()
	out := make(map[string]int, len(l.published))
	maps.Copy(out, l.published)
	return out
}

// Tally is what a ledger shows at the end of a scenario.
type Tally struct {
	Committed int64 // events committed by producers
	Effects   int64 // effect rows written by consumers
	// Lost counts committed events with no effect that are not parked either: not dead in the outbox, not
	// recorded as failed in the inbox. It must be 0.
	Lost int64
	// Parked counts committed events parked dead in the outbox or recorded as failed in the inbox.
	Parked int64
	// DuplicatesPublished counts broker acknowledgements beyond the first for each ID.
	DuplicatesPublished int64
	// DuplicateEffects counts effect rows beyond the first for each message and consumer. It must be 0.
	DuplicateEffects int64
	// Phantoms counts effects of events that never committed. It must be 0.
	Phantoms int64
	// Unpublished counts committed events the relays never reported as acknowledged, parked ones included.
	Unpublished int64
}

// Line is the scenario's verdict line: lost, published duplicates and duplicate effects.
func (t Tally) Line() string {
	return fmt.Sprintf("lost=%d duplicates_published=%d duplicate_effects=%d", t.Lost, t.DuplicatesPublished, t.DuplicateEffects)
}

// Remaining counts committed events that have neither an effect nor been parked: the work still in flight.
func (l *Ledger) Remaining(ctx context.Context, pool *pgxpool.Pool) (int64, error) {
	var n int64
	err := pool.QueryRow(ctx, "SELECT count(*) FROM "+l.committed+" c WHERE "+l.unsettled("c")).Scan(&n)
	if err != nil {
		return 0, fmt.Errorf("chaos: ledger remaining: %w", err)
	}
	return n, nil
}

func (l *Ledger) unsettled(c string) string {
	return "NOT EXISTS (SELECT 1 FROM " + l.effects + " e WHERE e.id = " + c + ".id)" +
		" AND NOT EXISTS (SELECT 1 FROM " + l.outbox + " o WHERE o.id = " + c + ".id AND o.status = 'dead')" +
		" AND NOT EXISTS (SELECT 1 FROM " + l.inbox + " i WHERE i.message_id = " + c + ".id::text AND i.status = 'failed')"
}

// Tally counts the ledger.
func (l *Ledger) Tally(ctx context.Context, pool *pgxpool.Pool) (Tally, error) {
	var t Tally
	err := pool.QueryRow(ctx, "SELECT"+
		" (SELECT count(*) FROM "+l.committed+"),"+
		" (SELECT count(*) FROM "+l.effects+"),"+
		" (SELECT count(*) FROM "+l.committed+" c WHERE "+l.unsettled("c")+"),"+
		" (SELECT count(*) FROM "+l.committed+" c WHERE EXISTS (SELECT 1 FROM "+l.outbox+" o WHERE o.id = c.id AND o.status = 'dead')"+
		"   OR EXISTS (SELECT 1 FROM "+l.inbox+" i WHERE i.message_id = c.id::text AND i.status = 'failed')),"+
		" (SELECT coalesce(sum(n - 1), 0) FROM (SELECT count(*) AS n FROM "+l.effects+" GROUP BY id, consumer) d),"+
		" (SELECT count(*) FROM "+l.effects+" e WHERE NOT EXISTS (SELECT 1 FROM "+l.committed+" c WHERE c.id = e.id))").
		Scan(&t.Committed, &t.Effects, &t.Lost, &t.Parked, &t.DuplicateEffects, &t.Phantoms)
	if err != nil {
		return Tally{}, fmt.Errorf("chaos: ledger tally: %w", err)
	}
	counts := l.PublishCounts()
	for _, n := range counts {
		t.DuplicatesPublished += int64(n - 1)
	}
	ids, err := l.committedIDs(ctx, pool)
	if err != nil {
		return Tally{}, err
	}
	for _, id := range ids {
		if counts[id] == 0 {
			t.Unpublished++
		}
	}
	return t, nil
}

// OutOfOrder counts the effects that a consumer's handler ran right after an effect of a later message of the
// same key: in ordered mode, where each key's messages must take effect in enqueue (ID) order, it must be 0.
// Messages without a key are not ordered and not counted.
func (l *Ledger) OutOfOrder(ctx context.Context, pool *pgxpool.Pool) (int64, error) {
	var n int64
	err := pool.QueryRow(ctx, "SELECT count(*) FROM (SELECT id, lag(id) OVER (PARTITION BY consumer, key ORDER BY seq) AS prev"+
		" FROM "+l.effects+" WHERE key <> '') e WHERE e.prev > e.id").Scan(&n)
	if err != nil {
		return 0, fmt.Errorf("chaos: ledger order: %w", err)
	}
	return n, nil
}

func (l *Ledger) committedIDs(ctx context.Context, pool *pgxpool.Pool) ([]string, error) {
	rows, err := pool.Query(ctx, "SELECT id::text FROM "+l.committed)
	if err != nil {
		return nil, fmt.Errorf("chaos: ledger committed IDs: %w", err)
	}
	ids, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return nil, fmt.Errorf("chaos: ledger committed IDs: %w", err)
	}
	return ids, nil
}

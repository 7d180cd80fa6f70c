package wal

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pglogrepl"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/postbox-go/postbox"
	"github.com/postbox-go/postbox/driver"
	"github.com/postbox-go/postbox/internal/backoff"
)

// Relay publishes the messages that a client made with New wrote into the WAL, reading them from a logical
// replication slot. It confirms a position to the server only once the broker acknowledged, or the dead table
// holds, every message up to it, so a relay that stops at any point, or a server that restarts, loses nothing:
// the next Run resumes from the confirmed position and publishes again what followed it (at least once).
//
// A slot has one reader at a time: a second relay on the same slot waits, retrying, until the first one stops.
type Relay struct {
	pool    *pgxpool.Pool
	pub     postbox.Publisher
	deliver *postbox.Deliverer // the delivery step, shared with table relays' rules
	clock   postbox.Clock
	cfg     RelayConfig
	ccfg    postbox.Config
	names   driver.Names
	prefix  string
	log     *slog.Logger
	running atomic.Bool
	failing atomic.Bool // the last attempt to stream failed
	standby atomic.Bool // the last attempt found another relay reading the slot

	published, failed, dead, batches, errors, spilled atomic.Int64
	unverified                                        atomic.Int64 // see verified (auth.go)
	streaming                                         atomic.Bool
	confirmed                                         atomic.Uint64
	mu                                                sync.Mutex
	slot                                              SlotStatus
	slotAt                                            time.Time
}

// Stats are a relay's running totals since it was made, and what its last slot check read.
type Stats struct {
	Published int64 // messages the broker acknowledged
	Failed    int64 // failed publish attempts that will be retried
	Dead      int64 // messages parked as dead in the outbox table
	Spilled   int64 // messages written into the outbox table as pending, their destination down (SpillAfter)
	Batches   int64 // batches published
	Errors    int64 // lost connections and failed dead-table writes; retried
	Streaming bool  // whether the relay is reading from its slot now
	// Confirmed is the position (LSN) up to which the relay has settled every message, as last sent to the server.
	Confirmed string
	// Destinations is the health of each destination the relay has published to (see postbox.Destinations).
	Destinations []postbox.DestinationHealth
	// Slot is what the last slot check read; SlotCheckedAt is when (zero before the first).
	Slot          SlotStatus
	SlotCheckedAt time.Time
	// Unverified counts the messages skipped because their tag did not verify with RelayConfig.Secret: written
	// by a role other than the clients, or by a client without the secret.
	Unverified int64
}

// NewRelay returns a relay for the table set of client, reading through pool's database and publishing through
// pub. The client gives the table names (for the message prefix, the slot name and the dead table), the event
// registry and the logger; it may be made with New or with pgxv5.New. cfg may be nil for the defaults. It does no
// I/O; call Run.
func NewRelay(pool *pgxpool.Pool, client *postbox.Client[pgx.Tx], pub postbox.Publisher, cfg *RelayConfig) (*Relay, error) {
	if pool == nil {
		return nil, fmt.Errorf("%w: wal.NewRelay needs a pool", postbox.ErrInvalidConfig)
	}
	if client == nil {
		return nil, fmt.Errorf("%w: wal.NewRelay needs a client from postbox.NewClient", postbox.ErrInvalidConfig)
	}
	if pub == nil {
		return nil, fmt.Errorf("%w: wal.NewRelay needs a Publisher", postbox.ErrInvalidConfig)
	}
	c := cfg.WithDefaults()
	if err := c.validate(); err != nil {
		return nil, err
	}
	cc := client.Config()
	n := driver.Names{Schema: cc.Schema, Outbox: cc.Table, Inbox: cc.InboxTable}
	if c.Slot == "" {
		c.Slot = SlotName(n)
	}
	if c.Replication == nil {
		c.Replication = pool.Config().ConnConfig.Config.Copy()
	} else {
		c.Replication = c.Replication.Copy()
	}
	if c.Replication.RuntimeParams == nil {
		c.Replication.RuntimeParams = map[string]string{}
	}
	c.Replication.RuntimeParams["replication"] = "database"
	log := c.Logger
	if log == nil {
		log = cc.Logger
	}
	r := &Relay{pool: pool, pub: pub, cfg: c, ccfg: cc, names: n, prefix: Prefix(n), clock: cc.Clock,
		log: log.With("component", "postbox.wal", "slot", c.Slot)}
	r.deliver = postbox.NewDeliverer(pub, postbox.DelivererConfig{Retry: c.Retry(), Registry: cc.Registry, Clock: cc.Clock,
		SlowPublish: c.SlowPublish, Logger: r.log})
	return r, nil
}

// Slot returns the relay's replication slot name.
func (r *Relay) Slot() string { return r.cfg.Slot }

// Stats returns the relay's running totals.
func (r *Relay) Stats() Stats {
	r.mu.Lock()
	slot, at := r.slot, r.slotAt
	r.mu.Unlock()
	return Stats{Published: r.published.Load(), Failed: r.failed.Load(), Dead: r.dead.Load(), Spilled: r.spilled.Load(),
		Batches: r.batches.Load(), Errors: r.errors.Load(), Unverified: r.unverified.Load(), Streaming: r.streaming.Load(),
		Confirmed: pglogrepl.LSN(r.confirmed.Load()).String(), Destinations: r.deliver.Health(), Slot: slot, SlotCheckedAt: at}
}

// Run checks the server (Check), creates the slot and its publication when missing, and relays until ctx is
// cancelled; then it lets the batch in flight settle, confirms what it settled and returns nil. Lost connections
// and broker failures are logged and retried. Run returns an error wrapping ErrRefused when the server cannot
// serve the relay, an error wrapping ErrVersion when a message was written in an encoding this relay cannot read
// (nothing past it is confirmed), and an error when the relay is already running.
func (r *Relay) Run(ctx context.Context) error {
	if !r.running.CompareAndSwap(false, true) {
		return errors.New("postbox wal: relay is already running; make one relay per Run")
	}
	defer r.running.Store(false)
	retry := backoff.Backoff{Base: r.cfg.ErrorBackoffBase, Max: r.cfg.ErrorBackoffMax}
	checked := false
	var wg sync.WaitGroup
	defer wg.Wait()
	for ctx.Err() == nil {
		var err error
		if !checked {
			if err = Check(ctx, r.pool); err == nil {
				err = r.checkEmit(ctx) // who may write messages (auth.go)
			}
			if err == nil {
				checked = true
				r.background(ctx, &wg)
			}
		}
		if checked {
			err = r.stream(ctx, &retry)
		}
		switch {
		case ctx.Err() != nil:
			return nil
		case errors.Is(err, ErrRefused) || errors.Is(err, ErrVersion):
			r.log.ErrorContext(ctx, "WAL relay stopped", "err", err)
			return err
		case slotInUse(err):
			// Another relay reads the slot: the normal state of a standby, not a failure. It says so once and
			// tries again at the error-backoff pace, so that it takes over soon after the other relay stops.
			if !r.standby.Swap(true) {
				r.log.InfoContext(ctx, "WAL relay on standby: another relay reads the slot; taking over when it stops", "reason", err)
			}
			if !sleep(ctx, retry.Next()) {
				return nil
			}
		case err != nil:
			r.errors.Add(1)
			if !r.failing.Swap(true) {
				r.log.WarnContext(ctx, "WAL relay cannot stream; retrying", "err", err)
			}
			if !sleep(ctx, retry.Next()) {
				return nil
			}
		}
	}
	return nil
}

// background starts the heartbeat and the slot checks.
func (r *Relay) background(ctx context.Context, wg *sync.WaitGroup) {
	wg.Add(1)
	go func() {
		defer wg.Done()
		r.checkSlots(ctx)
	}()
	if r.cfg.HeartbeatInterval > 0 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			r.heartbeat(ctx)
		}()
	}
}

// HeartbeatPrefix is the prefix of the non-transactional messages a relay writes so that an idle database moves
// its slot forward. Relays ignore them.
const HeartbeatPrefix = "postbox.heartbeat"

func (r *Relay) heartbeat(ctx context.Context) {
	t := time.NewTicker(r.cfg.HeartbeatInterval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		if _, err := r.pool.Exec(ctx, "SELECT pg_logical_emit_message(false, $1, ''::bytea)", HeartbeatPrefix); err != nil && ctx.Err() == nil {
			r.log.DebugContext(ctx, "WAL heartbeat failed", "err", err)
		}
	}
}

func (r *Relay) checkSlots(ctx context.Context) {
	t := time.NewTicker(r.cfg.SlotCheckInterval)
	defer t.Stop()
	for {
		st, err := ReadSlot(ctx, r.pool, r.cfg.Slot)
		if err == nil {
			r.mu.Lock()
			r.slot, r.slotAt = st, time.Now()
			r.mu.Unlock()
			switch {
			case st.WALStatus == "lost":
				r.log.ErrorContext(ctx, "the server removed WAL this slot still needed (max_slot_wal_keep_size): messages are lost; drop and recreate the slot",
					"retained_bytes", st.RetainedBytes)
			case st.RetainedBytes > r.cfg.RetainedWarnBytes:
				r.log.WarnContext(ctx, "replication slot retains much WAL", "retained_bytes", st.RetainedBytes,
					"lag_bytes", st.LagBytes, "warn_bytes", r.cfg.RetainedWarnBytes, "wal_status", st.WALStatus)
			}
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// sleep waits d or until ctx is done, and reports whether d passed.
func sleep(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C:
		return true
	}
}

// stream connects, starts replication from the slot's confirmed position and relays until ctx is done or the
// connection fails.
func (r *Relay) stream(ctx context.Context, retry *backoff.Backoff) error {
	conn, err := pgconn.ConnectConfig(ctx, r.cfg.Replication)
	if err != nil {
		return fmt.Errorf("replication connection: %w", err)
	}
	defer func() {
		cctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		conn.Close(cctx)
	}()
	start, err := ensureSlot(ctx, r.pool, r.cfg.Slot)
	if err != nil {
		return err
	}
	args := []string{"proto_version '1'", "publication_names '" + r.cfg.Slot + "'", "messages 'true'"}
	if err := pglogrepl.StartReplication(ctx, conn, r.cfg.Slot, 0, pglogrepl.StartReplicationOptions{
		Mode: pglogrepl.LogicalReplication, PluginArgs: args}); err != nil {
		return fmt.Errorf("start replication from slot %s: %w", r.cfg.Slot, err)
	}
	// Reads wait on the connection's deadline (see session.fill): cancelling ctx cuts the wait short.
	stop := context.AfterFunc(ctx, func() { _ = conn.Conn().SetReadDeadline(time.Now()) })
	defer stop()
	r.streaming.Store(true)
	defer r.streaming.Store(false)
	if r.standby.Swap(false) {
		r.log.InfoContext(ctx, "WAL relay took over the slot from the relay that read it", "from", start)
	}
	if r.failing.Swap(false) {
		r.log.InfoContext(ctx, "WAL relay streaming again", "from", start)
	}
	retry.Reset()
	r.confirmed.Store(uint64(start))
	s := &session{r: r, conn: conn, confirmed: start, sent: start, seen: map[string]struct{}{}, spilledKeys: map[string]struct{}{}}
	return s.run(ctx)
}

// slotInUse reports whether err says another session reads the slot: PostgreSQL's object_in_use (SQLSTATE 55006,
// "replication slot ... is active for PID N").
func slotInUse(err error) bool {
	var pe *pgconn.PgError
	return errors.As(err, &pe) && pe.Code == "55006"
}

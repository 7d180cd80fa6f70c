package cli

import (
	"context"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5/pgxpool"
	"go.opentelemetry.io/otel/metric"

	"github.com/postbox-go/postbox"
	"github.com/postbox-go/postbox/driver"
	"github.com/postbox-go/postbox/driver/pgxv5"
	"github.com/postbox-go/postbox/driver/pgxv5/wal"
)

// walOptions are the relay's WAL flags.
type walOptions struct {
	on     bool
	cfg    wal.RelayConfig
	secret *option // --wal-secret, where it came from
}

// checkSecret refuses a WAL relay without the clients' secret, or with a short one, before anything connects.
func (o *walOptions) checkSecret() error {
	if !o.on {
		return nil
	}
	s := o.secret.value.String()
	if s == "" {
		return usageErrorf("--wal needs --wal-secret (or POSTBOX_WAL_SECRET, or the config file's wal-secret key): the secret the clients "+
			"sign their WAL messages with (wal.Config.Secret), so that only they can publish; use at least %d random bytes, "+
			"such as the output of openssl rand -base64 32", wal.MinSecretBytes)
	}
	if len(s) < wal.MinSecretBytes {
		return usageErrorf("%s is %d bytes long; use at least %d random bytes, such as the output of openssl rand -base64 32, "+
			"in the clients' wal.Config.Secret too", o.secret.from, len(s), wal.MinSecretBytes)
	}
	o.cfg.Secret = []byte(s)
	return nil
}

const walHelp = `With --wal (PostgreSQL 14+, wal_level = logical, a role with REPLICATION) the relay also reads the messages
that clients made with the wal driver wrote into the WAL, from the replication slot --wal-slot (created with its
publication when missing), and confirms a position to the server only once every message up to it is published or
parked as dead. It publishes only the messages signed with --wal-secret, the clients' wal.Config.Secret, and
skips (counting them) those any other role wrote. The table relay keeps running beside it, for retried dead messages and delayed ones. /metrics adds
postbox_wal_retained_bytes, postbox_wal_lag_bytes and postbox_wal_streaming; 'postbox wal status' shows the
slot and 'postbox wal drop-slot' drops it. See docs/WAL.md.`

func addWALFlags(f *flagSet, o *walOptions) {
	f.Bool(&o.on, "wal", "", "also relay the messages written into the WAL, from a logical replication slot (PostgreSQL)")
	var secret string
	o.secret = f.String(&secret, "wal-secret", "", "", "SECRET",
		"with --wal, the secret the clients sign WAL messages with (wal.Config.Secret), 32+ bytes: other messages are skipped; never printed; prefer the environment variable, since ps shows flags")
	o.secret.secretValue = true
	f.add(&option{name: "wal-slot", usage: "replication slot (and publication) the WAL relay reads", placeholder: "NAME",
		def: "postbox_<table>", value: (*stringValue)(&o.cfg.Slot)})
	f.Duration(&o.cfg.HeartbeatInterval, "wal-heartbeat", wal.DefaultHeartbeatInterval, "how often the WAL relay writes a heartbeat message, so an idle database moves the slot (negative: never)")
	f.Duration(&o.cfg.StatusInterval, "wal-status-interval", wal.DefaultStatusInterval, "longest time between two confirmations sent to the server")
	f.add(&option{name: "wal-retained-warn", usage: "log a warning when the slot retains more WAL than this many bytes", placeholder: "BYTES",
		def: fmt.Sprint(wal.DefaultRetainedWarnBytes), value: (*int64Value)(&o.cfg.RetainedWarnBytes)})
}

// int64Value is a flag value holding a byte count.
type int64Value int64

func (v *int64Value) Set(s string) error {
	var n int64
	if _, err := fmt.Sscan(s, &n); err != nil || n < 0 {
		return fmt.Errorf("%q is not a number of bytes", s)
	}
	*v = int64Value(n)
	return nil
}
func (v *int64Value) String() string { return fmt.Sprint(int64(*v)) }

// openWAL connects a pool for the WAL relay or the wal command; PostgreSQL only.
func openWAL(ctx context.Context, o dbOptions) (*pgxpool.Pool, error) {
	if o.url == "" {
		return nil, usageErrorf("--db is required: a PostgreSQL URL such as postgres://user:pass@host:5432/db (or set POSTBOX_DB)")
	}
	if dbScheme(o.url) != "postgres" {
		return nil, usageErrorf("--db %s: the WAL relay needs PostgreSQL", RedactURL(o.url))
	}
	pc, err := pgxpool.ParseConfig(o.url)
	if err != nil {
		return nil, usageErrorf("--db %s: %v", RedactURL(o.url), err)
	}
	pool, err := pgxpool.NewWithConfig(ctx, pc)
	if err != nil {
		return nil, fmt.Errorf("connect to %s: %w", RedactURL(o.url), err)
	}
	return pool, nil
}

// startWAL checks the server and returns a WAL relay ready to Run beside the table relay, with its gauges
// registered on the relay's metrics, and the function that closes its pool.
func startWAL(ctx context.Context, rt *runtime, o dbOptions, wo walOptions, reg *postbox.Registry, pub postbox.Publisher,
	obs postbox.RelayObserver, m *relayMetrics) (*wal.Relay, func(), error) {
	pool, err := openWAL(ctx, o)
	if err != nil {
		return nil, nil, err
	}
	fail := func(err error) (*wal.Relay, func(), error) { pool.Close(); return nil, nil, err }
	if err := wal.Check(ctx, pool); err != nil {
		if errors.Is(err, wal.ErrRefused) {
			return fail(fmt.Errorf("--wal: %w", err))
		}
		return fail(fmt.Errorf("--wal: %s: %w", RedactURL(o.url), err))
	}
	client, err := postbox.NewClient(pgxv5.New(pool), o.config(rt, reg))
	if err != nil {
		return fail(usageErrorf("%v", err))
	}
	cfg := wo.cfg
	cfg.Logger, cfg.Observer = rt.log, obs
	relay, err := wal.NewRelay(pool, client, pub, &cfg)
	if err != nil {
		return fail(usageErrorf("--wal: %v", err))
	}
	if err := walGauges(m, relay); err != nil {
		return fail(fmt.Errorf("metrics: %w", err))
	}
	return relay, pool.Close, nil
}

// walGauges adds the slot's series to /metrics, read from the relay's last slot check.
func walGauges(m *relayMetrics, r *wal.Relay) error {
	meter := m.provider.Meter("github.com/postbox-go/postbox/cmd/postbox/wal")
	retained, err := meter.Int64ObservableGauge("postbox.wal.retained", metric.WithUnit("By"),
		metric.WithDescription("WAL the relay's replication slot keeps on the server's disk"))
	if err != nil {
		return err
	}
	lag, err := meter.Int64ObservableGauge("postbox.wal.lag", metric.WithUnit("By"),
		metric.WithDescription("WAL written since the position the relay last confirmed"))
	if err != nil {
		return err
	}
	active, err := meter.Int64ObservableGauge("postbox.wal.streaming", metric.WithDescription("1 while the relay reads from its slot"))
	if err != nil {
		return err
	}
	_, err = meter.RegisterCallback(func(_ context.Context, o metric.Observer) error {
		s := r.Stats()
		o.ObserveInt64(retained, s.Slot.RetainedBytes)
		o.ObserveInt64(lag, s.Slot.LagBytes)
		v := int64(0)
		if s.Streaming {
			v = 1
		}
		o.ObserveInt64(active, v)
		return nil
	}, retained, lag, active)
	return err
}

var walCommand = &command{
	name:     "wal",
	synopsis: "status|create-slot|drop-slot --db URL [--wal-slot NAME]",
	summary:  "show, create or drop the WAL relay's replication slot (PostgreSQL)",
	help: `
status prints the replication slot of the table set: whether a relay reads it, the position confirmed, the WAL it
retains on the server's disk and the lag. create-slot creates the slot and its publication, so that clients
writing into the WAL may start before the relay does (messages written before the slot exists are never read).
drop-slot drops both, so that the server stops keeping WAL for them: the messages not yet published are lost. It
fails while a relay reads the slot.`,
	examples: []string{
		"postbox wal status --db postgres://postbox@localhost/app",
		"postbox wal create-slot --db postgres://postbox@localhost/app --table orders_outbox",
		"postbox wal drop-slot --db postgres://postbox@localhost/app --wal-slot postbox_postbox_outbox",
	},
	setup: func(f *flagSet) func(ctx context.Context, rt *runtime, args []string) error {
		var o dbOptions
		var slot string
		var asJSON bool
		addDBFlags(f, &o)
		f.add(&option{name: "wal-slot", usage: "replication slot", placeholder: "NAME", def: "postbox_<table>", value: (*stringValue)(&slot)})
		f.Bool(&asJSON, "json", "", "print one JSON object (status)")
		return func(ctx context.Context, rt *runtime, args []string) error {
			if len(args) != 1 {
				return usageErrorf("name one of status, create-slot, drop-slot")
			}
			if slot == "" {
				slot = wal.SlotName(driver.Names{Schema: o.schema, Outbox: o.table})
			}
			pool, err := openWAL(ctx, o)
			if err != nil {
				return err
			}
			defer pool.Close()
			switch args[0] {
			case "status":
				st, err := wal.ReadSlot(ctx, pool, slot)
				if err != nil {
					return err
				}
				return printSlot(rt, st, asJSON)
			case "create-slot":
				if err := wal.CreateSlot(ctx, pool, slot); err != nil {
					return err
				}
				fmt.Fprintf(rt.stdout, "slot %s ready\n", slot)
				return nil
			case "drop-slot":
				existed, err := wal.DropSlot(ctx, pool, slot)
				if err != nil {
					return err
				}
				if !existed {
					return fmt.Errorf("no replication slot %s", slot)
				}
				fmt.Fprintf(rt.stdout, "dropped slot %s\n", slot)
				return nil
			default:
				return usageErrorf("unknown wal command %q: name one of status, create-slot, drop-slot", args[0])
			}
		}
	},
}

func printSlot(rt *runtime, st wal.SlotStatus, asJSON bool) error {
	if asJSON {
		return writeJSON(rt.stdout, map[string]any{"slot": st.Slot, "exists": st.Exists, "active": st.Active,
			"confirmed_lsn": st.ConfirmedLSN, "retained_bytes": st.RetainedBytes, "lag_bytes": st.LagBytes, "wal_status": st.WALStatus})
	}
	if !st.Exists {
		fmt.Fprintf(rt.stdout, "slot %s: none\n", st.Slot)
		return nil
	}
	fmt.Fprintf(rt.stdout, "slot %s: active %v, confirmed %s, retained %d bytes, lag %d bytes, wal_status %s\n",
		st.Slot, st.Active, st.ConfirmedLSN, st.RetainedBytes, st.LagBytes, st.WALStatus)
	return nil
}

// walSlotStatus is the WAL relay's slot in status --json: the same figures as the text form's line.
type walSlotStatus struct {
	Slot          string `json:"slot"`
	Active        bool   `json:"active"`
	ConfirmedLSN  string `json:"confirmed_lsn"`
	RetainedBytes int64  `json:"retained_bytes"`
	LagBytes      int64  `json:"lag_bytes"`
}

// walSlot reads the WAL relay's slot of the table set, for status. It reports false when the database is not
// PostgreSQL, the slot cannot be read, or there is none.
func walSlot(ctx context.Context, o dbOptions) (wal.SlotStatus, bool) {
	if dbScheme(o.url) != "postgres" {
		return wal.SlotStatus{}, false
	}
	pool, err := openWAL(ctx, o)
	if err != nil {
		return wal.SlotStatus{}, false
	}
	defer pool.Close()
	st, err := wal.ReadSlot(ctx, pool, wal.SlotName(driver.Names{Schema: o.schema, Outbox: o.table}))
	if err != nil || !st.Exists {
		return wal.SlotStatus{}, false
	}
	return st, true
}

// walStatusLine prints the WAL relay's slot for status, when the database is PostgreSQL and the slot exists.
func walStatusLine(ctx context.Context, rt *runtime, o dbOptions) {
	if st, ok := walSlot(ctx, o); ok {
		fmt.Fprintf(rt.stdout, "wal slot %s: active %v, retained %d bytes, lag %d bytes\n", st.Slot, st.Active, st.RetainedBytes, st.LagBytes)
	}
}

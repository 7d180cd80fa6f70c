package wal

import (
	"context"
	"errors"
	"fmt"

	"github.com/jackc/pglogrepl"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
)

// ErrRefused is wrapped by the error Run returns when the server cannot serve a WAL relay as configured: a
// wal_level other than logical, a role without the REPLICATION attribute, PostgreSQL before 14, or a slot made
// with another output plugin. Retrying does not help; the error says what to change.
var ErrRefused = errors.New("postbox wal: refused")

// Check reports, with an error wrapping ErrRefused, why the server behind pool cannot serve a WAL relay; nil when
// it can. Other errors are connection errors.
func Check(ctx context.Context, pool *pgxpool.Pool) error {
	var level string
	var version int
	var repl bool
	err := pool.QueryRow(ctx, "SELECT current_setting('wal_level'), current_setting('server_version_num')::int,"+
		" coalesce((SELECT rolreplication OR rolsuper FROM pg_roles WHERE rolname = current_user), false)").
		Scan(&level, &version, &repl)
	if err != nil {
		return err
	}
	var why []error
	if version < 140000 {
		why = append(why, fmt.Errorf("PostgreSQL %d.%d is too old: the WAL relay needs 14 or later", version/10000, version%10000/100))
	}
	if level != "logical" {
		why = append(why, fmt.Errorf("wal_level is %q: set wal_level = logical in postgresql.conf and restart PostgreSQL", level))
	}
	if !repl {
		why = append(why, errors.New("the role lacks REPLICATION: run ALTER ROLE <role> REPLICATION, or connect as a role that has it"))
	}
	if len(why) > 0 {
		return fmt.Errorf("%w: %w", ErrRefused, errors.Join(why...))
	}
	return nil
}

// SlotStatus is what the server says of a relay's slot.
type SlotStatus struct {
	Slot string
	// Exists is false when there is no such slot; the other fields are then zero.
	Exists bool
	// Active is true while a relay streams from the slot.
	Active bool
	// ConfirmedLSN is the position up to which the relay has confirmed every message.
	ConfirmedLSN string
	// RetainedBytes is the WAL the slot keeps on the server's disk: from its restart LSN to the current WAL
	// position.
	RetainedBytes int64
	// LagBytes is the WAL written since the confirmed position: what a relay would read if it caught up now.
	LagBytes int64
	// WALStatus is pg_replication_slots.wal_status: reserved, extended, unreserved or lost. A lost slot has had
	// WAL removed under it (max_slot_wal_keep_size) and must be dropped and made again; its unread messages are
	// gone.
	WALStatus string
}

// ReadSlot returns the status of slot.
func ReadSlot(ctx context.Context, pool *pgxpool.Pool, slot string) (SlotStatus, error) {
	st := SlotStatus{Slot: slot}
	var confirmed *string
	var retained, lag *int64
	var walStatus *string
	err := pool.QueryRow(ctx, "SELECT active, confirmed_flush_lsn::text,"+
		" (pg_current_wal_lsn() - restart_lsn)::bigint, (pg_current_wal_lsn() - confirmed_flush_lsn)::bigint, wal_status"+
		" FROM pg_replication_slots WHERE slot_name = $1", slot).Scan(&st.Active, &confirmed, &retained, &lag, &walStatus)
	if errors.Is(err, pgx.ErrNoRows) {
		return st, nil
	}
	if err != nil {
		return st, err
	}
	st.Exists = true
	if confirmed != nil {
		st.ConfirmedLSN = *confirmed
	}
	if retained != nil {
		st.RetainedBytes = *retained
	}
	if lag != nil {
		st.LagBytes = *lag
	}
	if walStatus != nil {
		st.WALStatus = *walStatus
	}
	return st, nil
}

// DropSlot drops slot and its publication, so that the server stops keeping WAL for it. Messages emitted and not
// yet published are lost with it. It fails while a relay streams from the slot. It reports whether the slot
// existed.
func DropSlot(ctx context.Context, pool *pgxpool.Pool, slot string) (bool, error) {
	if !validSlot(slot) {
		return false, fmt.Errorf("postbox wal: %q is not a slot name", slot)
	}
	tag, err := pool.Exec(ctx, "SELECT pg_drop_replication_slot(slot_name) FROM pg_replication_slots WHERE slot_name = $1", slot)
	if err != nil {
		return false, fmt.Errorf("drop slot %s: %w", slot, err)
	}
	if _, err := pool.Exec(ctx, "DROP PUBLICATION IF EXISTS "+pgx.Identifier{slot}.Sanitize()); err != nil {
		return tag.RowsAffected() > 0, fmt.Errorf("drop publication %s: %w", slot, err)
	}
	return tag.RowsAffected() > 0, nil
}

// CreateSlot creates slot, a pgoutput logical replication slot on pool's database, and the empty publication of
// the same name that pgoutput needs, each when missing. Messages emitted before the slot exists are never
// decoded: create it (or start the relay, which creates it) before clients write into the WAL.
func CreateSlot(ctx context.Context, pool *pgxpool.Pool, slot string) error {
	_, err := ensureSlot(ctx, pool, slot)
	return err
}

// ensureSlot creates the publication and the slot when missing, and returns the slot's confirmed LSN.
func ensureSlot(ctx context.Context, pool *pgxpool.Pool, slot string) (pglogrepl.LSN, error) {
	if !validSlot(slot) {
		return 0, fmt.Errorf("%w: %q is not a slot name; use 1 to 63 lower-case letters, digits and '_'", ErrRefused, slot)
	}
	if err := ensurePublication(ctx, pool, slot); err != nil {
		return 0, err
	}
	var plugin, db string
	var confirmed *string
	err := pool.QueryRow(ctx, "SELECT plugin, coalesce(database, ''), confirmed_flush_lsn::text FROM pg_replication_slots WHERE slot_name = $1",
		slot).Scan(&plugin, &db, &confirmed)
	if errors.Is(err, pgx.ErrNoRows) {
		// From PostgreSQL 17 the slot is a failover slot: standbys with sync_replication_slots = on keep a copy.
		q := "SELECT lsn::text FROM pg_create_logical_replication_slot($1, 'pgoutput')"
		if versionNum(ctx, pool) >= 170000 {
			q = "SELECT lsn::text FROM pg_create_logical_replication_slot($1, 'pgoutput', false, false, true)"
		}
		var lsn string
		err = pool.QueryRow(ctx, q, slot).Scan(&lsn)
		var pgErr *pgconn.PgError
		if errors.As(err, &pgErr) && pgErr.Code == "42710" { // created meanwhile by another relay
			return ensureSlot(ctx, pool, slot)
		}
		if err != nil {
			return 0, fmt.Errorf("create replication slot %s: %w", slot, err)
		}
		return pglogrepl.ParseLSN(lsn)
	}
	if err != nil {
		return 0, err
	}
	var here string
	if err := pool.QueryRow(ctx, "SELECT current_database()").Scan(&here); err != nil {
		return 0, err
	}
	if plugin != "pgoutput" || db != here {
		return 0, fmt.Errorf("%w: replication slot %s exists with plugin %q on database %q; the relay needs a pgoutput slot on %q: "+
			"name another slot (--wal-slot, RelayConfig.Slot) or drop this one", ErrRefused, slot, plugin, db, here)
	}
	if confirmed == nil {
		return 0, nil
	}
	return pglogrepl.ParseLSN(*confirmed)
}

// ensurePublication creates the empty publication that pgoutput needs a name of: the relay reads messages only,
// which pgoutput sends whatever the publication holds.
func ensurePublication(ctx context.Context, pool *pgxpool.Pool, name string) error {
	var n int
	if err := pool.QueryRow(ctx, "SELECT count(*) FROM pg_publication WHERE pubname = $1", name).Scan(&n); err != nil || n > 0 {
		return err
	}
	if _, err := pool.Exec(ctx, "DO $$BEGIN CREATE PUBLICATION "+pgx.Identifier{name}.Sanitize()+
		"; EXCEPTION WHEN duplicate_object THEN NULL; END$$"); err != nil {
		return fmt.Errorf("create publication %s: %w", name, err)
	}
	return nil
}

// versionNum returns the server's version number (150004 for 15.4), or 0 when it cannot be read.
func versionNum(ctx context.Context, pool *pgxpool.Pool) int {
	var v int
	if err := pool.QueryRow(ctx, "SELECT current_setting('server_version_num')::int").Scan(&v); err != nil {
		return 0
	}
	return v
}

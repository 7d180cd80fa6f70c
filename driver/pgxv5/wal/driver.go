package wal

import (
	"bytes"
	"context"
	"fmt"
	"strings"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/postbox-go/postbox/driver"
	"github.com/postbox-go/postbox/driver/pgxv5"
)

// Driver is pgxv5.Driver with one change: Store.Insert writes each message into the WAL with
// pg_logical_emit_message instead of inserting an outbox row. Every other operation (the dead list, retries,
// migrations, the inbox) uses the tables as pgxv5 does. A message delayed with AvailableAt is inserted as a row,
// because a relay that held it back would hold the slot's WAL with it: the table relay publishes it when due.
// The methods of the embedded pgxv5.Driver that return a driver (WithListenConfig) return one in table mode.
type Driver struct {
	*pgxv5.Driver
	secret []byte
}

// New returns a driver writing unsigned messages into the WAL through pool, which only a relay without a secret
// reads (see RelayConfig.Secret); NewWithConfig signs them. It does no I/O.
func New(pool *pgxpool.Pool) *Driver { return &Driver{Driver: pgxv5.New(pool)} }

// NewWithConfig returns a driver writing messages into the WAL through pool, signed with cfg.Secret. It returns
// an error wrapping postbox.ErrInvalidConfig when the secret is shorter than MinSecretBytes. It does no I/O.
func NewWithConfig(pool *pgxpool.Pool, cfg *Config) (*Driver, error) {
	var c Config
	if cfg != nil {
		c = *cfg
	}
	if err := checkSecret("wal.Config.Secret", c.Secret); err != nil {
		return nil, err
	}
	return &Driver{Driver: pgxv5.New(pool), secret: bytes.Clone(c.Secret)}, nil
}

// Store returns the operations on the table set n, with Insert emitting WAL messages.
func (d *Driver) Store(n driver.Names) (driver.Store[pgx.Tx], error) {
	s, err := d.Driver.Store(n)
	if err != nil {
		return nil, err
	}
	return &store{Store: s, prefix: Prefix(n), secret: d.secret}, nil
}

// Prefix is the logical decoding message prefix of the table set n: "postbox:" and the outbox's qualified name.
// A relay reads only the messages with its table set's prefix.
func Prefix(n driver.Names) string {
	return "postbox:" + qualified(n)
}

func qualified(n driver.Names) string {
	if n.Schema == "" {
		return n.Outbox
	}
	return n.Schema + "." + n.Outbox
}

// SlotName is the default replication slot (and publication) name of the table set n: "postbox_" and the outbox's
// qualified name, lower case, with every character other than a letter, digit or '_' turned into '_', cut to
// PostgreSQL's 63 bytes.
func SlotName(n driver.Names) string {
	s := "postbox_" + strings.ToLower(qualified(n))
	b := []byte(s)
	for i, c := range b {
		if !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '_') {
			b[i] = '_'
		}
	}
	if len(b) > 63 {
		b = b[:63]
	}
	return string(b)
}

type store struct {
	driver.Store[pgx.Tx]
	prefix string
	secret []byte
}

const (
	emitOne  = "SELECT pg_logical_emit_message(true, $1, $2::bytea)"
	emitMany = "SELECT pg_logical_emit_message(true, $1, c) FROM unnest($2::bytea[]) AS u(c)"
)

// Insert emits one transactional WAL message per record inside tx, in one round trip; PostgreSQL decodes them
// at commit, in commit order, and drops them with a rolled-back transaction. Delayed records become rows.
func (s *store) Insert(ctx context.Context, tx pgx.Tx, recs []driver.Record) error {
	var delayed []driver.Record
	contents := make([][]byte, 0, len(recs))
	for _, r := range recs {
		if r.AvailableAt.After(r.CreatedAt) {
			delayed = append(delayed, r)
			continue
		}
		b, err := Encode(r)
		if err != nil {
			return err
		}
		if len(s.secret) > 0 {
			b = seal(s.secret, s.prefix, b)
		}
		contents = append(contents, b)
	}
	if len(delayed) > 0 {
		if err := s.Store.Insert(ctx, tx, delayed); err != nil {
			return err
		}
	}
	var err error
	switch len(contents) {
	case 0:
	case 1:
		_, err = tx.Exec(ctx, emitOne, s.prefix, contents[0])
	default:
		_, err = tx.Exec(ctx, emitMany, s.prefix, contents)
	}
	if err != nil {
		return fmt.Errorf("emit WAL message: %w", err)
	}
	return nil
}

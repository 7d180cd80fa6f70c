package wal

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"fmt"
	"strings"

	"github.com/jackc/pglogrepl"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/postbox-go/postbox"
)

// Why messages are signed: pg_logical_emit_message is executable by PUBLIC unless revoked, and its prefix and
// content format are documented, so without a tag any role that can log in could write a message that the relay
// publishes as its own. In table mode publishing needs INSERT on the outbox; a tag made with a secret that only
// the clients and the relay hold asks as much of the WAL mode.

// SignedVersion is the encoding version of a signed message: the version byte, a tag of 32 bytes, then the fields
// of a Version 1 message (everything after its version byte). The tag is HMAC-SHA256, keyed by the shared secret
// (Config.Secret, RelayConfig.Secret), over the table set's prefix (Prefix), a zero byte, the version byte and
// every byte after the tag, so that a message cannot be moved to another table set or edited. Later versions keep
// the tag at the same place, so that a relay can tell a message it cannot read from one it must not trust.
const SignedVersion = 2

// MinSecretBytes is the shortest secret accepted: anyone who reads one signed message can test guesses at the
// secret offline, so it must be random and long enough not to fall to a search (openssl rand -base64 32).
const MinSecretBytes = 32

const tagSize = sha256.Size

func checkSecret(field string, secret []byte) error {
	if len(secret) > 0 && len(secret) < MinSecretBytes {
		return fmt.Errorf("%w: %s is %d bytes long; use at least %d random bytes, such as the output of openssl rand -base64 32",
			postbox.ErrInvalidConfig, field, len(secret), MinSecretBytes)
	}
	return nil
}

// seal turns content (from Encode, Version 1) into a signed message for prefix.
func seal(secret []byte, prefix string, content []byte) []byte {
	out := make([]byte, 1+tagSize, 1+tagSize+len(content)-1)
	out[0] = SignedVersion
	out = append(out, content[1:]...)
	copy(out[1:], tag(secret, prefix, out))
	return out
}

// verify reports whether content is a signed message whose tag secret made for prefix.
func verify(secret []byte, prefix string, content []byte) bool {
	if len(content) < 1+tagSize || content[0] < SignedVersion {
		return false
	}
	return hmac.Equal(content[1:1+tagSize], tag(secret, prefix, content))
}

func tag(secret []byte, prefix string, content []byte) []byte {
	m := hmac.New(sha256.New, secret)
	m.Write([]byte(prefix))
	m.Write([]byte{0, content[0]})
	m.Write(content[1+tagSize:])
	return m.Sum(nil)
}

// verified reports whether the relay may decode content: always without a secret, and with one only when its tag
// verifies. A message that does not verify is counted (Stats.Unverified) and skipped as settled, so that it never
// holds the slot; the first one is logged.
func (r *Relay) verified(lsn pglogrepl.LSN, content []byte) bool {
	if len(r.cfg.Secret) == 0 || verify(r.cfg.Secret, r.prefix, content) {
		return true
	}
	if r.unverified.Add(1) == 1 {
		r.log.Error("skipped a message with the table set's prefix that is not signed with the relay's secret: "+
			"a role that may execute pg_logical_emit_message wrote it, or a client lacks wal.Config.Secret; "+
			"later ones are counted in Stats.Unverified without a log line", "lsn", lsn)
	}
	return false
}

// PublicEmit returns the variants of pg_logical_emit_message that PUBLIC may execute on the server behind pool,
// as PostgreSQL names them ("pg_logical_emit_message(boolean,text,bytea)"; from PostgreSQL 17 each takes a
// fourth argument, flush). While any is listed, every role that can log in can write into the WAL messages with
// any prefix. docs/WAL.md gives the REVOKE and GRANT statements.
func PublicEmit(ctx context.Context, pool *pgxpool.Pool) ([]string, error) {
	rows, err := pool.Query(ctx, "SELECT p.oid::regprocedure::text FROM pg_proc p"+
		" WHERE p.proname = 'pg_logical_emit_message' AND p.pronamespace = 'pg_catalog'::regnamespace"+
		" AND has_function_privilege('public', p.oid, 'EXECUTE') ORDER BY 1")
	if err != nil {
		return nil, fmt.Errorf("read who may execute pg_logical_emit_message: %w", err)
	}
	return pgx.CollectRows(rows, pgx.RowTo[string])
}

// checkEmit is the start-up check of who may write messages: while PUBLIC may execute pg_logical_emit_message,
// a relay without a secret refuses to run (unless RelayConfig.InsecureUnsigned), and one with a secret warns,
// since every role can still fill the slot with messages it must read and skip.
func (r *Relay) checkEmit(ctx context.Context) error {
	open, err := PublicEmit(ctx, r.pool)
	if err != nil || len(open) == 0 {
		return err
	}
	revoke := make([]string, len(open))
	for i, f := range open {
		revoke[i] = "REVOKE EXECUTE ON FUNCTION " + f + " FROM PUBLIC;"
	}
	fix := strings.Join(revoke, " ")
	switch {
	case len(r.cfg.Secret) > 0:
		r.log.WarnContext(ctx, "PUBLIC may execute pg_logical_emit_message: any role can write messages that this relay must read and skip; "+
			"revoke it, then grant EXECUTE to the roles that enqueue and to the relay's role (docs/WAL.md)", "fix", fix)
	case r.cfg.InsecureUnsigned:
		r.log.WarnContext(ctx, "PUBLIC may execute pg_logical_emit_message and the relay has no secret: any role that can log in can publish "+
			"through this relay (RelayConfig.InsecureUnsigned)", "fix", fix)
	default:
		return fmt.Errorf("%w: PUBLIC may execute pg_logical_emit_message, so any role that can log in could publish through this relay: "+
			"set RelayConfig.Secret (and wal.Config.Secret on the clients), or run %s then GRANT EXECUTE on the same functions "+
			"to the roles that enqueue and to the relay's role (docs/WAL.md)", ErrRefused, fix)
	}
	return nil
}

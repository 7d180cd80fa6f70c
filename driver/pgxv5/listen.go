package pgxv5

import (
	"context"
	"time"

	"github.com/jackc/pgx/v5"
)

// Listen implements driver.Listener: it opens a connection of its own with the pool's settings (or those given to
// WithListenConfig), outside the pool so that it takes no pooled connection for the relay's lifetime, and runs
// LISTEN on it. Behind a pooler in transaction mode (PgBouncer) LISTEN does not work: point it at PostgreSQL
// itself with WithListenConfig, or set RelayConfig.DisableListen.
func (d *Driver) Listen(ctx context.Context, channel string, ready, wake func()) error {
	conn, err := pgx.ConnectConfig(ctx, d.listenConfig())
	if err != nil {
		return err
	}
	defer func() {
		cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), time.Second)
		defer cancel()
		conn.Close(cctx)
	}()
	if _, err := conn.Exec(ctx, "LISTEN "+pgx.Identifier{channel}.Sanitize()); err != nil {
		if ctx.Err() != nil {
			return nil
		}
		return err
	}
	ready()
	for {
		if _, err := conn.WaitForNotification(ctx); err != nil {
			if ctx.Err() != nil {
				return nil
			}
			return err
		}
		wake()
	}
}

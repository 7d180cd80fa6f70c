package pgxv5

import (
	"context"
	"errors"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/postbox-go/postbox/driver/internal/sqlstore"
)

// BeginQuery implements sqlstore.Pipeliner: BEGIN and the claim go to the server in one batch, so a claim costs
// one round trip.
func (b backend) BeginQuery(ctx context.Context, query string, args []any, row func(scan func(...any) error) error) (sqlstore.PipelinedTx, error) {
	c, err := b.pool.Acquire(ctx)
	if err != nil {
		return nil, err
	}
	t := &pipelinedTx{conn: conn{c}, c: c}
	var batch pgx.Batch
	batch.Queue("begin")
	batch.Queue(query, args...)
	br := c.SendBatch(ctx, &batch)
	_, err = br.Exec()
	if err == nil {
		err = readRows(br, row)
	}
	if cerr := br.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return nil, t.end(ctx, "rollback", explainPooler(err))
	}
	return t, nil
}

func readRows(br pgx.BatchResults, row func(scan func(...any) error) error) error {
	rows, err := br.Query()
	return scanRows(rows, err, row)
}

// pipelinedTx is a transaction begun in a batch on a connection it holds until the transaction ends.
type pipelinedTx struct {
	conn
	c    *pgxpool.Conn
	done bool
}

// ExecCommit sends the statement and COMMIT in one batch.
func (t *pipelinedTx) ExecCommit(ctx context.Context, query string, args ...any) error {
	var batch pgx.Batch
	batch.Queue(query, args...)
	batch.Queue("commit")
	br := t.c.SendBatch(ctx, &batch)
	_, err := br.Exec()
	if err == nil {
		_, err = br.Exec()
	}
	if cerr := br.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		// After an error the server skips the rest of the batch, COMMIT included: end the transaction.
		return t.end(ctx, "rollback", explainPooler(err))
	}
	t.done = true
	t.c.Release()
	return nil
}

func (t *pipelinedTx) Commit(ctx context.Context) error   { return t.end(ctx, "commit", nil) }
func (t *pipelinedTx) Rollback(ctx context.Context) error { return t.end(ctx, "rollback", nil) }

// end runs COMMIT or ROLLBACK, even when ctx is done, and gives the connection back to the pool, which closes
// it if the transaction is still open. It returns cause joined with any error of its own.
func (t *pipelinedTx) end(ctx context.Context, stmt string, cause error) error {
	if t.done {
		return cause
	}
	t.done = true
	defer t.c.Release()
	if _, err := t.c.Exec(context.WithoutCancel(ctx), stmt); err != nil {
		if cause == nil {
			return err
		}
		return errors.Join(cause, err)
	}
	return cause
}

// ExecCommitBeginQuery sends stmt, COMMIT, BEGIN and query in one batch; the next transaction keeps the
// connection.
func (t *pipelinedTx) ExecCommitBeginQuery(ctx context.Context, stmt string, stmtArgs []any, query string, args []any,
	row func(scan func(...any) error) error) (sqlstore.PipelinedTx, error, error) {
	var batch pgx.Batch
	if stmt != "" {
		batch.Queue(stmt, stmtArgs...)
	}
	batch.Queue("commit")
	batch.Queue("begin")
	batch.Queue(query, args...)
	br := t.c.SendBatch(ctx, &batch)
	var err error
	if stmt != "" {
		_, err = br.Exec()
	}
	if err == nil {
		_, err = br.Exec()
	}
	if err != nil {
		// The server skipped the rest of the batch, COMMIT included: end the transaction.
		br.Close()
		return nil, t.end(ctx, "rollback", explainPooler(err)), nil
	}
	t.done = true // committed: the connection passes to the next transaction
	next := &pipelinedTx{conn: t.conn, c: t.c}
	_, err = br.Exec()
	if err == nil {
		err = readRows(br, row)
	}
	if cerr := br.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return nil, nil, next.end(ctx, "rollback", explainPooler(err))
	}
	return next, nil, nil
}

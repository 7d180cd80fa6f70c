package console

import (
	"context"

	"github.com/postbox-go/postbox"
	"github.com/postbox-go/postbox/partition"
)

// Source is what the console reads and changes in one database's table set. FromClient makes one from a
// *postbox.Client of any transaction type; the interface exists because the client is generic and the console
// serves several databases at once.
type Source interface {
	// Stats counts pending and dead messages per topic.
	Stats(ctx context.Context) (postbox.Stats, error)
	// ListDead, RetryDead and PurgeDead are the client's dead-letter operations.
	ListDead(ctx context.Context, f postbox.DeadFilter) ([]postbox.Record, error)
	RetryDead(ctx context.Context, f postbox.DeadFilter) (int64, error)
	PurgeDead(ctx context.Context, f postbox.DeadFilter) (int64, error)
	// MigrationStatus lists the table set's migrations and whether each is applied.
	MigrationStatus(ctx context.Context) ([]postbox.MigrationState, error)
	// Send enqueues m in a transaction of its own and returns its ID.
	Send(ctx context.Context, m postbox.Message) (string, error)
}

// Database is one named source the console shows.
type Database struct {
	// Name identifies the database on the pages and in the logs; it must be unique within a Config.
	Name string
	// Source reads and changes the database's table set; see FromClient.
	Source Source
}

// FromClient adapts a client to the console's Source. Send enqueues through the client's InTx and Enqueue.
// When the client's tables are partitioned, the source is also a PartitionSource.
func FromClient[TTx any](c *postbox.Client[TTx]) Source {
	s := clientSource[TTx]{c}
	if c.Config().Partitioned {
		if m, err := partition.New(c, nil); err == nil {
			return partitionedSource[TTx]{s, m}
		}
	}
	return s
}

type clientSource[TTx any] struct{ *postbox.Client[TTx] }

func (s clientSource[TTx]) Send(ctx context.Context, m postbox.Message) (string, error) {
	var id string
	err := s.InTx(ctx, func(ctx context.Context, tx TTx) (err error) {
		id, err = s.Enqueue(ctx, tx, m)
		return err
	})
	return id, err
}

type partitionedSource[TTx any] struct {
	clientSource[TTx]
	m *partition.Maintainer
}

func (s partitionedSource[TTx]) Partitions(ctx context.Context) (outbox, inbox []string, err error) {
	o, err := s.m.Partitions(ctx, partition.Outbox)
	if err != nil {
		return nil, nil, err
	}
	i, err := s.m.Partitions(ctx, partition.Inbox)
	if err != nil {
		return nil, nil, err
	}
	return o.Labels, i.Labels, nil
}

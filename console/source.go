package console

import (
	"context"
	"time"

	"github.com/postbox-go/postbox"
	"github.com/postbox-go/postbox/partition"
)

// Source is what the console reads and changes in one database's table set: the operator operations of
// *postbox.Client, whose documentation says what each does. FromClient makes one from a client of any
// transaction type; the interface exists because the client is generic and the console serves several databases
// at once. Calls that change data take the operator's name as actor.
type Source interface {
	Overview(ctx context.Context, limit int64) (postbox.Overview, error)
	MigrationStatus(ctx context.Context) ([]postbox.MigrationState, error)

	ListDead(ctx context.Context, f postbox.DeadFilter) ([]postbox.Record, error)
	CountDead(ctx context.Context, f postbox.DeadFilter, limit int64) (postbox.Count, error)
	RetryDead(ctx context.Context, f postbox.DeadFilter) (int64, error)
	PurgeDead(ctx context.Context, f postbox.DeadFilter) (int64, error)

	FindMessage(ctx context.Context, id string) (postbox.Record, error)
	FindByKey(ctx context.Context, key string, limit int) ([]postbox.Record, error)

	CountReplay(ctx context.Context, f postbox.ReplayFilter, limit int64) (postbox.Count, error)
	ReplayPublished(ctx context.Context, f postbox.ReplayFilter, actor string) (int64, error)
	// ResendEdited enqueues m as a new message, in a transaction of its own, naming originalID in the header
	// postbox.HeaderReplayOf.
	ResendEdited(ctx context.Context, originalID string, m postbox.Message, actor string) (string, error)

	PauseTopic(ctx context.Context, topic, actor string) (bool, error)
	ResumeTopic(ctx context.Context, topic, actor string) (bool, error)

	InboxConsumers(ctx context.Context) ([]string, error)
	InboxView(ctx context.Context, consumer string, since time.Time, limit int) (postbox.InboxView, error)
	RetryInbox(ctx context.Context, consumer, messageID, actor string) (bool, error)
}

// Database is one named source the console shows.
type Database struct {
	// Name identifies the database on the pages and in the logs; it must be unique within a Config. Never put a
	// URL here: the pages show the name.
	Name string
	// Source reads and changes the database's table set; see FromClient.
	Source Source
}

// FromClient adapts a client to the console's Source. When the client's tables are partitioned
// (Config.Partitioned), the source is also a PartitionSource.
func FromClient[TTx any](c *postbox.Client[TTx]) Source {
	if c.Config().Partitioned {
		if m, err := partition.New(c, nil); err == nil {
			return partitionedSource[TTx]{c, m}
		}
	}
	return c
}

type partitionedSource[TTx any] struct {
	*postbox.Client[TTx]
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

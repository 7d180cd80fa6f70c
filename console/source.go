package console

import (
	"context"

	"github.com/postbox-go/postbox"
	"github.com/postbox-go/postbox/partition"
)

// Source is what the console reads and changes in one database's table set: postbox.Operator, the operator
// operations every *postbox.Client has whatever its transaction type, which is why the console can serve several
// databases at once. Calls that change data take the operator's name as actor. FromClient makes one.
type Source = postbox.Operator

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

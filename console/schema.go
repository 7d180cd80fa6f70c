package console

import (
	"context"
	"net/http"
	"sync"

	"github.com/postbox-go/postbox"
)

// PartitionSource is what a Source whose tables are partitioned may add: the partitions of its outbox and inbox,
// oldest first. FromClient's source has it when the client's Config.Partitioned is set.
type PartitionSource interface {
	Partitions(ctx context.Context) (outbox, inbox []string, err error)
}

type schemaDB struct {
	Name        string
	Outbox      string // the outbox table, with its schema when set
	InboxTable  string
	Migrations  []postbox.MigrationState
	Err         string
	Partitioned bool
	OutboxParts []string
	InboxParts  []string
	PartErr     string
}

func (c *Console) schema(w http.ResponseWriter, r *http.Request) {
	out := make([]schemaDB, len(c.names))
	var wg sync.WaitGroup
	for i, name := range c.names {
		wg.Add(1)
		go func() {
			defer wg.Done()
			cfg := c.dbs[name].Config()
			d := schemaDB{Name: name, Outbox: qualified(cfg.Schema, cfg.Table), InboxTable: qualified(cfg.Schema, cfg.InboxTable)}
			ms, err := c.dbs[name].MigrationStatus(r.Context())
			if err != nil {
				d.Err = c.errText(r, err)
			}
			d.Migrations = ms
			if ps, ok := c.dbs[name].(PartitionSource); ok {
				d.Partitioned = true
				d.OutboxParts, d.InboxParts, err = ps.Partitions(r.Context())
				if err != nil {
					d.PartErr = c.errText(r, err)
				}
			}
			out[i] = d
		}()
	}
	wg.Wait()
	c.render(w, r, "schema", "Schema", out)
}

func qualified(schema, table string) string {
	if schema == "" {
		return table
	}
	return schema + "." + table
}

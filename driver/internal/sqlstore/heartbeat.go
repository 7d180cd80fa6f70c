package sqlstore

import (
	"context"
	"time"

	"github.com/postbox-go/postbox/driver"
)

// Heartbeat implements driver.Heartbeater: one upsert by instance.
func (s *store[TTx]) Heartbeat(ctx context.Context, h driver.RelayHeartbeat) error {
	q := "INSERT INTO " + s.relaysTable() + " (instance, started_at, seen_at, version, state) VALUES (" +
		s.d.ph(1) + ", " + s.d.ph(2) + ", " + s.d.ph(3) + ", " + s.d.ph(4) + ", " + s.d.ph(5) + ") " +
		s.d.upsertTail("instance", "seen_at", "version", "state")
	_, err := s.b.Pool().Exec(ctx, q, h.Instance, s.d.timeArg(h.StartedAt), s.d.timeArg(h.SeenAt), h.Version, h.State)
	return err
}

// Heartbeats implements driver.Heartbeater.
func (s *store[TTx]) Heartbeats(ctx context.Context) ([]driver.RelayHeartbeat, error) {
	var out []driver.RelayHeartbeat
	err := s.b.Pool().Query(ctx, "SELECT instance, started_at, seen_at, version, state FROM "+s.relaysTable()+" ORDER BY instance", nil,
		func(scan func(...any) error) error {
			var h driver.RelayHeartbeat
			started, startedDest := s.d.timeDest()
			seen, seenDest := s.d.timeDest()
			if err := scan(&h.Instance, startedDest, seenDest, &h.Version, &h.State); err != nil {
				return err
			}
			h.StartedAt, h.SeenAt = started(), seen()
			out = append(out, h)
			return nil
		})
	return out, err
}

// ForgetHeartbeats implements driver.Heartbeater.
func (s *store[TTx]) ForgetHeartbeats(ctx context.Context, before time.Time) (int64, error) {
	return s.b.Pool().Exec(ctx, "DELETE FROM "+s.relaysTable()+" WHERE seen_at < "+s.d.ph(1), s.d.timeArg(before))
}

func (s *store[TTx]) relaysTable() string {
	return table(s.d, s.n, driver.Derived(s.n.Outbox, "_relays"))
}

package postbox

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"runtime/debug"
	"time"

	"github.com/postbox-go/postbox/driver"
)

// A running relay records a heartbeat in its table set's relays table (migration 5) every HeartbeatInterval: its
// instance, version, totals and health per destination. Client.Relays reads them, so that `postbox status`, the
// console and any other process can tell which relays run, and what is stuck and why, without reaching the
// relays themselves.

// DefaultHeartbeatInterval is how often a relay records its heartbeat by default (RelayConfig.HeartbeatInterval).
const DefaultHeartbeatInterval = 10 * time.Second

// groupHeartbeat is the least heartbeat interval of a relay serving a source of a RelayGroup.
const groupHeartbeat = time.Minute

// goneAfter is how many heartbeat intervals a relay may miss before Client.Relays reports it gone, and
// forgetAfter how long a gone relay's record is kept.
const (
	goneAfter   = 3
	forgetAfter = 24 * time.Hour
)

// RelayStatus is what a relay last recorded of itself.
type RelayStatus struct {
	// Instance names the relay process: RelayConfig.Instance, by default host:pid:random.
	Instance string
	// Version is the version of the postbox module the relay runs, or "(devel)".
	Version string
	// StartedAt is when it started and SeenAt when it last recorded its heartbeat, on its client's clock.
	StartedAt, SeenAt time.Time
	// Gone is true when it missed three heartbeats: it stopped, or cannot reach the database.
	Gone bool
	// Interval is its heartbeat interval.
	Interval time.Duration
	// Published, Failed and Dead are its totals since it started (RelayStats).
	Published, Failed, Dead int64
	// Destinations is its health per destination, as RelayStats.Destinations.
	Destinations []DestinationHealth
	// StalledSince and Waiting are set while it is stalled (RelayStats).
	StalledSince time.Time
	Waiting      []string
}

// heartbeatState is the JSON document of a heartbeat's state column.
type heartbeatState struct {
	Interval     time.Duration       `json:"interval"`
	Published    int64               `json:"published"`
	Failed       int64               `json:"failed"`
	Dead         int64               `json:"dead"`
	Destinations []DestinationHealth `json:"destinations,omitempty"`
	StalledSince time.Time           `json:"stalled_since,omitzero"`
	Waiting      []string            `json:"waiting,omitempty"`
}

// Relays lists the relays that recorded a heartbeat in the client's table set, in instance order, gone ones
// included (RelayStatus.Gone) until a day after they were last seen. It returns an error wrapping
// errors.ErrUnsupported when the store keeps no heartbeats.
func (c *Client[TTx]) Relays(ctx context.Context) ([]RelayStatus, error) {
	hb, ok := c.store.(driver.Heartbeater)
	if !ok {
		return nil, fmt.Errorf("postbox: the %s driver keeps no relay heartbeats: %w", c.drv.Capabilities().Dialect, errors.ErrUnsupported)
	}
	rows, err := hb.Heartbeats(ctx)
	if err != nil {
		return nil, fmt.Errorf("postbox: read the relays' heartbeats (run Migrate for the relays table, migration 5): %w", err)
	}
	now := c.cfg.Clock.Now()
	out := make([]RelayStatus, 0, len(rows))
	for _, row := range rows {
		var st heartbeatState
		if err := json.Unmarshal([]byte(row.State), &st); err != nil {
			st = heartbeatState{} // written by another version: the row's columns still tell who and when
		}
		interval := st.Interval
		if interval <= 0 {
			interval = DefaultHeartbeatInterval
		}
		out = append(out, RelayStatus{Instance: row.Instance, Version: row.Version, StartedAt: row.StartedAt, SeenAt: row.SeenAt,
			Gone: now.Sub(row.SeenAt) > goneAfter*interval, Interval: interval, Published: st.Published, Failed: st.Failed,
			Dead: st.Dead, Destinations: st.Destinations, StalledSince: st.StalledSince, Waiting: st.Waiting})
	}
	return out, nil
}

// heartbeat records the relay's heartbeat every HeartbeatInterval until ctx is done. A store without the relays
// table (migration 5 not run) or a role that may not write it is logged once and tried again at the interval.
func (r *Relay) heartbeat(ctx context.Context) {
	hb, ok := r.client.store.(driver.Heartbeater)
	if !ok || r.cfg.HeartbeatInterval < 0 {
		return
	}
	clock := r.client.cfg.Clock
	started := clock.Now()
	failing := false
	interval := r.cfg.HeartbeatInterval
	if r.pace != nil {
		interval = max(interval, groupHeartbeat) // a group's idle sources must cost little each
	}
	beat := func() {
		s := r.Stats()
		state, err := json.Marshal(heartbeatState{Interval: interval, Published: s.Published, Failed: s.Failed,
			Dead: s.Dead, Destinations: s.Destinations, StalledSince: s.StalledSince, Waiting: s.Waiting})
		if err == nil {
			wctx, cancel := context.WithTimeout(ctx, interval)
			err = hb.Heartbeat(wctx, driver.RelayHeartbeat{Instance: r.cfg.Instance, StartedAt: started, SeenAt: clock.Now(),
				Version: moduleVersion(), State: string(state)})
			cancel()
		}
		switch {
		case err != nil && ctx.Err() != nil:
		case err != nil && !failing:
			failing = true
			r.log.WarnContext(ctx, "cannot record the relay's heartbeat; tools will not see this relay until it can (run Migrate for the relays table, or grant INSERT, UPDATE on it)",
				"err", oneLine(err))
		case err == nil && failing:
			failing = false
			r.log.InfoContext(ctx, "recording the relay's heartbeat again")
		}
	}
	changes := r.deliver.Changes() // before the first beat, so that a change while it is written is seen next
	beat()
	fctx, cancel := context.WithTimeout(ctx, interval)
	if _, err := hb.ForgetHeartbeats(fctx, started.Add(-forgetAfter)); err != nil && !failing && ctx.Err() == nil {
		r.log.DebugContext(ctx, "forgetting gone relays' heartbeats failed", "err", oneLine(err))
	}
	cancel()
	// Beat every interval, and at once (within a second) when a destination changes state or a stall begins or
	// ends, so that tools see an outage while it lasts.
	t := time.NewTicker(min(interval, time.Second))
	defer t.Stop()
	last, stalled := time.Now(), false
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		since, _ := r.stalled()
		if now := r.deliver.Changes(); time.Since(last) >= interval || now != changes || stalled != !since.IsZero() {
			last, changes, stalled = time.Now(), now, !since.IsZero()
			beat()
		}
	}
}

// defaultInstance names a relay process: host:pid:random, the random part telling two relays of one process apart.
func defaultInstance() string {
	host, err := os.Hostname()
	if err != nil || host == "" {
		host = "unknown"
	}
	b := make([]byte, 3)
	_, _ = rand.Read(b)
	return fmt.Sprintf("%s:%d:%s", host, os.Getpid(), hex.EncodeToString(b))
}

// moduleVersion is the version of the postbox module in this binary, or "(devel)".
func moduleVersion() string {
	info, ok := debug.ReadBuildInfo()
	if !ok {
		return "(devel)"
	}
	if info.Main.Path == "github.com/postbox-go/postbox" {
		return info.Main.Version
	}
	for _, m := range info.Deps {
		if m.Path == "github.com/postbox-go/postbox" {
			if m.Replace != nil && m.Replace.Version == "" {
				return "(devel)"
			}
			return m.Version
		}
	}
	return "(devel)"
}

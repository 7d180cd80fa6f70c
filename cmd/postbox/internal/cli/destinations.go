package cli

import (
	"context"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"

	"github.com/postbox-go/postbox"
)

// The relay keeps health per destination (postbox.Destinations: each broker a --route names, and the default
// --broker): one that is down or slow holds back only its own topics. The daemon shows that health in /metrics,
// in /readyz and in its progress lines.

// destinationHelp lists the per-destination series, for relay --help.
const destinationHelp = `  postbox_destination_up{destination}       1 while the destination takes messages, 0 while it is down
  postbox_destination_slow{destination}     1 while its publishes take longer than --slow-publish
  postbox_destination_waiting{destination}  messages held for it during the outage going on now
  postbox_destination_unavailable_seconds_total{destination}  time it has been down
  postbox_relay_stalled                     1 while messages are ready and none was published for --stall-after`

// destinationGauges adds the per-destination series to m, read from stats at each scrape.
func destinationGauges(m *relayMetrics, stats func() postbox.RelayStats) error {
	meter := m.provider.Meter("github.com/postbox-go/postbox/cmd/postbox/destinations")
	up, err := meter.Int64ObservableGauge("postbox.destination.up",
		metric.WithDescription("1 while the destination takes messages, 0 while it is down"))
	if err != nil {
		return err
	}
	slow, err := meter.Int64ObservableGauge("postbox.destination.slow",
		metric.WithDescription("1 while the destination's publishes take longer than --slow-publish"))
	if err != nil {
		return err
	}
	waiting, err := meter.Int64ObservableGauge("postbox.destination.waiting",
		metric.WithDescription("messages held for the destination during the outage going on now"))
	if err != nil {
		return err
	}
	down, err := meter.Float64ObservableCounter("postbox.destination.unavailable", metric.WithUnit("s"),
		metric.WithDescription("time the destination has been down"))
	if err != nil {
		return err
	}
	stalled, err := meter.Int64ObservableGauge("postbox.relay.stalled",
		metric.WithDescription("1 while messages are ready and the relay has published none for --stall-after"))
	if err != nil {
		return err
	}
	_, err = meter.RegisterCallback(func(_ context.Context, o metric.Observer) error {
		s := stats()
		for _, d := range s.Destinations {
			attrs := metric.WithAttributes(attribute.String("destination", destinationName(d.Name)))
			o.ObserveInt64(up, boolInt(d.State != postbox.DestinationDown), attrs)
			o.ObserveInt64(slow, boolInt(d.State == postbox.DestinationSlow), attrs)
			o.ObserveInt64(waiting, int64(d.Waiting), attrs)
			o.ObserveFloat64(down, d.Unavailable.Seconds(), attrs)
		}
		o.ObserveInt64(stalled, boolInt(!s.StalledSince.IsZero()))
		return nil
	}, up, slow, waiting, down, stalled)
	return err
}

func boolInt(b bool) int64 {
	if b {
		return 1
	}
	return 0
}

// destinationName is how the daemon names a destination: its broker URL, redacted, as the router names it.
func destinationName(name string) string {
	if name == "" {
		return "broker"
	}
	return name
}

// destinationState is one destination in /readyz.
type destinationState struct {
	Name    string    `json:"name"`
	State   string    `json:"state"`
	Since   time.Time `json:"since,omitzero"`
	Waiting int       `json:"waiting,omitempty"`
	Topics  []string  `json:"topics,omitempty"`
}

// destinationStates returns the destinations of stats as /readyz shows them, each broker named by its position
// and scheme as the broker checks are (see brokerPingers), never by its URL.
func destinationStates(s postbox.RelayStats, conns []*brokerConn) []destinationState {
	names := map[string]string{}
	for _, p := range brokerPingers(conns) {
		names[p.logName] = p.name
	}
	out := make([]destinationState, 0, len(s.Destinations))
	for _, d := range s.Destinations {
		name, ok := names[d.Name]
		if !ok {
			name = "unrouted topics"
		}
		out = append(out, destinationState{Name: name, State: d.State, Since: d.Since, Waiting: d.Waiting, Topics: d.Topics})
	}
	return out
}

// destinationAttrs are the progress line's words on destinations that are not ok, and on a stall; none when all
// is well.
func destinationAttrs(s postbox.RelayStats) []any {
	var bad []string
	for _, d := range s.Destinations {
		if d.State != postbox.DestinationOK {
			bad = append(bad, fmt.Sprintf("%s %s (%d waiting)", destinationName(d.Name), d.State, d.Waiting))
		}
	}
	var attrs []any
	if len(bad) > 0 {
		attrs = append(attrs, "destinations_not_ok", strings.Join(bad, "; "))
	}
	if !s.StalledSince.IsZero() {
		attrs = append(attrs, "stalled_since", s.StalledSince.UTC().Format(time.RFC3339))
	}
	return attrs
}

// relayStatus is one relay in `postbox status`, from its heartbeat.
type relayStatus struct {
	Instance     string             `json:"instance"`
	Version      string             `json:"version"`
	StartedAt    time.Time          `json:"started_at"`
	SeenAt       time.Time          `json:"seen_at"`
	Gone         bool               `json:"gone"`
	Published    int64              `json:"published"`
	Dead         int64              `json:"dead"`
	StalledSince *time.Time         `json:"stalled_since,omitempty"`
	Destinations []destinationState `json:"destinations"`
}

// relaysStatus reads the relays' heartbeats; a table set without the relays table (or a store that keeps none)
// shows no relays, with a line in the log, since the rest of the status stands.
func relaysStatus(ctx context.Context, rt *runtime, db database, now time.Time) []relayStatus {
	relays, err := db.Relays(ctx)
	if err != nil {
		rt.log.Debug("no relay heartbeats to show", "err", err)
		return nil
	}
	out := make([]relayStatus, 0, len(relays))
	for _, r := range relays {
		s := relayStatus{Instance: r.Instance, Version: r.Version, StartedAt: r.StartedAt.UTC(), SeenAt: r.SeenAt.UTC(), Gone: r.Gone,
			Published: r.Published, Dead: r.Dead, Destinations: []destinationState{}}
		if !r.StalledSince.IsZero() {
			t := r.StalledSince.UTC()
			s.StalledSince = &t
		}
		for _, d := range r.Destinations {
			s.Destinations = append(s.Destinations, destinationState{Name: destinationName(d.Name), State: d.State, Since: d.Since.UTC(),
				Waiting: d.Waiting, Topics: d.Topics})
		}
		out = append(out, s)
	}
	return out
}

// printRelays prints one line per relay, and one per destination of it that is not ok.
func printRelays(w io.Writer, relays []relayStatus) {
	if len(relays) == 0 {
		return
	}
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "\nRELAY\tSTATE\tLAST SEEN\tPUBLISHED")
	for _, r := range relays {
		state := "running"
		switch {
		case r.Gone:
			state = "gone"
		case r.StalledSince != nil:
			state = "stalled since " + r.StalledSince.Format(time.RFC3339)
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%d\n", printable(r.Instance), state, r.SeenAt.Format(time.RFC3339), r.Published)
		for _, d := range r.Destinations {
			if d.State != postbox.DestinationOK {
				fmt.Fprintf(tw, "  destination %s %s since %s, %d waiting: %s\t\t\t\n", printable(d.Name), d.State,
					d.Since.Format(time.RFC3339), d.Waiting, printable(strings.Join(d.Topics, ", ")))
			}
		}
	}
	_ = tw.Flush()
}

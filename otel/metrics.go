package postboxotel

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"

	"github.com/postbox-go/postbox"
)

// Metrics records a relay's batches as OpenTelemetry metrics. Set it as postbox.RelayConfig.Observer. Series:
//
//	postbox.published                     counter    messages the broker acknowledged, by topic
//	postbox.publish.failures              counter    failed publish attempts, by topic
//	postbox.dead                          counter    messages parked as dead, by topic
//	postbox.settle.errors                 counter    batches whose settle failed (they are published again)
//	postbox.enqueue_to_publish.duration   histogram  seconds from enqueue to the broker's acknowledgement
//	postbox.batch.duration                histogram  seconds from a batch's claim to its settle
//	postbox.pending                       gauge      pending messages, by topic (with a stats function)
//	postbox.pending.ready                 gauge      pending messages that are due or waiting to retry, by topic
//	postbox.pending.scheduled             gauge      pending messages whose AvailableAt is still ahead, by topic
//	postbox.dead.current                  gauge      dead messages waiting for an operator, by topic
//	postbox.oldest_pending.age            gauge      seconds the oldest ready message has waited since it was due
//	postbox.outbox.up                     gauge      1 when the stats function answered, 0 when it failed
//	postbox.relay.unavailable             counter    seconds relays spent unable to work (database or broker down),
//	                                                 the outages going on included
//
// Exported to Prometheus (go.opentelemetry.io/otel/exporters/prometheus), the counters get the suffix _total
// and the durations _seconds: postbox_published_total, postbox_batch_duration_seconds,
// postbox_relay_unavailable_seconds_total. The postbox daemon
// serves them on /metrics; see its relay --help for the names it uses.
type Metrics struct {
	published, failures, dead, settleErrors metric.Int64Counter
	latency, batch                          metric.Float64Histogram

	attrs []attribute.KeyValue  // added to every series, such as the source of a relay group
	regs  []metric.Registration // the callbacks Close unregisters

	mu          sync.Mutex
	unavailable time.Duration // ended outages
	down        int           // relays in an outage now
	downSince   time.Duration // the sum of their start times, since epoch
	epoch       time.Time
}

// StatsFunc reads the outbox's counts; (*postbox.Client[TTx]).Stats is one.
type StatsFunc func(ctx context.Context) (postbox.Stats, error)

// MetricsOption changes what NewMetrics records.
type MetricsOption func(*Metrics)

// WithAttributes adds attributes to every series the Metrics records, such as attribute.String("source", name)
// for each source of a postbox.RelayGroup, each source with a Metrics of its own on one MeterProvider.
func WithAttributes(kv ...attribute.KeyValue) MetricsOption {
	return func(m *Metrics) { m.attrs = append(m.attrs, kv...) }
}

// NewMetrics creates the instruments on mp (nil: the global MeterProvider). When stats is not nil, the pending,
// dead, oldest-pending and outbox-up gauges read it at each collection.
func NewMetrics(mp metric.MeterProvider, stats StatsFunc, opts ...MetricsOption) (*Metrics, error) {
	if mp == nil {
		mp = otel.GetMeterProvider()
	}
	meter := mp.Meter(ScopeName)
	m := &Metrics{epoch: time.Now()}
	for _, o := range opts {
		o(m)
	}
	base := metric.WithAttributes(m.attrs...)
	var err error
	counter := func(name, desc string) metric.Int64Counter {
		if err != nil {
			return nil
		}
		var c metric.Int64Counter
		c, err = meter.Int64Counter(name, metric.WithDescription(desc), metric.WithUnit("{message}"))
		return c
	}
	m.published = counter("postbox.published", "Messages the broker acknowledged.")
	m.failures = counter("postbox.publish.failures", "Failed publish attempts.")
	m.dead = counter("postbox.dead", "Messages parked as dead.")
	m.settleErrors = counter("postbox.settle.errors", "Batches whose settle failed; they are published again.")
	if err != nil {
		return nil, err
	}
	// A series that exists from the start lets a rate() or increase() alert see its first settle error.
	m.settleErrors.Add(context.Background(), 0, base)
	unavailable, err := meter.Float64ObservableCounter("postbox.relay.unavailable", metric.WithUnit("s"),
		metric.WithDescription("Time relays spent unable to work, their database or broker down, the outages going on included."))
	if err != nil {
		return nil, err
	}
	reg, err := meter.RegisterCallback(func(_ context.Context, o metric.Observer) error {
		o.ObserveFloat64(unavailable, m.unavailableFor(time.Now()).Seconds(), base)
		return nil
	}, unavailable)
	if err != nil {
		return nil, err
	}
	m.regs = append(m.regs, reg)
	if m.latency, err = meter.Float64Histogram("postbox.enqueue_to_publish.duration", metric.WithUnit("s"),
		metric.WithDescription("Time from enqueue to the broker's acknowledgement."),
		metric.WithExplicitBucketBoundaries(0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 300, 900, 3600)); err != nil {
		return nil, err
	}
	if m.batch, err = meter.Float64Histogram("postbox.batch.duration", metric.WithUnit("s"),
		metric.WithDescription("Time from a batch's claim to its settle."),
		metric.WithExplicitBucketBoundaries(0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10)); err != nil {
		return nil, err
	}
	if stats == nil {
		return m, nil
	}
	pending, err := meter.Int64ObservableGauge("postbox.pending", metric.WithUnit("{message}"),
		metric.WithDescription("Messages waiting to be published."))
	if err != nil {
		return nil, err
	}
	ready, err := meter.Int64ObservableGauge("postbox.pending.ready", metric.WithUnit("{message}"),
		metric.WithDescription("Pending messages that are due, or waiting to retry a failed publish."))
	if err != nil {
		return nil, err
	}
	scheduled, err := meter.Int64ObservableGauge("postbox.pending.scheduled", metric.WithUnit("{message}"),
		metric.WithDescription("Pending messages whose AvailableAt is still ahead: delayed on purpose, not late."))
	if err != nil {
		return nil, err
	}
	deadNow, err := meter.Int64ObservableGauge("postbox.dead.current", metric.WithUnit("{message}"),
		metric.WithDescription("Messages parked as dead, waiting for an operator."))
	if err != nil {
		return nil, err
	}
	oldest, err := meter.Float64ObservableGauge("postbox.oldest_pending.age", metric.WithUnit("s"),
		metric.WithDescription("How long the oldest ready message has waited since it was due; scheduled messages do not count."))
	if err != nil {
		return nil, err
	}
	up, err := meter.Int64ObservableGauge("postbox.outbox.up",
		metric.WithDescription("Whether the last read of the outbox's counts succeeded (1) or failed (0)."))
	if err != nil {
		return nil, err
	}
	reg, err = meter.RegisterCallback(func(ctx context.Context, o metric.Observer) error {
		s, err := stats(ctx)
		if err != nil {
			// The other gauges are left out rather than reported as zero; the error goes to otel.Handle.
			o.ObserveInt64(up, 0, base)
			return fmt.Errorf("postbox: reading the outbox's counts for metrics: %w", err)
		}
		o.ObserveInt64(up, 1, base)
		for _, t := range s.Topics {
			topic := m.topic(t.Topic)
			o.ObserveInt64(pending, t.Pending, topic)
			o.ObserveInt64(ready, t.Ready, topic)
			o.ObserveInt64(scheduled, t.Scheduled, topic)
			o.ObserveInt64(deadNow, t.Dead, topic)
		}
		age := 0.0
		if !s.OldestPending.IsZero() {
			age = time.Since(s.OldestPending).Seconds()
		}
		o.ObserveFloat64(oldest, age, base)
		return nil
	}, pending, ready, scheduled, deadNow, oldest, up)
	if err != nil {
		return nil, err
	}
	m.regs = append(m.regs, reg)
	return m, nil
}

// Close stops the gauges and the unavailable counter from being observed, for a relay that stopped for good,
// such as a source removed from a relay group. The counters keep the totals they reached.
func (m *Metrics) Close() error {
	var errs []error
	for _, r := range m.regs {
		errs = append(errs, r.Unregister())
	}
	m.regs = nil
	return errors.Join(errs...)
}

// topic is the attribute set of a series of one topic.
func (m *Metrics) topic(topic string) metric.MeasurementOption {
	if len(m.attrs) == 0 {
		return metric.WithAttributes(attribute.String("topic", topic))
	}
	return metric.WithAttributes(append(append(make([]attribute.KeyValue, 0, len(m.attrs)+1), m.attrs...),
		attribute.String("topic", topic))...)
}

// ObserveBatch records one batch; it implements postbox.RelayObserver.
func (m *Metrics) ObserveBatch(ctx context.Context, b postbox.BatchReport) {
	base := metric.WithAttributes(m.attrs...)
	m.batch.Record(ctx, b.SettledAt.Sub(b.Started).Seconds(), base)
	if b.Err != nil {
		m.settleErrors.Add(ctx, 1, base)
		return
	}
	for i, r := range b.Records {
		topic := m.topic(r.Topic)
		if b.Errs[i] == nil {
			m.published.Add(ctx, 1, topic)
			m.latency.Record(ctx, b.SettledAt.Sub(r.CreatedAt).Seconds(), topic)
			continue
		}
		if errors.Is(b.Errs[i], postbox.ErrDestinationDown) {
			continue // held for a destination that is down, not tried: no attempt failed
		}
		m.failures.Add(ctx, 1, topic)
		if b.Dead[i] {
			m.dead.Add(ctx, 1, topic)
		}
	}
}

// ObserveOutage counts the time a relay cannot work; it implements postbox.OutageObserver.
func (m *Metrics) ObserveOutage(_ context.Context, o postbox.Outage) {
	m.mu.Lock()
	defer m.mu.Unlock()
	since := o.Since.Sub(m.epoch)
	if o.End.IsZero() {
		m.down++
		m.downSince += since
		return
	}
	if m.down > 0 {
		m.down--
		m.downSince -= since
	}
	m.unavailable += o.End.Sub(o.Since)
}

// unavailableFor returns the time relays spent unable to work until now.
func (m *Metrics) unavailableFor(now time.Time) time.Duration {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.unavailable + time.Duration(m.down)*now.Sub(m.epoch) - m.downSince
}

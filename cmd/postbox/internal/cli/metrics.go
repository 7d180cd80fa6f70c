package cli

import (
	"context"
	"log/slog"
	"net/http"
	"sync"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"go.opentelemetry.io/otel"
	otelprom "go.opentelemetry.io/otel/exporters/prometheus"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"

	"github.com/postbox-go/postbox"
	postboxotel "github.com/postbox-go/postbox/otel"
)

// metricsHelp lists the series /metrics serves, for relay --help.
const metricsHelp = `  postbox_pending{topic}                    messages waiting to be published: ready + scheduled
  postbox_pending_ready{topic}              pending messages that are due, or waiting to retry a failed publish
  postbox_pending_scheduled{topic}          pending messages whose time (send --delay) is still ahead
  postbox_dead{topic}                       messages parked as dead, waiting for an operator
  postbox_oldest_pending_age_seconds        how long the oldest ready message has waited since it was due:
                                            growing, a relay is falling behind (scheduled messages never age it)
  postbox_outbox_up                         1 when the last read of those counts succeeded, 0 when it failed
  postbox_published_total{topic}            messages the broker acknowledged
  postbox_publish_failures_total{topic}     failed publish attempts
  postbox_dead_total{topic}                 messages this relay parked as dead
  postbox_settle_errors_total               batches whose settle failed (they are published again)
  postbox_enqueue_to_publish_seconds{topic} histogram: time from enqueue to the broker's acknowledgement
  postbox_batch_duration_seconds            histogram: time from a batch's claim to its settle
  postbox_relay_unavailable_seconds_total   time the relay spent unable to work (database or broker down)
  go_*, process_*                           the Go runtime and the process`

// relayMetrics are the relay's metrics: the otel module's instruments on an OpenTelemetry meter provider,
// exported in the Prometheus format by OpenTelemetry's Prometheus exporter. The gauges read the outbox's counts
// at each scrape.
type relayMetrics struct {
	provider *sdkmetric.MeterProvider
	observer postbox.RelayObserver
	handler  http.Handler
}

// metricViews keep the daemon's series names: the OpenTelemetry names would become
// postbox_enqueue_to_publish_duration_seconds and postbox_dead_current in Prometheus.
var metricViews = []sdkmetric.View{
	sdkmetric.NewView(sdkmetric.Instrument{Name: "postbox.enqueue_to_publish.duration"}, sdkmetric.Stream{Name: "postbox.enqueue_to_publish"}),
	sdkmetric.NewView(sdkmetric.Instrument{Name: "postbox.dead.current"}, sdkmetric.Stream{Name: "postbox_dead"}),
}

// otelErrors routes OpenTelemetry's errors, such as a failed read of the outbox's counts during a scrape or a failed
// span export, to the log of the relay running in this process, which scrubs secrets. OpenTelemetry has one
// handler per process.
var otelErrors struct {
	once sync.Once
	mu   sync.Mutex
	log  *slog.Logger
}

func logOTelErrors(log *slog.Logger) {
	otelErrors.mu.Lock()
	otelErrors.log = log
	otelErrors.mu.Unlock()
	otelErrors.once.Do(func() {
		otel.SetErrorHandler(otel.ErrorHandlerFunc(func(err error) {
			otelErrors.mu.Lock()
			log := otelErrors.log
			otelErrors.mu.Unlock()
			log.Warn("opentelemetry", "err", err)
		}))
	})
}

func newRelayMetrics(log *slog.Logger, stats postboxotel.StatsFunc) (*relayMetrics, error) {
	m, err := newMeterProvider(log)
	if err != nil {
		return nil, err
	}
	if m.observer, err = postboxotel.NewMetrics(m.provider, stats); err != nil {
		_ = m.provider.Shutdown(context.Background())
		return nil, err
	}
	return m, nil
}

// newMeterProvider returns the relay's meter provider and /metrics handler, without instruments: the relay of
// many sources makes one set per source (see relaySources).
func newMeterProvider(log *slog.Logger) (*relayMetrics, error) {
	logOTelErrors(log)
	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	exp, err := otelprom.New(otelprom.WithRegisterer(reg), otelprom.WithoutTargetInfo(), otelprom.WithoutScopeInfo())
	if err != nil {
		return nil, err
	}
	opts := []sdkmetric.Option{sdkmetric.WithReader(exp)}
	for _, v := range metricViews {
		opts = append(opts, sdkmetric.WithView(v))
	}
	return &relayMetrics{
		provider: sdkmetric.NewMeterProvider(opts...),
		// A scrape during which the outbox cannot be read still serves the relay's own series.
		handler: promhttp.HandlerFor(reg, promhttp.HandlerOpts{ErrorHandling: promhttp.ContinueOnError}),
	}, nil
}

// shutdown stops the meter provider.
func (m *relayMetrics) shutdown(ctx context.Context) error { return m.provider.Shutdown(ctx) }

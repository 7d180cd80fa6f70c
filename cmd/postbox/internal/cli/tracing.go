package cli

import (
	"context"
	"fmt"
	"net/url"
	"strings"

	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	semconv "go.opentelemetry.io/otel/semconv/v1.43.0"

	postboxotel "github.com/postbox-go/postbox/otel"
)

// tracingHelp documents the relay's tracing, for relay --help.
const tracingHelp = `Tracing: with OTEL_EXPORTER_OTLP_ENDPOINT (a base URL; /v1/traces is appended) or
OTEL_EXPORTER_OTLP_TRACES_ENDPOINT (the full URL) set, the relay exports a "send TOPIC" span (kind producer) for
each batch it publishes to a broker, linked to the span that enqueued each message (its traceparent header), over
OTLP/HTTP, and flushes the spans it holds when it stops. OTEL_SERVICE_NAME names the service (default postbox);
OTEL_EXPORTER_OTLP_PROTOCOL may be http/protobuf (the default) or http/json. The other OTEL_EXPORTER_OTLP_*
variables (headers, timeout, compression, certificates), OTEL_RESOURCE_ATTRIBUTES and OTEL_TRACES_SAMPLER apply as
OpenTelemetry specifies them. OTEL_SDK_DISABLED=true or OTEL_TRACES_EXPORTER=none turns tracing off. Without an
endpoint the relay makes no spans.`

// defaultServiceName is the service.name of the relay's spans when OTEL_SERVICE_NAME is not set.
const defaultServiceName = "postbox"

// otlpTracesEndpoint returns the URL the relay exports spans to, following the OpenTelemetry environment
// variable specification, or "" when tracing is off.
func otlpTracesEndpoint(env func(string) string) (string, error) {
	if strings.EqualFold(strings.TrimSpace(env("OTEL_SDK_DISABLED")), "true") {
		return "", nil
	}
	switch exp := strings.TrimSpace(env("OTEL_TRACES_EXPORTER")); exp {
	case "", "otlp":
	case "none":
		return "", nil
	default:
		return "", usageErrorf("OTEL_TRACES_EXPORTER=%s: the relay exports traces with otlp only; set otlp or none", exp)
	}
	name, raw := "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", strings.TrimSpace(env("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT"))
	if raw == "" {
		name, raw = "OTEL_EXPORTER_OTLP_ENDPOINT", strings.TrimSpace(env("OTEL_EXPORTER_OTLP_ENDPOINT"))
		if raw == "" {
			return "", nil
		}
	}
	u, err := url.Parse(raw)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return "", usageErrorf("%s=%s: write an http or https URL, such as http://localhost:4318", name, RedactURL(raw))
	}
	if name == "OTEL_EXPORTER_OTLP_ENDPOINT" {
		// A base URL: the signal's path is appended to whatever path it has.
		u.Path = strings.TrimSuffix(u.Path, "/") + "/v1/traces"
		u.RawPath = ""
	}
	return u.String(), nil
}

// otlpEncoding returns the payload encoding OTEL_EXPORTER_OTLP_TRACES_PROTOCOL or OTEL_EXPORTER_OTLP_PROTOCOL asks
// for.
func otlpEncoding(env func(string) string) (otlptracehttp.Encoding, error) {
	name, v := "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL", strings.TrimSpace(env("OTEL_EXPORTER_OTLP_TRACES_PROTOCOL"))
	if v == "" {
		name, v = "OTEL_EXPORTER_OTLP_PROTOCOL", strings.TrimSpace(env("OTEL_EXPORTER_OTLP_PROTOCOL"))
	}
	switch v {
	case "", "http/protobuf":
		return otlptracehttp.EncodingProtobuf, nil
	case "http/json":
		return otlptracehttp.EncodingJSON, nil
	default:
		return 0, usageErrorf("%s=%s: the relay exports traces over OTLP/HTTP; set http/protobuf or http/json, and point the endpoint at the collector's OTLP/HTTP port (4318)", name, v)
	}
}

// newTracing returns the tracer provider of the relay's spans, exporting over OTLP/HTTP, or nil when no OTLP
// endpoint is configured. Shut it down to flush the spans it holds.
func newTracing(ctx context.Context, rt *runtime) (*sdktrace.TracerProvider, error) {
	endpoint, err := otlpTracesEndpoint(rt.env)
	if endpoint == "" || err != nil {
		return nil, err
	}
	enc, err := otlpEncoding(rt.env)
	if err != nil {
		return nil, err
	}
	rt.secrets.addURL(endpoint)
	for _, name := range []string{"OTEL_EXPORTER_OTLP_HEADERS", "OTEL_EXPORTER_OTLP_TRACES_HEADERS"} {
		for h := range strings.SplitSeq(rt.env(name), ",") {
			if _, v, ok := strings.Cut(h, "="); ok {
				rt.secrets.add(strings.TrimSpace(v))
			}
		}
	}
	logOTelErrors(rt.log)
	exp, err := otlptracehttp.New(ctx, otlptracehttp.WithEndpointURL(endpoint), otlptracehttp.WithEncoding(enc))
	if err != nil {
		return nil, fmt.Errorf("OTLP trace exporter: %w", err)
	}
	// Later options win: OTEL_SERVICE_NAME over OTEL_RESOURCE_ATTRIBUTES' service.name over the default.
	opts := []resource.Option{resource.WithAttributes(semconv.ServiceName(defaultServiceName),
		semconv.ServiceVersion(versionInfo().Version)), resource.WithFromEnv()}
	if name := strings.TrimSpace(rt.env("OTEL_SERVICE_NAME")); name != "" {
		opts = append(opts, resource.WithAttributes(semconv.ServiceName(name)))
	}
	res, err := resource.New(ctx, opts...)
	if err != nil {
		_ = exp.Shutdown(ctx)
		return nil, usageErrorf("OTEL_RESOURCE_ATTRIBUTES: %v; write key=value pairs separated by commas", err)
	}
	rt.log.Info("exporting traces", "endpoint", RedactURL(endpoint))
	return sdktrace.NewTracerProvider(sdktrace.WithBatcher(exp), sdktrace.WithResource(res)), nil
}

// traceBrokers wraps the publisher of every broker of rtr in a send span.
func traceBrokers(rtr *router, tp *sdktrace.TracerProvider) {
	for _, c := range rtr.conns() {
		c.pub = postboxotel.WrapPublisher(c.pub, tp, messagingSystem(c.name))
	}
}

// messagingSystem returns the messaging.system attribute of a broker URL: the semantic conventions' name where
// they have one, otherwise the URL's scheme.
func messagingSystem(brokerURL string) string {
	scheme, _, _ := strings.Cut(brokerURL, ":")
	switch scheme = strings.ToLower(scheme); scheme {
	case "amqp", "amqps":
		return "rabbitmq"
	case "mqtts":
		return "mqtt"
	case "pubsub":
		return "gcp_pubsub"
	case "rediss":
		return "redis"
	case "http", "https":
		return "webhook"
	default:
		return scheme
	}
}

package cli

import (
	"encoding/hex"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	coltracepb "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"
	"google.golang.org/protobuf/proto"
)

// TestRelayExportsSpans: with an OTLP endpoint in the environment, the relay exports a send span for the batch it
// publishes, linked to the producer span named by the message's traceparent, under OTEL_SERVICE_NAME, and flushes
// it when it stops.
func TestRelayExportsSpans(t *testing.T) {
	var (
		mu       sync.Mutex
		paths    []string
		services []string
		spans    []*tracepb.Span
	)
	collector := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, err := io.ReadAll(r.Body)
		var req coltracepb.ExportTraceServiceRequest
		if err == nil {
			err = proto.Unmarshal(body, &req)
		}
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		mu.Lock()
		defer mu.Unlock()
		paths = append(paths, r.Method+" "+r.URL.Path+" "+r.Header.Get("Content-Type"))
		for _, rs := range req.ResourceSpans {
			for _, a := range rs.GetResource().GetAttributes() {
				if a.Key == "service.name" {
					services = append(services, a.GetValue().GetStringValue())
				}
			}
			for _, ss := range rs.ScopeSpans {
				spans = append(spans, ss.Spans...)
			}
		}
		w.Header().Set("Content-Type", "application/x-protobuf")
		out, _ := proto.Marshal(&coltracepb.ExportTraceServiceResponse{})
		_, _ = w.Write(out)
	}))
	defer collector.Close()

	const traceID, producerID = "4bf92f3577b34da6a3ce929d0e0e4736", "00f067aa0ba902b7"
	tg := sqliteTarget(t)
	if r := run(t, nil, tg.args("migrate", "up")...); r.code != 0 {
		t.Fatal(r.stderr)
	}
	if r := run(t, nil, tg.args("send", "-t", "orders.created", "--type", "order.created", "--data", "{}",
		"-H", "traceparent=00-"+traceID+"-"+producerID+"-01")...); r.code != 0 {
		t.Fatal(r.stderr)
	}
	environ := env("OTEL_EXPORTER_OTLP_ENDPOINT", collector.URL, "OTEL_SERVICE_NAME", "orders-relay")
	stdout, _, stop := background(t, environ, tg.args("relay", "--broker", "stdout:", "--poll-interval", "20ms")...)
	eventually(t, "the message published", func() bool { return strings.Count(stdout.String(), "\n") == 1 })
	if r := stop(); r.code != 0 {
		t.Fatalf("relay exit %d: %s", r.code, r.stderr)
	}

	mu.Lock()
	defer mu.Unlock()
	if len(paths) == 0 || paths[0] != "POST /v1/traces application/x-protobuf" {
		t.Fatalf("requests to the collector: %q; want POST /v1/traces with protobuf", paths)
	}
	if len(services) == 0 || services[0] != "orders-relay" {
		t.Errorf("service.name = %q, want orders-relay", services)
	}
	if len(spans) != 1 {
		t.Fatalf("got %d spans, want one send span", len(spans))
	}
	s := spans[0]
	if s.Name != "send orders.created" || s.Kind != tracepb.Span_SPAN_KIND_PRODUCER {
		t.Errorf("span %q kind %v, want \"send orders.created\", producer", s.Name, s.Kind)
	}
	if len(s.Links) != 1 || hex.EncodeToString(s.Links[0].TraceId) != traceID || hex.EncodeToString(s.Links[0].SpanId) != producerID {
		t.Errorf("span links = %v, want one to %s/%s", s.Links, traceID, producerID)
	}
	attrs := map[string]string{}
	for _, a := range s.Attributes {
		attrs[a.Key] = a.GetValue().GetStringValue()
	}
	if attrs["messaging.system"] != "stdout" || attrs["messaging.destination.name"] != "orders.created" {
		t.Errorf("span attributes = %v", attrs)
	}
}

func TestOTLPTracesEndpoint(t *testing.T) {
	for _, c := range []struct {
		env     []string
		want    string
		wantErr string
	}{
		{env: nil, want: ""},
		{env: []string{"OTEL_EXPORTER_OTLP_ENDPOINT", "http://collector:4318"}, want: "http://collector:4318/v1/traces"},
		{env: []string{"OTEL_EXPORTER_OTLP_ENDPOINT", "https://otel.example/base/"}, want: "https://otel.example/base/v1/traces"},
		{env: []string{"OTEL_EXPORTER_OTLP_ENDPOINT", "http://a:4318", "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "http://b:4318/traces"},
			want: "http://b:4318/traces"},
		{env: []string{"OTEL_EXPORTER_OTLP_ENDPOINT", "http://a:4318", "OTEL_SDK_DISABLED", "true"}, want: ""},
		{env: []string{"OTEL_EXPORTER_OTLP_ENDPOINT", "http://a:4318", "OTEL_TRACES_EXPORTER", "none"}, want: ""},
		{env: []string{"OTEL_EXPORTER_OTLP_ENDPOINT", "http://a:4318", "OTEL_TRACES_EXPORTER", "zipkin"}, wantErr: "otlp only"},
		{env: []string{"OTEL_EXPORTER_OTLP_ENDPOINT", "collector:4318"}, wantErr: "write an http or https URL"},
	} {
		got, err := otlpTracesEndpoint(env(c.env...))
		if got != c.want || (err == nil) != (c.wantErr == "") || (err != nil && !strings.Contains(err.Error(), c.wantErr)) {
			t.Errorf("%v: got %q, %v; want %q, error containing %q", c.env, got, err, c.want, c.wantErr)
		}
	}
}

// TestRelayRefusesGRPCExport: an OTLP protocol the relay cannot speak is a usage error naming the variable, before
// anything runs.
func TestRelayRefusesGRPCExport(t *testing.T) {
	tg := sqliteTarget(t)
	r := run(t, env("OTEL_EXPORTER_OTLP_ENDPOINT", "http://127.0.0.1:4317", "OTEL_EXPORTER_OTLP_PROTOCOL", "grpc"),
		tg.args("relay", "--broker", "stdout:")...)
	if r.code != ExitUsage || !strings.Contains(r.stderr, "OTEL_EXPORTER_OTLP_PROTOCOL=grpc") || !strings.Contains(r.stderr, "http/protobuf") {
		t.Fatalf("exit %d: %s", r.code, r.stderr)
	}
}

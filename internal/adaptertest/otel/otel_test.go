package postboxotel_test

import (
	"context"
	"database/sql"
	"errors"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"go.opentelemetry.io/otel/attribute"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"
	"go.uber.org/goleak"
	_ "modernc.org/sqlite"

	"github.com/postbox-go/postbox"
	"github.com/postbox-go/postbox/driver/databasesql"
	postboxotel "github.com/postbox-go/postbox/otel"
	"github.com/postbox-go/postbox/postboxtest"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func newClient(t *testing.T, cfg *postbox.Config) *postbox.Client[*sql.Tx] {
	t.Helper()
	db, err := sql.Open("sqlite", "file:"+filepath.Join(t.TempDir(), "otel.db")+"?_pragma=journal_mode(WAL)&_pragma=busy_timeout(10000)&_txlock=immediate")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	c, err := postbox.NewClient(databasesql.New(db, databasesql.SQLite), cfg)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.Migrate(context.Background()); err != nil {
		t.Fatal(err)
	}
	return c
}

func attr(attrs []attribute.KeyValue, key string) string {
	for _, a := range attrs {
		if string(a.Key) == key {
			return a.Value.String()
		}
	}
	return ""
}

// TestTraceContextFlowsFromEnqueueToConsumer: the span that enqueues is linked from the relay's send span and
// from the consumer's process span.
func TestTraceContextFlowsFromEnqueueToConsumer(t *testing.T) {
	spans := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(spans))
	defer tp.Shutdown(context.Background())
	c := newClient(t, &postbox.Config{OnEnqueue: postboxotel.InjectTraceContext(nil)})

	ctx, producer := tp.Tracer("shop").Start(context.Background(), "place order")
	headers := map[string]string{"source": "web"}
	err := c.InTx(ctx, func(ctx context.Context, tx *sql.Tx) error {
		_, err := c.Enqueue(ctx, tx, postbox.Message{Topic: "orders", Key: "o-1", Type: "order.created", Payload: []byte(`{}`), Headers: headers})
		return err
	})
	producer.End()
	if err != nil {
		t.Fatal(err)
	}
	if len(headers) != 1 {
		t.Fatalf("the hook changed the caller's headers: %v", headers)
	}
	// A message enqueued outside any span gets no traceparent.
	if err := c.InTx(context.Background(), func(ctx context.Context, tx *sql.Tx) error {
		_, err := c.Enqueue(ctx, tx, postbox.Message{Topic: "orders", Type: "order.created"})
		return err
	}); err != nil {
		t.Fatal(err)
	}

	rec := &postboxtest.Recorder{}
	relay, err := postbox.NewRelay(c, postboxotel.WrapPublisher(rec, tp, "test"), nil)
	if err != nil {
		t.Fatal(err)
	}
	if n, err := relay.RunOnce(context.Background()); n != 2 || err != nil {
		t.Fatalf("RunOnce = %d, %v", n, err)
	}
	published := rec.Records()
	if published[0].Headers["traceparent"] == "" || published[0].Headers["source"] != "web" {
		t.Fatalf("published headers %v; want traceparent and source", published[0].Headers)
	}
	if _, has := published[1].Headers["traceparent"]; has {
		t.Fatalf("a message enqueued outside a span carries %v", published[1].Headers)
	}

	_, process := postboxotel.StartProcess(context.Background(), tp, "billing", published[0].Message)
	process.End()

	want := producer.SpanContext()
	linked := func(s sdktrace.ReadOnlySpan) bool {
		for _, l := range s.Links() {
			if l.SpanContext.TraceID() == want.TraceID() && l.SpanContext.SpanID() == want.SpanID() {
				return true
			}
		}
		return false
	}
	var sawSend, sawProcess bool
	for _, s := range spans.Ended() {
		switch s.Name() {
		case "send orders":
			sawSend = true
			if s.SpanKind() != trace.SpanKindProducer || !linked(s) || len(s.Links()) != 1 ||
				attr(s.Attributes(), "messaging.system") != "test" || attr(s.Attributes(), "messaging.batch.message_count") != "2" {
				t.Errorf("send span: kind %v, links %v, attributes %v", s.SpanKind(), s.Links(), s.Attributes())
			}
		case "process orders":
			sawProcess = true
			if s.SpanKind() != trace.SpanKindConsumer || !linked(s) || attr(s.Attributes(), "messaging.operation.type") != "process" ||
				attr(s.Attributes(), "messaging.message.id") != published[0].ID || attr(s.Attributes(), "messaging.consumer.group.name") != "billing" {
				t.Errorf("process span: kind %v, links %v, attributes %v", s.SpanKind(), s.Links(), s.Attributes())
			}
		}
	}
	if !sawSend || !sawProcess {
		t.Fatalf("spans %v; want send orders and process orders", spans.Ended())
	}
}

func TestSendSpanRecordsFailures(t *testing.T) {
	spans := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(spans))
	defer tp.Shutdown(context.Background())
	pub := postboxotel.WrapPublisher(postbox.PublisherFunc(func(context.Context, []postbox.Record) error {
		return &postbox.BatchError{Errs: []error{nil, errors.New("nack")}}
	}), tp, "test")
	err := pub.Publish(context.Background(), []postbox.Record{{Message: postbox.Message{Topic: "a"}}, {Message: postbox.Message{Topic: "b"}}})
	if err == nil {
		t.Fatal("the wrapper hid the publisher's error")
	}
	s := spans.Ended()[0]
	if s.Name() != "send" || s.Status().Description != "1 of 2 messages failed" {
		t.Fatalf("span %q status %+v", s.Name(), s.Status())
	}
}

func TestMetrics(t *testing.T) {
	c := newClient(t, nil)
	reader := sdkmetric.NewManualReader()
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))
	defer mp.Shutdown(context.Background())
	m, err := postboxotel.NewMetrics(mp, c.Stats)
	if err != nil {
		t.Fatal(err)
	}
	err = c.InTx(context.Background(), func(ctx context.Context, tx *sql.Tx) error {
		return c.EnqueueBatch(ctx, tx, []postbox.Message{
			{Topic: "orders", Type: "a"}, {Topic: "orders", Type: "a"}, {Topic: "orders", Type: "bad"}, {Topic: "later", Type: "a"},
		})
	})
	if err != nil {
		t.Fatal(err)
	}
	rec := &postboxtest.Recorder{Fail: func(r postbox.Record) error {
		switch r.Type {
		case "bad":
			return postbox.Permanent(errors.New("rejected"))
		}
		if r.Topic == "later" {
			return errors.New("broker busy")
		}
		return nil
	}}
	relay, err := postbox.NewRelay(c, rec, &postbox.RelayConfig{Observer: m})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := relay.RunOnce(context.Background()); err != nil {
		t.Fatal(err)
	}
	var rm metricdata.ResourceMetrics
	if err := reader.Collect(context.Background(), &rm); err != nil {
		t.Fatal(err)
	}
	sums := map[string]int64{}
	var latencyCount uint64
	var batches uint64
	var pending, up int64
	oldestAge := -1.0
	for _, sm := range rm.ScopeMetrics {
		for _, mt := range sm.Metrics {
			switch d := mt.Data.(type) {
			case metricdata.Sum[int64]:
				for _, p := range d.DataPoints {
					sums[mt.Name] += p.Value
				}
			case metricdata.Histogram[float64]:
				for _, p := range d.DataPoints {
					if mt.Name == "postbox.enqueue_to_publish.duration" {
						latencyCount += p.Count
					} else {
						batches += p.Count
					}
				}
			case metricdata.Gauge[int64]:
				for _, p := range d.DataPoints {
					switch mt.Name {
					case "postbox.pending":
						pending += p.Value
					case "postbox.outbox.up":
						up = p.Value
					}
				}
			case metricdata.Gauge[float64]:
				for _, p := range d.DataPoints {
					if mt.Name == "postbox.oldest_pending.age" {
						oldestAge = p.Value
					}
				}
			}
		}
	}
	if sums["postbox.published"] != 2 || sums["postbox.publish.failures"] != 2 || sums["postbox.dead"] != 1 ||
		latencyCount != 2 || batches != 1 || pending != 1 || up != 1 {
		t.Fatalf("sums %v, latency count %d, batches %d, pending %d, up %d", sums, latencyCount, batches, pending, up)
	}
	// The "later" message is still pending, waiting for its retry, so the oldest pending message has an age.
	if oldestAge <= 0 || oldestAge > 60 {
		t.Errorf("postbox.oldest_pending.age = %v s while a message is pending; want a few milliseconds", oldestAge)
	}
	if _, ok := sums["postbox.settle.errors"]; !ok {
		t.Error("postbox.settle.errors is not reported before its first error")
	}
}

// TestMetricsOutboxDown: when the outbox's counts cannot be read, postbox.outbox.up is 0 and the other gauges are
// left out, not reported as zero.
func TestMetricsOutboxDown(t *testing.T) {
	reader := sdkmetric.NewManualReader()
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))
	defer mp.Shutdown(context.Background())
	failing := func(context.Context) (postbox.Stats, error) { return postbox.Stats{}, errors.New("database down") }
	if _, err := postboxotel.NewMetrics(mp, failing); err != nil {
		t.Fatal(err)
	}
	var rm metricdata.ResourceMetrics
	if err := reader.Collect(context.Background(), &rm); err == nil || !strings.Contains(err.Error(), "database down") {
		t.Errorf("Collect = %v; want the stats error", err)
	}
	gauges := map[string][]int64{}
	for _, sm := range rm.ScopeMetrics {
		for _, mt := range sm.Metrics {
			if d, ok := mt.Data.(metricdata.Gauge[int64]); ok {
				for _, p := range d.DataPoints {
					gauges[mt.Name] = append(gauges[mt.Name], p.Value)
				}
			}
		}
	}
	if len(gauges) != 1 || len(gauges["postbox.outbox.up"]) != 1 || gauges["postbox.outbox.up"][0] != 0 {
		t.Fatalf("gauges %v; want only postbox.outbox.up = 0", gauges)
	}
}

// TestMetricsUnavailable: postbox.relay.unavailable counts the time relays spent unable to work, the outage going
// on included, so that an alert sees a relay that has been down for a while before it resumes.
func TestMetricsUnavailable(t *testing.T) {
	reader := sdkmetric.NewManualReader()
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))
	defer mp.Shutdown(context.Background())
	m, err := postboxotel.NewMetrics(mp, nil)
	if err != nil {
		t.Fatal(err)
	}
	unavailable := func() float64 {
		t.Helper()
		var rm metricdata.ResourceMetrics
		if err := reader.Collect(context.Background(), &rm); err != nil {
			t.Fatal(err)
		}
		for _, sm := range rm.ScopeMetrics {
			for _, mt := range sm.Metrics {
				if d, ok := mt.Data.(metricdata.Sum[float64]); ok && mt.Name == "postbox.relay.unavailable" {
					return d.DataPoints[0].Value
				}
			}
		}
		t.Fatal("no postbox.relay.unavailable series")
		return 0
	}
	if got := unavailable(); got != 0 {
		t.Fatalf("postbox.relay.unavailable = %v before any outage, want 0", got)
	}
	ctx := context.Background()
	start := time.Now().Add(-time.Minute)
	m.ObserveOutage(ctx, postbox.Outage{Since: start.Add(-10 * time.Second), End: start, Cause: "broker"})
	m.ObserveOutage(ctx, postbox.Outage{Since: start, Cause: "database", Err: errors.New("connection refused")})
	if got := unavailable(); got < 70 || got > 80 {
		t.Fatalf("postbox.relay.unavailable = %v s with a 10 s outage over and one of a minute going on, want about 70", got)
	}
	m.ObserveOutage(ctx, postbox.Outage{Since: start, End: start.Add(30 * time.Second), Cause: "database"})
	if got := unavailable(); got != 40 {
		t.Fatalf("postbox.relay.unavailable = %v s after outages of 10 s and 30 s, want 40", got)
	}
}

// TestMetricsHeldIsNoFailure: a message held for a destination that is down was not tried, so it counts no
// failed publish attempt; one its destination refused does.
func TestMetricsHeldIsNoFailure(t *testing.T) {
	reader := sdkmetric.NewManualReader()
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))
	defer mp.Shutdown(context.Background())
	m, err := postboxotel.NewMetrics(mp, nil)
	if err != nil {
		t.Fatal(err)
	}
	recs := []postbox.Record{{Message: postbox.Message{ID: postbox.NewID(), Topic: "stock"}}, {Message: postbox.Message{ID: postbox.NewID(), Topic: "stock"}}}
	m.ObserveBatch(context.Background(), postbox.BatchReport{Records: recs, Errs: []error{postbox.ErrDestinationDown,
		postbox.Unavailable(errors.New("connection refused"))}, Dead: []bool{false, false}})
	var rm metricdata.ResourceMetrics
	if err := reader.Collect(context.Background(), &rm); err != nil {
		t.Fatal(err)
	}
	var failures int64
	for _, sm := range rm.ScopeMetrics {
		for _, mt := range sm.Metrics {
			if d, ok := mt.Data.(metricdata.Sum[int64]); ok && mt.Name == "postbox.publish.failures" {
				for _, p := range d.DataPoints {
					failures += p.Value
				}
			}
		}
	}
	if failures != 1 {
		t.Errorf("postbox.publish.failures = %d, want 1: the held message was not tried", failures)
	}
}

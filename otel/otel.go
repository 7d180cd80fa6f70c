// Package postboxotel connects Postbox to OpenTelemetry, in a module of its own so that the core stays free of
// dependencies.
//
// Tracing follows a message from the span that enqueues it to the span that processes it. InjectTraceContext,
// set as postbox.Config.OnEnqueue, stores the enqueuing span's traceparent (and tracestate) in the message's
// headers, which every broker adapter carries. WrapPublisher wraps the relay's publisher in a "send" span per
// batch, linked to each message's producer span. StartProcess, or WrapHandler around a consumer's
// postbox.Handler, starts the consumer's "process" span, linked to the producer span too. Spans follow the
// OpenTelemetry messaging semantic conventions.
//
//	client, err := postbox.NewClient(drv, &postbox.Config{OnEnqueue: postboxotel.InjectTraceContext(nil)})
//	relay, err := postbox.NewRelay(client, postboxotel.WrapPublisher(pub, nil, "nats"), nil)
//	// in the consumer:
//	ctx, span := postboxotel.StartProcess(ctx, nil, "billing", msg)
//	defer span.End()
//
// Metrics: NewMetrics returns a postbox.RelayObserver recording published messages, publish failures, dead
// messages, enqueue-to-publish latency and batch duration, and observing pending, dead and the oldest pending
// age from the outbox, through any OpenTelemetry MeterProvider (with the Prometheus exporter, for example).
package postboxotel

import (
	"context"
	"errors"
	"fmt"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"

	"github.com/postbox-go/postbox"
)

// ScopeName is the instrumentation scope of Postbox's spans and metrics.
const ScopeName = "github.com/postbox-go/postbox/otel"

// Attribute keys of the messaging semantic conventions.
const (
	attrSystem        = attribute.Key("messaging.system")
	attrOperationName = attribute.Key("messaging.operation.name")
	attrOperationType = attribute.Key("messaging.operation.type")
	attrDestination   = attribute.Key("messaging.destination.name")
	attrMessageID     = attribute.Key("messaging.message.id")
	attrBatchCount    = attribute.Key("messaging.batch.message_count")
	attrConsumerGroup = attribute.Key("messaging.consumer.group.name")
	attrMessageKey    = attribute.Key("messaging.message.key") // the message's Key; brokers name it differently
	attrEventType     = attribute.Key("cloudevents.event_type")
)

// defaultPropagator carries W3C trace context. It is used instead of the global propagator, which is a no-op
// until an application sets one, because a traceparent silently missing from every message is worse than one
// the application did not ask for.
var defaultPropagator propagation.TextMapPropagator = propagation.TraceContext{}

func propagatorOr(p propagation.TextMapPropagator) propagation.TextMapPropagator {
	if p == nil {
		return defaultPropagator
	}
	return p
}

func tracerOr(tp trace.TracerProvider) trace.Tracer {
	if tp == nil {
		tp = otel.GetTracerProvider()
	}
	return tp.Tracer(ScopeName)
}

// headerCarrier adapts message headers to a TextMapCarrier.
type headerCarrier map[string]string

func (h headerCarrier) Get(key string) string { return h[key] }
func (h headerCarrier) Set(key, value string) { h[key] = value }
func (h headerCarrier) Keys() []string {
	out := make([]string, 0, len(h))
	for k := range h {
		out = append(out, k)
	}
	return out
}

// InjectTraceContext returns a postbox.Config.OnEnqueue hook that writes the trace context of the enqueuing
// context (traceparent, tracestate) into each message's headers. p nil means W3C trace context. A message that
// already has a traceparent keeps it.
func InjectTraceContext(p propagation.TextMapPropagator) func(ctx context.Context, m *postbox.Message) {
	p = propagatorOr(p)
	return func(ctx context.Context, m *postbox.Message) {
		if _, set := m.Headers["traceparent"]; set || !trace.SpanContextFromContext(ctx).IsValid() {
			return
		}
		p.Inject(ctx, headerCarrier(m.Headers))
	}
}

// ProducerContext returns the span context of the span that enqueued m, from its headers; it is invalid when m
// carries none.
func ProducerContext(m postbox.Message, p propagation.TextMapPropagator) trace.SpanContext {
	if len(m.Headers) == 0 {
		return trace.SpanContext{}
	}
	return trace.SpanContextFromContext(propagatorOr(p).Extract(context.Background(), headerCarrier(m.Headers)))
}

// WrapPublisher returns a publisher that runs pub inside a "send" span (kind producer) per batch, with a link to
// the producer span of each message that has one. system is the messaging.system attribute ("nats", "kafka",
// "rabbitmq"...). tp nil means the global TracerProvider.
func WrapPublisher(pub postbox.Publisher, tp trace.TracerProvider, system string) postbox.Publisher {
	return &tracedPublisher{pub: pub, tracer: tracerOr(tp), system: system}
}

type tracedPublisher struct {
	pub    postbox.Publisher
	tracer trace.Tracer
	system string
}

func (t *tracedPublisher) Publish(ctx context.Context, batch []postbox.Record) error {
	name, topic := "send", ""
	for i, r := range batch {
		if i == 0 {
			topic = r.Topic
		} else if r.Topic != topic {
			topic = ""
			break
		}
	}
	attrs := []attribute.KeyValue{attrSystem.String(t.system), attrOperationName.String("send"),
		attrOperationType.String("send"), attrBatchCount.Int(len(batch))}
	if topic != "" {
		name = "send " + topic
		attrs = append(attrs, attrDestination.String(topic))
	}
	if len(batch) == 1 {
		attrs = append(attrs, attrMessageID.String(batch[0].ID))
	}
	var links []trace.Link
	for _, r := range batch {
		if sc := ProducerContext(r.Message, nil); sc.IsValid() {
			links = append(links, trace.Link{SpanContext: sc, Attributes: []attribute.KeyValue{attrMessageID.String(r.ID)}})
		}
	}
	ctx, span := t.tracer.Start(ctx, name, trace.WithSpanKind(trace.SpanKindProducer), trace.WithAttributes(attrs...),
		trace.WithLinks(links...))
	defer span.End()
	err := t.pub.Publish(ctx, batch)
	if err != nil {
		var be *postbox.BatchError
		failed := len(batch)
		if errors.As(err, &be) {
			failed = 0
			for _, e := range be.Errs {
				if e != nil {
					failed++
				}
			}
		}
		span.RecordError(err)
		span.SetStatus(codes.Error, fmt.Sprintf("%d of %d messages failed", failed, len(batch)))
	}
	return err
}

// StartProcess starts the span in which a consumer processes m: a "process" span (kind consumer), child of ctx's
// span, linked to the span that enqueued m. consumer is the consumer's name (messaging.consumer.group.name). tp
// nil means the global TracerProvider. End the span when processing is done.
func StartProcess(ctx context.Context, tp trace.TracerProvider, consumer string, m postbox.Message) (context.Context, trace.Span) {
	attrs := []attribute.KeyValue{attrOperationName.String("process"), attrOperationType.String("process"),
		attrDestination.String(m.Topic), attrMessageID.String(m.ID), attrConsumerGroup.String(consumer),
		attrEventType.String(m.Type)}
	if m.Key != "" {
		attrs = append(attrs, attrMessageKey.String(m.Key))
	}
	opts := []trace.SpanStartOption{trace.WithSpanKind(trace.SpanKindConsumer), trace.WithAttributes(attrs...)}
	if sc := ProducerContext(m, nil); sc.IsValid() {
		opts = append(opts, trace.WithLinks(trace.Link{SpanContext: sc}))
	}
	return tracerOr(tp).Start(ctx, "process "+m.Topic, opts...)
}

// WrapHandler returns a postbox.Handler that runs h inside a StartProcess span, linked to the message's producer
// span, and records h's error on it. Give it to postbox.Process, Consumer.Process or broker.Consume. The span
// covers the handler inside the delivery's transaction: a duplicate, which never reaches the handler, has none.
//
//	err := broker.Consume(ctx, sub, consumer, postboxotel.WrapHandler(nil, "billing", handle), nil)
func WrapHandler[TTx any](tp trace.TracerProvider, consumer string, h postbox.Handler[TTx]) postbox.Handler[TTx] {
	return func(ctx context.Context, tx TTx, m postbox.Message) ([]postbox.Message, error) {
		ctx, span := StartProcess(ctx, tp, consumer, m)
		defer span.End()
		out, err := h(ctx, tx, m)
		if err != nil {
			span.RecordError(err)
			span.SetStatus(codes.Error, err.Error())
		}
		return out, err
	}
}

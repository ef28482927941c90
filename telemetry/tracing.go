package telemetry

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracegrpc"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"
)

// instrumentation is the name oncejob's own spans are made under.
const instrumentation = "github.com/oncejob/oncejob"

// StartTracing sets the process's tracer provider from the standard
// OpenTelemetry variables, and the W3C trace-context propagator whatever
// they say. Tracing is off unless they ask for it: OTEL_TRACES_EXPORTER=otlp,
// or, with OTEL_TRACES_EXPORTER unset, OTEL_EXPORTER_OTLP_ENDPOINT or
// OTEL_EXPORTER_OTLP_TRACES_ENDPOINT set. Off, spans are no-ops and nothing
// is exported. On, spans go through a batch processor (OTEL_BSP_*) to an
// OTLP exporter speaking OTEL_EXPORTER_OTLP_[TRACES_]PROTOCOL: http/protobuf
// (the default) or grpc, configured by the exporter's own OTEL_EXPORTER_OTLP_*
// variables. The sampler is OTEL_TRACES_SAMPLER's (default parent-based,
// always on); the resource is service.name = service unless OTEL_SERVICE_NAME
// or OTEL_RESOURCE_ATTRIBUTES say otherwise.
//
// stop flushes what is buffered and shuts the exporter down; call it before
// the process exits.
func StartTracing(ctx context.Context, service string) (stop func(context.Context) error, enabled bool, err error) {
	otel.SetTextMapPropagator(propagation.NewCompositeTextMapPropagator(propagation.TraceContext{}, propagation.Baggage{}))
	noop := func(context.Context) error { return nil }
	if !tracingRequested() {
		return noop, false, nil
	}
	exporter, err := newExporter(ctx)
	if err != nil {
		return nil, false, err
	}
	res, err := resource.New(ctx,
		resource.WithAttributes(attribute.String("service.name", service)),
		resource.WithTelemetrySDK(),
		resource.WithFromEnv(), // OTEL_SERVICE_NAME and OTEL_RESOURCE_ATTRIBUTES win
	)
	if err != nil && !errors.Is(err, resource.ErrPartialResource) {
		return nil, false, fmt.Errorf("tracing: resource: %w", err)
	}
	tp := sdktrace.NewTracerProvider(sdktrace.WithBatcher(exporter), sdktrace.WithResource(res))
	otel.SetTracerProvider(tp)
	return tp.Shutdown, true, nil
}

func tracingRequested() bool {
	if strings.EqualFold(os.Getenv("OTEL_SDK_DISABLED"), "true") {
		return false
	}
	switch exp := strings.TrimSpace(os.Getenv("OTEL_TRACES_EXPORTER")); exp {
	case "":
		return os.Getenv("OTEL_EXPORTER_OTLP_ENDPOINT") != "" || os.Getenv("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT") != ""
	case "none":
		return false
	default:
		return true // newExporter refuses what it does not speak
	}
}

func newExporter(ctx context.Context) (sdktrace.SpanExporter, error) {
	if exp := strings.TrimSpace(os.Getenv("OTEL_TRACES_EXPORTER")); exp != "" && exp != "otlp" {
		return nil, fmt.Errorf("tracing: OTEL_TRACES_EXPORTER=%q: oncejob exports otlp or none", exp)
	}
	protocol := os.Getenv("OTEL_EXPORTER_OTLP_TRACES_PROTOCOL")
	if protocol == "" {
		protocol = os.Getenv("OTEL_EXPORTER_OTLP_PROTOCOL")
	}
	switch protocol {
	case "", "http/protobuf":
		return otlptracehttp.New(ctx)
	case "grpc":
		return otlptracegrpc.New(ctx)
	default:
		return nil, fmt.Errorf("tracing: OTLP protocol %q: oncejob speaks http/protobuf or grpc", protocol)
	}
}

// tracer is oncejob's tracer from the process's provider: a no-op one until
// StartTracing enables tracing.
func tracer() trace.Tracer { return otel.Tracer(instrumentation) }

// Traceparent returns the W3C traceparent of ctx's span, or "" when ctx
// carries no sampled span: what the server keeps on a job it creates.
func Traceparent(ctx context.Context) string {
	if !trace.SpanContextFromContext(ctx).IsSampled() {
		return ""
	}
	carrier := propagation.MapCarrier{}
	propagation.TraceContext{}.Inject(ctx, carrier)
	return carrier.Get("traceparent")
}

// withTraceparent returns ctx with the remote span context of traceparent,
// so spans started from it join that trace; ctx as it is when traceparent is
// empty or malformed.
func withTraceparent(ctx context.Context, traceparent string) context.Context {
	if traceparent == "" {
		return ctx
	}
	return propagation.TraceContext{}.Extract(ctx, propagation.MapCarrier{"traceparent": traceparent})
}

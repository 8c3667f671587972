// Package telemetry wires Fathom's OpenTelemetry tracer and meter providers.
//
// A node calls [Setup] once at start and [Providers.Shutdown] when it stops. The exporter is
// chosen by configuration: "none" (the default: providers exist, spans carry valid ids and
// propagate, nothing is exported), "stdout" (JSON lines to a writer, for local debugging) or
// "otlp" (OTLP to a collector). The standard variables win per signal: OTEL_TRACES_EXPORTER and
// OTEL_METRICS_EXPORTER (otlp, console, none), OTEL_EXPORTER_OTLP_PROTOCOL (http/protobuf or
// grpc), OTEL_EXPORTER_OTLP_ENDPOINT / _HEADERS (read by the exporters), OTEL_TRACES_SAMPLER /
// _ARG (checked here, applied by the SDK), OTEL_SERVICE_NAME / OTEL_RESOURCE_ATTRIBUTES
// (env.go). Whatever the exporter, every metric is also served in
// the Prometheus text format by [Providers.MetricsHandler] (the gateway's GET /metrics and
// `--metrics-listen`): a Prometheus scrape needs no collector. Providers are passed explicitly to the packages
// that need them; Setup also installs them as the otel globals so third-party
// instrumentation (Proto.Actor's actor metrics) records into the same pipeline.
package telemetry

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"strings"
	"time"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	otelprom "go.opentelemetry.io/otel/exporters/prometheus"
	"go.opentelemetry.io/otel/metric"
	metricnoop "go.opentelemetry.io/otel/metric/noop"
	"go.opentelemetry.io/otel/propagation"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"
	tracenoop "go.opentelemetry.io/otel/trace/noop"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// Exporter names accepted by [Config.Exporter].
const (
	ExporterNone   = "none"
	ExporterStdout = "stdout"
	ExporterOTLP   = "otlp"
)

// Config selects where telemetry goes.
type Config struct {
	// Exporter is "none" (default when empty), "stdout" or "otlp", for traces and metrics;
	// OTEL_TRACES_EXPORTER / OTEL_METRICS_EXPORTER, when set, win for their signal.
	Exporter string
	// OTLPEndpoint is the collector's OTLP/HTTP base URL (e.g. http://127.0.0.1:4318) for
	// the otlp exporter.
	OTLPEndpoint string
	// ServiceName is the service.name resource attribute (default "fathom"). The environment's
	// OTEL_SERVICE_NAME (or service.name in OTEL_RESOURCE_ATTRIBUTES) overrides it.
	ServiceName string
	// Writer receives stdout-exporter output (default os.Stderr, so it never mixes with a
	// command's own output).
	Writer io.Writer
	// MetricInterval is how often metrics are exported (default 30s).
	MetricInterval time.Duration
	// SpanExporter, when set, receives every finished span in addition to the configured
	// exporter (synchronously). Tests use an in-memory exporter to assert spans.
	SpanExporter sdktrace.SpanExporter
	// ExtraAttributes are added to the resource (the node sets fathom.node.address when
	// its remoting address is known before it starts). They win over the defaults
	// (service.instance.id, a random UUID per Setup).
	ExtraAttributes []attribute.KeyValue
	// Disabled turns tracing and metrics off: the providers are no-ops (spans carry no
	// ids, nothing propagates, GET /metrics serves an empty page) and the otel globals
	// are left alone. Benchmarks use it to measure what telemetry costs.
	Disabled bool
}

// Validate reports configuration errors.
func (c Config) Validate() error {
	switch c.Exporter {
	case "", ExporterNone, ExporterStdout:
	case ExporterOTLP:
		if c.OTLPEndpoint == "" {
			return errors.New("telemetry: the otlp exporter needs an endpoint (--otel-endpoint or OTEL_EXPORTER_OTLP_ENDPOINT)")
		}
		u, err := url.Parse(c.OTLPEndpoint)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			return fmt.Errorf("telemetry: otlp endpoint %q must be an http(s) URL such as http://127.0.0.1:4318", c.OTLPEndpoint)
		}
	default:
		return fmt.Errorf("telemetry: unknown exporter %q (want none, stdout or otlp)", c.Exporter)
	}
	if c.MetricInterval < 0 {
		return errors.New("telemetry: metric interval must not be negative")
	}
	return nil
}

// Providers are the tracer and meter providers of one node.
type Providers struct {
	// TracerProvider creates the node's tracers.
	TracerProvider trace.TracerProvider
	// MeterProvider creates the node's meters.
	MeterProvider metric.MeterProvider

	metrics  http.Handler
	shutdown []func(context.Context) error
	// pushesMetrics is set when a metric exporter (otlp, console) is configured.
	pushesMetrics bool
	// rootSampler decides the root spans (RootSampled); nil (Disabled): none is sampled.
	rootSampler sdktrace.Sampler
}

// RootSampled reports whether the sampler records a root span of trace tid. A trace
// whose spans are started under a remote parent made up from known ids (a session's,
// which outlives any span object) puts this decision in that parent's flags, so every
// span follows the root: with parentbased_traceidratio and ratio 0 none is exported,
// with ratio 1 all are. Without telemetry (Disabled) it reports false.
func (p *Providers) RootSampled(tid trace.TraceID) bool {
	if p == nil || p.rootSampler == nil {
		return false
	}
	return p.rootSampler.ShouldSample(sdktrace.SamplingParameters{ParentContext: context.Background(), TraceID: tid}).Decision == sdktrace.RecordAndSample
}

// PushesMetrics reports whether metrics are exported somewhere (OTLP, console) besides
// GET /metrics: the node then also records Proto.Actor's per-message actor metrics,
// which cost several microseconds per message.
func (p *Providers) PushesMetrics() bool { return p.pushesMetrics }

// MetricsHandler serves the node's metrics in the Prometheus text exposition format
// (instrument names with dots become underscores; counters get _total, durations in
// seconds get _seconds).
func (p *Providers) MetricsHandler() http.Handler { return p.metrics }

// Setup builds the providers for cfg and installs them as the otel globals.
func Setup(ctx context.Context, cfg Config) (*Providers, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	// OTEL_SDK_DISABLED=true is the standard switch that turns an OpenTelemetry SDK off.
	if cfg.Disabled || strings.EqualFold(strings.TrimSpace(os.Getenv("OTEL_SDK_DISABLED")), "true") {
		return &Providers{
			TracerProvider: tracenoop.NewTracerProvider(),
			MeterProvider:  metricnoop.NewMeterProvider(),
			metrics:        promhttp.HandlerFor(prometheus.NewRegistry(), promhttp.HandlerOpts{}),
		}, nil
	}
	if cfg.ServiceName == "" {
		cfg.ServiceName = "fathom"
	}
	if cfg.Writer == nil {
		cfg.Writer = os.Stderr
	}
	if cfg.MetricInterval == 0 && os.Getenv("OTEL_METRIC_EXPORT_INTERVAL") == "" {
		cfg.MetricInterval = 30 * time.Second
	}
	traces, err := resolveSignal(cfg, "traces", EnvTracesExporter)
	if err != nil {
		return nil, err
	}
	metrics, err := resolveSignal(cfg, "metrics", EnvMetricsExporter, "prometheus")
	if err != nil {
		return nil, err
	}
	sampler, rootSampler, err := envSampler()
	if err != nil {
		return nil, err
	}
	// service.instance.id tells this node's metrics and spans from every other node's of
	// the same service (OTEL_RESOURCE_ATTRIBUTES may set it, as any attribute).
	res, err := resource.Merge(resource.Default(), resource.NewSchemaless(
		append([]attribute.KeyValue{attribute.String("service.name", cfg.ServiceName), attribute.String("service.instance.id", newInstanceID())}, cfg.ExtraAttributes...)...))
	if err != nil {
		return nil, fmt.Errorf("telemetry resource: %w", err)
	}
	// The standard variables (OTEL_SERVICE_NAME, OTEL_RESOURCE_ATTRIBUTES) win over the built-in defaults, as
	// every OpenTelemetry SDK does: an operator names the service without a Fathom-specific flag.
	if res, err = resource.Merge(res, resource.Environment()); err != nil {
		return nil, fmt.Errorf("telemetry resource from OTEL_SERVICE_NAME / OTEL_RESOURCE_ATTRIBUTES: %w", err)
	}

	// A registry of the node's own, so two nodes in one process (tests) never collide and
	// nothing registers into Prometheus's global default.
	registry := prometheus.NewRegistry()
	// The Go runtime's and the process's own metrics (go_*, process_*): memory, GC,
	// goroutines, CPU, open files.
	if err := registry.Register(collectors.NewGoCollector()); err != nil {
		return nil, fmt.Errorf("telemetry go collector: %w", err)
	}
	if err := registry.Register(collectors.NewProcessCollector(collectors.ProcessCollectorOpts{})); err != nil {
		return nil, fmt.Errorf("telemetry process collector: %w", err)
	}
	promReader, err := otelprom.New(otelprom.WithRegisterer(registry), otelprom.WithoutScopeInfo())
	if err != nil {
		return nil, fmt.Errorf("telemetry prometheus reader: %w", err)
	}
	// The ID generator lets a session's spans join one trace across activations and nodes (IDGenerator).
	topts := []sdktrace.TracerProviderOption{sdktrace.WithResource(res), sdktrace.WithIDGenerator(IDGenerator()), sdktrace.WithSampler(sampler)}
	mopts := []sdkmetric.Option{sdkmetric.WithResource(res), sdkmetric.WithReader(promReader), sdkmetric.WithView(protoActorViews()...)}
	if cfg.SpanExporter != nil {
		topts = append(topts, sdktrace.WithSyncer(cfg.SpanExporter))
	}
	spanExps, err := spanExporters(ctx, cfg, traces, cfg.Writer)
	if err != nil {
		return nil, err
	}
	for _, te := range spanExps {
		topts = append(topts, sdktrace.WithBatcher(te))
	}
	if cfg.SpanExporter == nil && len(spanExps) == 0 {
		// No span goes anywhere: record none. Spans still get their IDs and carry the
		// session's trace context; recording them only to drop them cost a pipelined
		// step a twentieth of its CPU.
		rootSampler = sdktrace.NeverSample()
		topts = append(topts, sdktrace.WithSampler(rootSampler))
	}
	readers, err := metricReaders(ctx, cfg, metrics, cfg.Writer)
	if err != nil {
		return nil, err
	}
	for _, r := range readers {
		mopts = append(mopts, sdkmetric.WithReader(r))
	}
	tp := sdktrace.NewTracerProvider(topts...)
	mp := sdkmetric.NewMeterProvider(mopts...)
	otel.SetTracerProvider(tp)
	otel.SetMeterProvider(mp)
	otel.SetTextMapPropagator(propagation.NewCompositeTextMapPropagator(propagation.TraceContext{}, propagation.Baggage{}))
	return &Providers{
		TracerProvider: tp,
		MeterProvider:  mp,
		metrics:        promhttp.HandlerFor(registry, promhttp.HandlerOpts{ErrorHandling: promhttp.ContinueOnError}),
		shutdown:       []func(context.Context) error{tp.Shutdown, mp.Shutdown},
		pushesMetrics:  len(readers) > 0,
		rootSampler:    rootSampler,
	}, nil
}

// protoActorViews fit Proto.Actor's own histograms (recorded when a metric exporter is
// configured, see PushesMetrics) to their unit: a message's receive time, in seconds,
// gets buckets from 10 µs to 5 s instead of the SDK's defaults (0 to 10,000, for
// milliseconds), where every receive fell into the first; the thread-pool latency, which
// Proto.Actor declares but never records (its name says seconds, its unit ms), is dropped.
func protoActorViews() []sdkmetric.View {
	return []sdkmetric.View{
		sdkmetric.NewView(sdkmetric.Instrument{Name: "protoactor_actor_message_receive_duration_seconds"},
			sdkmetric.Stream{Unit: "s", Aggregation: sdkmetric.AggregationExplicitBucketHistogram{
				Boundaries: []float64{0.00001, 0.00005, 0.0001, 0.0005, 0.001, 0.005, 0.01, 0.05, 0.1, 0.5, 1, 5}}}),
		sdkmetric.NewView(sdkmetric.Instrument{Name: "protoactor_thread_pool_latency_duration_seconds"},
			sdkmetric.Stream{Aggregation: sdkmetric.AggregationDrop{}}),
	}
}

// newInstanceID is a random UUID (version 4), the service.instance.id of one node.
func newInstanceID() string {
	var b [16]byte
	_, _ = rand.Read(b[:]) // crypto/rand.Read never fails
	b[6] = b[6]&0x0f | 0x40
	b[8] = b[8]&0x3f | 0x80
	return fmt.Sprintf("%x-%x-%x-%x-%x", b[0:4], b[4:6], b[6:8], b[8:10], b[10:])
}

// Shutdown flushes and stops the providers, bounded by ctx.
func (p *Providers) Shutdown(ctx context.Context) error {
	var errs []error
	for _, f := range p.shutdown {
		if err := f(ctx); err != nil {
			errs = append(errs, err)
		}
	}
	p.shutdown = nil
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("telemetry shutdown: %w", err)
	}
	return nil
}

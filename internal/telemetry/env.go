package telemetry

import (
	"context"
	"fmt"
	"io"
	"net/url"
	"os"
	"path"
	"strconv"
	"strings"

	"go.opentelemetry.io/otel/exporters/otlp/otlpmetric/otlpmetricgrpc"
	"go.opentelemetry.io/otel/exporters/otlp/otlpmetric/otlpmetrichttp"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracegrpc"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	"go.opentelemetry.io/otel/exporters/stdout/stdoutmetric"
	"go.opentelemetry.io/otel/exporters/stdout/stdouttrace"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
)

// The standard OpenTelemetry variables Setup reads itself (the SDK reads the others:
// OTEL_EXPORTER_OTLP_HEADERS, _TIMEOUT, _COMPRESSION, the signal-specific endpoints,
// OTEL_TRACES_SAMPLER_ARG, OTEL_METRIC_EXPORT_INTERVAL, the span limits).
const (
	// EnvTracesExporter chooses the span exporter: otlp, console or none. When set, it
	// wins over [Config.Exporter] for traces.
	EnvTracesExporter = "OTEL_TRACES_EXPORTER"
	// EnvMetricsExporter chooses the metric exporter: otlp, console, prometheus (pulled
	// from GET /metrics only, which is always served) or none. When set, it wins over
	// [Config.Exporter] for metrics.
	EnvMetricsExporter = "OTEL_METRICS_EXPORTER"
	// EnvOTLPEndpoint is the OTLP collector's base URL; [Config.OTLPEndpoint], when set to
	// another value, wins.
	EnvOTLPEndpoint = "OTEL_EXPORTER_OTLP_ENDPOINT"
	// EnvOTLPProtocol is the OTLP protocol: http/protobuf (default) or grpc;
	// OTEL_EXPORTER_OTLP_TRACES_PROTOCOL and OTEL_EXPORTER_OTLP_METRICS_PROTOCOL set it per
	// signal.
	EnvOTLPProtocol = "OTEL_EXPORTER_OTLP_PROTOCOL"
	// EnvTracesSampler is the sampler (always_on, always_off, traceidratio,
	// parentbased_always_on, parentbased_always_off, parentbased_traceidratio), with
	// OTEL_TRACES_SAMPLER_ARG the ratio. Setup checks them; the SDK applies them.
	EnvTracesSampler = "OTEL_TRACES_SAMPLER"
)

// OTLP protocols.
const (
	protocolHTTP = "http/protobuf"
	protocolGRPC = "grpc"
)

// signal is "traces" or "metrics": its exporters and OTLP protocol.
type signal struct {
	name      string
	exporters []string // otlp, console (and for metrics prometheus); empty: none
	protocol  string
}

// resolveSignal returns the exporters of signal name ("traces", "metrics"): the standard
// variable envKey's when set, else the one cfg.Exporter names.
func resolveSignal(cfg Config, name, envKey string, allowed ...string) (signal, error) {
	s := signal{name: name}
	raw, set := os.LookupEnv(envKey)
	raw = strings.TrimSpace(raw)
	if !set || raw == "" {
		switch cfg.Exporter {
		case ExporterStdout:
			s.exporters = []string{"console"}
		case ExporterOTLP:
			s.exporters = []string{"otlp"}
		}
	} else if !strings.EqualFold(raw, "none") {
		for _, e := range strings.Split(raw, ",") {
			e = strings.ToLower(strings.TrimSpace(e))
			switch {
			case e == "otlp" || e == "console" || containsString(allowed, e):
				s.exporters = append(s.exporters, e)
			case e == "none":
				return s, fmt.Errorf("telemetry: %s=%q: none cannot be combined with other exporters", envKey, raw)
			default:
				return s, fmt.Errorf("telemetry: %s=%q: unknown exporter %q (want %s)", envKey, raw, e, strings.Join(append([]string{"otlp", "console"}, append(allowed, "none")...), ", "))
			}
		}
	}
	if !containsString(s.exporters, "otlp") {
		return s, nil
	}
	s.protocol = protocolHTTP
	k := "OTEL_EXPORTER_OTLP_" + strings.ToUpper(name) + "_PROTOCOL"
	v := strings.TrimSpace(os.Getenv(k))
	if v == "" {
		k, v = EnvOTLPProtocol, strings.TrimSpace(os.Getenv(EnvOTLPProtocol))
	}
	switch v {
	case "":
	case protocolHTTP, protocolGRPC:
		s.protocol = v
	default:
		return s, fmt.Errorf("telemetry: %s=%q: unsupported OTLP protocol (want http/protobuf or grpc)", k, v)
	}
	return s, nil
}

func containsString(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

// envSampler returns the sampler OTEL_TRACES_SAMPLER and _ARG name, as the SDK builds it
// (parentbased_always_on when unset), and its root sampler: the one that decides a span
// without a parent. A bad value is an error (the SDK would replace it by its default with
// no more than a logged error). The parentbased_ samplers make every other span follow its parent;
// the others decide each span by its trace id, as they decide the root.
func envSampler() (sampler, root sdktrace.Sampler, err error) {
	name := strings.TrimSpace(os.Getenv(EnvTracesSampler))
	if name == "" {
		name = "parentbased_always_on"
	}
	if root, err = rootSampler(name); err != nil {
		return nil, nil, err
	}
	if strings.HasPrefix(name, "parentbased_") {
		return sdktrace.ParentBased(root), root, nil
	}
	return root, root, nil
}

// rootSampler is the root sampler of OTEL_TRACES_SAMPLER=name.
func rootSampler(name string) (sdktrace.Sampler, error) {
	arg := strings.TrimSpace(os.Getenv("OTEL_TRACES_SAMPLER_ARG"))
	switch name {
	case "always_on", "parentbased_always_on":
		return sdktrace.AlwaysSample(), nil
	case "always_off", "parentbased_always_off":
		return sdktrace.NeverSample(), nil
	case "traceidratio", "parentbased_traceidratio":
		if arg == "" {
			return sdktrace.TraceIDRatioBased(1), nil // the SDK's default ratio
		}
		r, err := strconv.ParseFloat(arg, 64)
		if err != nil || r < 0 || r > 1 {
			return nil, fmt.Errorf("telemetry: OTEL_TRACES_SAMPLER_ARG=%q: want a ratio between 0 and 1 for %s", arg, name)
		}
		return sdktrace.TraceIDRatioBased(r), nil
	}
	return nil, fmt.Errorf("telemetry: %s=%q: unsupported sampler (want always_on, always_off, traceidratio, parentbased_always_on, parentbased_always_off or parentbased_traceidratio)", EnvTracesSampler, name)
}

// otlpTarget is the collector an explicit Config.OTLPEndpoint names; nil when the
// endpoint is the environment's (or unset), which the exporters read themselves
// (with the signal-specific variables and their defaults).
func otlpTarget(cfg Config) *url.URL {
	if cfg.OTLPEndpoint == "" || cfg.OTLPEndpoint == os.Getenv(EnvOTLPEndpoint) {
		return nil
	}
	u, _ := url.Parse(cfg.OTLPEndpoint) // validated
	return u
}

// spanExporters builds the span exporters of s.
func spanExporters(ctx context.Context, cfg Config, s signal, w io.Writer) ([]sdktrace.SpanExporter, error) {
	var out []sdktrace.SpanExporter
	for _, e := range s.exporters {
		switch e {
		case "console":
			te, err := stdouttrace.New(stdouttrace.WithWriter(w))
			if err != nil {
				return nil, fmt.Errorf("telemetry console trace exporter: %w", err)
			}
			out = append(out, te)
		case "otlp":
			te, err := otlpSpanExporter(ctx, cfg, s.protocol)
			if err != nil {
				return nil, fmt.Errorf("telemetry otlp trace exporter (%s): %w", s.protocol, err)
			}
			out = append(out, te)
		}
	}
	return out, nil
}

func otlpSpanExporter(ctx context.Context, cfg Config, protocol string) (sdktrace.SpanExporter, error) {
	u := otlpTarget(cfg)
	if protocol == protocolGRPC {
		var opts []otlptracegrpc.Option
		if u != nil {
			opts = append(opts, otlptracegrpc.WithEndpoint(u.Host))
			if u.Scheme == "http" {
				opts = append(opts, otlptracegrpc.WithInsecure())
			}
		}
		return otlptracegrpc.New(ctx, opts...)
	}
	var opts []otlptracehttp.Option
	if u != nil {
		opts = append(opts, otlptracehttp.WithEndpoint(u.Host), otlptracehttp.WithURLPath(path.Join("/", u.Path, "v1/traces")))
		if u.Scheme == "http" {
			opts = append(opts, otlptracehttp.WithInsecure())
		}
	}
	return otlptracehttp.New(ctx, opts...)
}

// metricReaders builds the periodic readers of s (prometheus adds none: GET /metrics is
// always served).
func metricReaders(ctx context.Context, cfg Config, s signal, w io.Writer) ([]sdkmetric.Reader, error) {
	var ropts []sdkmetric.PeriodicReaderOption
	if cfg.MetricInterval > 0 {
		ropts = append(ropts, sdkmetric.WithInterval(cfg.MetricInterval))
	}
	var out []sdkmetric.Reader
	for _, e := range s.exporters {
		var me sdkmetric.Exporter
		var err error
		switch e {
		case "console":
			me, err = stdoutmetric.New(stdoutmetric.WithWriter(w))
		case "otlp":
			me, err = otlpMetricExporter(ctx, cfg, s.protocol)
		default:
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("telemetry %s metric exporter: %w", e, err)
		}
		out = append(out, sdkmetric.NewPeriodicReader(me, ropts...))
	}
	return out, nil
}

func otlpMetricExporter(ctx context.Context, cfg Config, protocol string) (sdkmetric.Exporter, error) {
	u := otlpTarget(cfg)
	if protocol == protocolGRPC {
		var opts []otlpmetricgrpc.Option
		if u != nil {
			opts = append(opts, otlpmetricgrpc.WithEndpoint(u.Host))
			if u.Scheme == "http" {
				opts = append(opts, otlpmetricgrpc.WithInsecure())
			}
		}
		return otlpmetricgrpc.New(ctx, opts...)
	}
	var opts []otlpmetrichttp.Option
	if u != nil {
		opts = append(opts, otlpmetrichttp.WithEndpoint(u.Host), otlpmetrichttp.WithURLPath(path.Join("/", u.Path, "v1/metrics")))
		if u.Scheme == "http" {
			opts = append(opts, otlpmetrichttp.WithInsecure())
		}
	}
	return otlpmetrichttp.New(ctx, opts...)
}

package telemetry_test

import (
	"bytes"
	"context"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	collmetrics "go.opentelemetry.io/proto/otlp/collector/metrics/v1"
	colltrace "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	"google.golang.org/grpc"
	"google.golang.org/grpc/metadata"
	"google.golang.org/protobuf/proto"

	"github.com/fathom-agents/fathom/internal/telemetry"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
)

// otlpReceived is what an OTLP receiver got: span names, resource attributes, header
// values and metric names.
type otlpReceived struct {
	mu       sync.Mutex
	spans    []string
	resource map[string]string
	headers  map[string]string
	metrics  []string
}

func (r *otlpReceived) addTraces(req *colltrace.ExportTraceServiceRequest, header func(string) string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.resource == nil {
		r.resource, r.headers = map[string]string{}, map[string]string{}
	}
	for _, k := range []string{"authorization", "x-tenant"} {
		r.headers[k] = header(k)
	}
	for _, rs := range req.GetResourceSpans() {
		for _, kv := range rs.GetResource().GetAttributes() {
			r.resource[kv.GetKey()] = kv.GetValue().GetStringValue()
		}
		for _, ss := range rs.GetScopeSpans() {
			for _, s := range ss.GetSpans() {
				r.spans = append(r.spans, s.GetName())
			}
		}
	}
}

func (r *otlpReceived) addMetrics(req *collmetrics.ExportMetricsServiceRequest) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, rm := range req.GetResourceMetrics() {
		for _, sm := range rm.GetScopeMetrics() {
			for _, m := range sm.GetMetrics() {
				r.metrics = append(r.metrics, m.GetName())
			}
		}
	}
}

func (r *otlpReceived) snapshot() (spans, metrics []string, resource, headers map[string]string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]string(nil), r.spans...), append([]string(nil), r.metrics...), r.resource, r.headers
}

// httpReceiver is an OTLP/HTTP (protobuf) receiver.
func httpReceiver(t *testing.T) (*otlpReceived, string) {
	rec := &otlpReceived{}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, err := io.ReadAll(r.Body)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		switch r.URL.Path {
		case "/v1/traces":
			var req colltrace.ExportTraceServiceRequest
			if err := proto.Unmarshal(body, &req); err != nil {
				http.Error(w, err.Error(), http.StatusBadRequest)
				return
			}
			rec.addTraces(&req, r.Header.Get)
			out, _ := proto.Marshal(&colltrace.ExportTraceServiceResponse{})
			w.Header().Set("Content-Type", "application/x-protobuf")
			_, _ = w.Write(out)
		case "/v1/metrics":
			var req collmetrics.ExportMetricsServiceRequest
			if err := proto.Unmarshal(body, &req); err != nil {
				http.Error(w, err.Error(), http.StatusBadRequest)
				return
			}
			rec.addMetrics(&req)
			out, _ := proto.Marshal(&collmetrics.ExportMetricsServiceResponse{})
			w.Header().Set("Content-Type", "application/x-protobuf")
			_, _ = w.Write(out)
		default:
			http.NotFound(w, r)
		}
	}))
	t.Cleanup(srv.Close)
	return rec, srv.URL
}

type grpcTraces struct {
	colltrace.UnimplementedTraceServiceServer
	rec *otlpReceived
}

func (g grpcTraces) Export(ctx context.Context, req *colltrace.ExportTraceServiceRequest) (*colltrace.ExportTraceServiceResponse, error) {
	md, _ := metadata.FromIncomingContext(ctx)
	g.rec.addTraces(req, func(k string) string { return strings.Join(md.Get(k), ",") })
	return &colltrace.ExportTraceServiceResponse{}, nil
}

type grpcMetrics struct {
	collmetrics.UnimplementedMetricsServiceServer
	rec *otlpReceived
}

func (g grpcMetrics) Export(_ context.Context, req *collmetrics.ExportMetricsServiceRequest) (*collmetrics.ExportMetricsServiceResponse, error) {
	g.rec.addMetrics(req)
	return &collmetrics.ExportMetricsServiceResponse{}, nil
}

// grpcReceiver is an OTLP/gRPC receiver.
func grpcReceiver(t *testing.T) (*otlpReceived, string) {
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	rec := &otlpReceived{}
	srv := grpc.NewServer()
	colltrace.RegisterTraceServiceServer(srv, grpcTraces{rec: rec})
	collmetrics.RegisterMetricsServiceServer(srv, grpcMetrics{rec: rec})
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = srv.Serve(lis)
	}()
	t.Cleanup(func() {
		srv.Stop()
		<-done
	})
	return rec, "http://" + lis.Addr().String()
}

// emit makes one span and one counter record, then shuts the providers down (which
// flushes every exporter).
func emit(t *testing.T, p *telemetry.Providers) {
	t.Helper()
	_, span := p.TracerProvider.Tracer("test").Start(context.Background(), "session.step")
	span.End()
	c, err := p.MeterProvider.Meter("test").Int64Counter("fathom.test.count")
	if err != nil {
		t.Fatal(err)
	}
	c.Add(context.Background(), 1)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if err := p.Shutdown(ctx); err != nil {
		t.Fatal(err)
	}
}

// TestOTELExporterOTLPOverHTTP: OTEL_TRACES_EXPORTER=otlp with OTEL_EXPORTER_OTLP_ENDPOINT,
// OTEL_EXPORTER_OTLP_HEADERS and OTEL_RESOURCE_ATTRIBUTES sends the spans to a collector
// over OTLP/HTTP with those headers and that resource, with no Fathom setting at all;
// OTEL_METRICS_EXPORTER=none sends no metrics.
func TestOTELExporterOTLPOverHTTP(t *testing.T) {
	rec, url := httpReceiver(t)
	t.Setenv("OTEL_TRACES_EXPORTER", "otlp")
	t.Setenv("OTEL_METRICS_EXPORTER", "none")
	t.Setenv("OTEL_EXPORTER_OTLP_ENDPOINT", url)
	t.Setenv("OTEL_EXPORTER_OTLP_HEADERS", "authorization=Bearer%20t0k,x-tenant=acme")
	t.Setenv("OTEL_RESOURCE_ATTRIBUTES", "deployment.environment=staging")
	p, err := telemetry.Setup(context.Background(), telemetry.Config{Exporter: "none", OTLPEndpoint: url})
	if err != nil {
		t.Fatal(err)
	}
	if p.PushesMetrics() {
		t.Error("PushesMetrics with OTEL_METRICS_EXPORTER=none")
	}
	emit(t, p)
	spans, metrics, res, headers := rec.snapshot()
	if len(spans) != 1 || spans[0] != "session.step" {
		t.Fatalf("the collector got spans %v, want session.step", spans)
	}
	if headers["authorization"] != "Bearer t0k" || headers["x-tenant"] != "acme" {
		t.Fatalf("the collector got headers %v", headers)
	}
	if res["deployment.environment"] != "staging" || res["service.name"] != "fathom" {
		t.Fatalf("the collector got resource %v", res)
	}
	if len(metrics) != 0 {
		t.Fatalf("OTEL_METRICS_EXPORTER=none, yet the collector got metrics %v", metrics)
	}
}

// TestOTELExporterOTLPOverGRPC: OTEL_EXPORTER_OTLP_PROTOCOL=grpc sends spans and metrics
// (OTEL_METRICS_EXPORTER=otlp) to a gRPC collector, with the headers as metadata.
func TestOTELExporterOTLPOverGRPC(t *testing.T) {
	rec, url := grpcReceiver(t)
	t.Setenv("OTEL_TRACES_EXPORTER", "otlp")
	t.Setenv("OTEL_METRICS_EXPORTER", "otlp")
	t.Setenv("OTEL_EXPORTER_OTLP_PROTOCOL", "grpc")
	t.Setenv("OTEL_EXPORTER_OTLP_ENDPOINT", url)
	t.Setenv("OTEL_EXPORTER_OTLP_HEADERS", "x-tenant=acme")
	p, err := telemetry.Setup(context.Background(), telemetry.Config{OTLPEndpoint: url})
	if err != nil {
		t.Fatal(err)
	}
	if !p.PushesMetrics() {
		t.Error("PushesMetrics is false with OTEL_METRICS_EXPORTER=otlp")
	}
	emit(t, p)
	spans, metrics, _, headers := rec.snapshot()
	if len(spans) != 1 || spans[0] != "session.step" || headers["x-tenant"] != "acme" {
		t.Fatalf("the gRPC collector got spans %v with headers %v", spans, headers)
	}
	if !strings.Contains(strings.Join(metrics, " "), "fathom.test.count") {
		t.Fatalf("the gRPC collector got metrics %v, want fathom.test.count", metrics)
	}
}

// TestOTELExportersWinOverTheFathomSetting: the per-signal standard variables choose each
// signal's exporter over --otel-exporter: console traces with Fathom's exporter none,
// no traces but console metrics with Fathom's stdout.
func TestOTELExportersWinOverTheFathomSetting(t *testing.T) {
	t.Run("console traces", func(t *testing.T) {
		t.Setenv("OTEL_TRACES_EXPORTER", "console")
		var out bytes.Buffer
		p, err := telemetry.Setup(context.Background(), telemetry.Config{Exporter: "none", Writer: &out})
		if err != nil {
			t.Fatal(err)
		}
		emit(t, p)
		if !strings.Contains(out.String(), `"Name":"session.step"`) || strings.Contains(out.String(), "fathom.test.count") {
			t.Fatalf("console output (want the span, no metrics):\n%s", out.String())
		}
	})
	t.Run("no traces", func(t *testing.T) {
		t.Setenv("OTEL_TRACES_EXPORTER", "none")
		var out bytes.Buffer
		p, err := telemetry.Setup(context.Background(), telemetry.Config{Exporter: "stdout", Writer: &out})
		if err != nil {
			t.Fatal(err)
		}
		emit(t, p)
		if strings.Contains(out.String(), `"Name":"session.step"`) || !strings.Contains(out.String(), "fathom.test.count") {
			t.Fatalf("stdout output (want the metric, no span):\n%s", out.String())
		}
	})
}

// TestOTELTracesSampler: OTEL_TRACES_SAMPLER (and _ARG) decide which root spans are
// recorded.
func TestOTELTracesSampler(t *testing.T) {
	for _, tc := range []struct{ sampler, arg string }{{"always_off", ""}, {"traceidratio", "0"}, {"parentbased_traceidratio", "0.0"}} {
		t.Run(tc.sampler+"_"+tc.arg, func(t *testing.T) {
			t.Setenv("OTEL_TRACES_SAMPLER", tc.sampler)
			t.Setenv("OTEL_TRACES_SAMPLER_ARG", tc.arg)
			mem := tracetest.NewInMemoryExporter()
			p, err := telemetry.Setup(context.Background(), telemetry.Config{SpanExporter: mem})
			if err != nil {
				t.Fatal(err)
			}
			defer p.Shutdown(context.Background())
			_, span := p.TracerProvider.Tracer("test").Start(context.Background(), "dropped")
			span.End()
			if span.SpanContext().IsSampled() || len(mem.GetSpans()) != 0 {
				t.Fatalf("sampler %s(%s) kept the span (%d exported)", tc.sampler, tc.arg, len(mem.GetSpans()))
			}
		})
	}
}

// TestBadOTELVariablesFailTheStart: a value no exporter or sampler has fails Setup with
// an error naming the variable, instead of a silent default.
func TestBadOTELVariablesFailTheStart(t *testing.T) {
	for _, tc := range []struct{ key, value, want string }{
		{"OTEL_TRACES_EXPORTER", "zipkin", `OTEL_TRACES_EXPORTER="zipkin": unknown exporter`},
		{"OTEL_METRICS_EXPORTER", "statsd", `OTEL_METRICS_EXPORTER="statsd": unknown exporter`},
		{"OTEL_TRACES_EXPORTER", "otlp,none", "none cannot be combined"},
		{"OTEL_EXPORTER_OTLP_PROTOCOL", "http/json", `OTEL_EXPORTER_OTLP_PROTOCOL="http/json": unsupported OTLP protocol`},
		{"OTEL_TRACES_SAMPLER", "jaeger_remote", `OTEL_TRACES_SAMPLER="jaeger_remote": unsupported sampler`},
		{"OTEL_TRACES_SAMPLER_ARG", "1.5", `OTEL_TRACES_SAMPLER_ARG="1.5": want a ratio`},
	} {
		t.Run(tc.key+"="+tc.value, func(t *testing.T) {
			t.Setenv(tc.key, tc.value)
			if tc.key == "OTEL_EXPORTER_OTLP_PROTOCOL" {
				t.Setenv("OTEL_TRACES_EXPORTER", "otlp")
			}
			if tc.key == "OTEL_TRACES_SAMPLER_ARG" {
				t.Setenv("OTEL_TRACES_SAMPLER", "traceidratio")
			}
			p, err := telemetry.Setup(context.Background(), telemetry.Config{})
			if err == nil {
				_ = p.Shutdown(context.Background())
				t.Fatalf("Setup with %s=%s succeeded", tc.key, tc.value)
			}
			if !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("Setup with %s=%s: %v, want %q", tc.key, tc.value, err, tc.want)
			}
		})
	}
}

// TestOTLPEndpointSetting: --otel-endpoint (Config.OTLPEndpoint), when it differs from
// OTEL_EXPORTER_OTLP_ENDPOINT, wins, and its path is the base of /v1/traces.
func TestOTLPEndpointSetting(t *testing.T) {
	rec, url := httpReceiver(t)
	t.Setenv("OTEL_EXPORTER_OTLP_ENDPOINT", "http://127.0.0.1:1")
	t.Setenv("OTEL_METRICS_EXPORTER", "none")
	p, err := telemetry.Setup(context.Background(), telemetry.Config{Exporter: "otlp", OTLPEndpoint: url + "/"})
	if err != nil {
		t.Fatal(err)
	}
	emit(t, p)
	if spans, _, _, _ := rec.snapshot(); len(spans) != 1 {
		t.Fatalf("the collector at --otel-endpoint got spans %v", spans)
	}
}

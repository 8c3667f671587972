package telemetry_test

import (
	"bytes"
	"context"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/trace"

	"github.com/fathom-agents/fathom/internal/telemetry"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
)

func TestValidate(t *testing.T) {
	for _, tc := range []struct {
		cfg  telemetry.Config
		want string
	}{
		{telemetry.Config{Exporter: "jaeger"}, "unknown exporter"},
		{telemetry.Config{Exporter: "otlp"}, "needs an endpoint"},
		{telemetry.Config{Exporter: "otlp", OTLPEndpoint: "127.0.0.1:4318"}, "http(s) URL"},
		{telemetry.Config{MetricInterval: -time.Second}, "negative"},
	} {
		err := tc.cfg.Validate()
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("Validate(%+v) = %v, want error containing %q", tc.cfg, err, tc.want)
		}
	}
	if err := (telemetry.Config{Exporter: "otlp", OTLPEndpoint: "http://127.0.0.1:4318"}).Validate(); err != nil {
		t.Errorf("valid otlp config: %v", err)
	}
}

func TestStdoutExporterWritesSpans(t *testing.T) {
	var out bytes.Buffer
	mem := tracetest.NewInMemoryExporter()
	p, err := telemetry.Setup(context.Background(), telemetry.Config{Exporter: "stdout", Writer: &out, SpanExporter: mem})
	if err != nil {
		t.Fatal(err)
	}
	_, span := p.TracerProvider.Tracer("test").Start(context.Background(), "session.step")
	span.End()
	counter, err := p.MeterProvider.Meter("test").Int64Counter("fathom.test.count")
	if err != nil {
		t.Fatal(err)
	}
	counter.Add(context.Background(), 3)
	// The in-memory exporter forgets its spans at shutdown: look first.
	if got := mem.GetSpans(); len(got) != 1 || got[0].Name != "session.step" {
		t.Fatalf("in-memory spans = %v, want one session.step", got)
	}
	if err := p.Shutdown(context.Background()); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{`"Name":"session.step"`, `"service.name"`, `fathom.test.count`} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("stdout output lacks %s:\n%s", want, out.String())
		}
	}
}

// TestOTELServiceNameIsHonoured: the standard variables name the service and add resource attributes.
func TestOTELServiceNameIsHonoured(t *testing.T) {
	t.Setenv("OTEL_SERVICE_NAME", "fathom-eu-1")
	t.Setenv("OTEL_RESOURCE_ATTRIBUTES", "deployment.environment=staging")
	mem := tracetest.NewInMemoryExporter()
	p, err := telemetry.Setup(context.Background(), telemetry.Config{ServiceName: "fathom", SpanExporter: mem})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Shutdown(context.Background())
	_, span := p.TracerProvider.Tracer("test").Start(context.Background(), "x")
	span.End()
	spans := mem.GetSpans()
	if len(spans) != 1 {
		t.Fatalf("%d spans", len(spans))
	}
	attrs := map[string]string{}
	for _, kv := range spans[0].Resource.Attributes() {
		attrs[string(kv.Key)] = kv.Value.String()
	}
	if attrs["service.name"] != "fathom-eu-1" || attrs["deployment.environment"] != "staging" {
		t.Fatalf("resource = %v, want service.name fathom-eu-1 and deployment.environment staging", attrs)
	}
}

func TestNoneExportsNothing(t *testing.T) {
	var out bytes.Buffer
	p, err := telemetry.Setup(context.Background(), telemetry.Config{Writer: &out})
	if err != nil {
		t.Fatal(err)
	}
	_, span := p.TracerProvider.Tracer("test").Start(context.Background(), "x")
	if !span.SpanContext().IsValid() {
		t.Error("span context should be valid with the none exporter so traces propagate")
	}
	// Nothing would export it, so it is not recorded; not even under a sampled parent
	// (a session's spans hang under remote parents flagged sampled).
	parent := trace.ContextWithRemoteSpanContext(context.Background(), trace.NewSpanContext(trace.SpanContextConfig{
		TraceID: trace.TraceID{1}, SpanID: trace.SpanID{1}, TraceFlags: trace.FlagsSampled, Remote: true}))
	_, child := p.TracerProvider.Tracer("test").Start(parent, "child")
	if span.IsRecording() || child.IsRecording() || child.SpanContext().TraceID() != (trace.TraceID{1}) {
		t.Errorf("none exporter: recording %v/%v, child's trace %v", span.IsRecording(), child.IsRecording(), child.SpanContext().TraceID())
	}
	child.End()
	span.End()
	if err := p.Shutdown(context.Background()); err != nil {
		t.Fatal(err)
	}
	if out.Len() != 0 {
		t.Errorf("none exporter wrote %q", out.String())
	}
}

// TestMetricsHandlerServesPrometheusText: with no exporter configured, metrics are still
// served in the Prometheus text format, parseable by Prometheus's own parser.
func TestMetricsHandlerServesPrometheusText(t *testing.T) {
	p, err := telemetry.Setup(context.Background(), telemetry.Config{})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Shutdown(context.Background())
	c, err := p.MeterProvider.Meter("test").Int64Counter("fathom.actor.restarts", metric.WithUnit("{event}"))
	if err != nil {
		t.Fatal(err)
	}
	c.Add(context.Background(), 2, metric.WithAttributes(attribute.String("kind", "step_runner")))
	h, err := p.MeterProvider.Meter("test").Float64Histogram("fathom.journal.append.duration", metric.WithUnit("s"))
	if err != nil {
		t.Fatal(err)
	}
	h.Record(context.Background(), 0.003)
	srv := httptest.NewServer(p.MetricsHandler())
	defer srv.Close()
	resp, err := http.Get(srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != 200 || !strings.HasPrefix(resp.Header.Get("Content-Type"), "text/plain") {
		t.Fatalf("GET /metrics: %d %s", resp.StatusCode, resp.Header.Get("Content-Type"))
	}
	parser := expfmt.NewTextParser(model.LegacyValidation)
	families, err := parser.TextToMetricFamilies(bytes.NewReader(body))
	if err != nil {
		t.Fatalf("not valid Prometheus text: %v\n%s", err, body)
	}
	restarts := families["fathom_actor_restarts_total"]
	if restarts == nil || len(restarts.GetMetric()) != 1 || restarts.GetMetric()[0].GetCounter().GetValue() != 2 {
		t.Fatalf("fathom_actor_restarts_total missing or wrong:\n%s", body)
	}
	if families["fathom_journal_append_duration_seconds"] == nil {
		t.Fatalf("the histogram is not named in base units with _seconds:\n%s", body)
	}
}

// TestWithIDsGivesTheSpanItsIDs: a span started with WithIDs gets those ids, as a root
// and as a child; the spans under it get random ones.
func TestWithIDsGivesTheSpanItsIDs(t *testing.T) {
	mem := tracetest.NewInMemoryExporter()
	p, err := telemetry.Setup(context.Background(), telemetry.Config{SpanExporter: mem})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Shutdown(context.Background())
	tr := p.TracerProvider.Tracer("test")
	tid := trace.TraceID{1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16}
	rootID, childID := trace.SpanID{1, 1, 1, 1, 1, 1, 1, 1}, trace.SpanID{2, 2, 2, 2, 2, 2, 2, 2}
	ctx, root := tr.Start(telemetry.WithIDs(context.Background(), tid, rootID), "root", trace.WithNewRoot())
	if sc := root.SpanContext(); sc.TraceID() != tid || sc.SpanID() != rootID {
		t.Fatalf("root span %v/%v, want %v/%v", sc.TraceID(), sc.SpanID(), tid, rootID)
	}
	_, free := tr.Start(ctx, "under") // ctx still carries the ids asked for the root: not reused
	if free.SpanContext().SpanID() == rootID || free.SpanContext().TraceID() != tid {
		t.Fatalf("span under the root: %v", free.SpanContext())
	}
	parent := trace.ContextWithRemoteSpanContext(context.Background(),
		trace.NewSpanContext(trace.SpanContextConfig{TraceID: tid, SpanID: rootID, TraceFlags: trace.FlagsSampled, Remote: true}))
	_, child := tr.Start(telemetry.WithIDs(parent, tid, childID), "child")
	if sc := child.SpanContext(); sc.TraceID() != tid || sc.SpanID() != childID {
		t.Fatalf("child span %v/%v, want %v/%v", sc.TraceID(), sc.SpanID(), tid, childID)
	}
	_, other := tr.Start(telemetry.WithIDs(context.Background(), trace.TraceID{}, childID), "random")
	if !other.SpanContext().IsValid() || other.SpanContext().SpanID() == childID {
		t.Fatalf("an invalid trace id asked for must give random ids: %v", other.SpanContext())
	}
}

// TestDisabledAndOTELSDKDisabled: Disabled, or the standard OTEL_SDK_DISABLED=true, make
// no-op providers.
func TestDisabledAndOTELSDKDisabled(t *testing.T) {
	for name, cfg := range map[string]telemetry.Config{"Disabled": {Disabled: true}, "OTEL_SDK_DISABLED": {}} {
		t.Run(name, func(t *testing.T) {
			if name == "OTEL_SDK_DISABLED" {
				t.Setenv("OTEL_SDK_DISABLED", "true")
			}
			mem := tracetest.NewInMemoryExporter()
			cfg.SpanExporter = mem
			p, err := telemetry.Setup(context.Background(), cfg)
			if err != nil {
				t.Fatal(err)
			}
			_, span := p.TracerProvider.Tracer("test").Start(context.Background(), "x")
			span.End()
			if span.SpanContext().IsValid() || len(mem.GetSpans()) != 0 {
				t.Fatalf("a disabled provider made span %v (%d exported)", span.SpanContext(), len(mem.GetSpans()))
			}
			if err := p.Shutdown(context.Background()); err != nil {
				t.Fatal(err)
			}
		})
	}
}

// TestNodesHaveTheirOwnInstanceID: two nodes of one service never collide: each
// Setup's resource has its own service.instance.id (and the node's address when
// given), on its spans and on its metrics' target_info.
func TestNodesHaveTheirOwnInstanceID(t *testing.T) {
	ids := map[string]bool{}
	for _, addr := range []string{"10.0.0.1:7001", "10.0.0.2:7001"} {
		mem := tracetest.NewInMemoryExporter()
		p, err := telemetry.Setup(context.Background(), telemetry.Config{SpanExporter: mem,
			ExtraAttributes: []attribute.KeyValue{attribute.String("fathom.node.address", addr)}})
		if err != nil {
			t.Fatal(err)
		}
		defer p.Shutdown(context.Background())
		_, span := p.TracerProvider.Tracer("test").Start(context.Background(), "x")
		span.End()
		attrs := map[string]string{}
		for _, kv := range mem.GetSpans()[0].Resource.Attributes() {
			attrs[string(kv.Key)] = kv.Value.String()
		}
		id := attrs["service.instance.id"]
		if len(id) != 36 || ids[id] || attrs["fathom.node.address"] != addr {
			t.Fatalf("resource %v: want a new service.instance.id and fathom.node.address %s", attrs, addr)
		}
		ids[id] = true
		rec := httptest.NewRecorder()
		p.MetricsHandler().ServeHTTP(rec, httptest.NewRequest("GET", "/metrics", nil))
		if body := rec.Body.String(); !strings.Contains(body, `service_instance_id="`+id+`"`) {
			t.Fatalf("target_info does not name service.instance.id %s:\n%s", id, body)
		}
	}
}

// TestLogHandlerAddsTraceIDs: a line logged with a context inside a span carries the
// span's trace_id and span_id; one logged outside a span carries neither.
func TestLogHandlerAddsTraceIDs(t *testing.T) {
	var buf bytes.Buffer
	log := slog.New(telemetry.LogHandler(slog.NewJSONHandler(&buf, nil))).With("component", "test")
	tid, _ := trace.TraceIDFromHex("0102030405060708090a0b0c0d0e0f10")
	sid, _ := trace.SpanIDFromHex("0102030405060708")
	ctx := trace.ContextWithSpanContext(context.Background(), trace.NewSpanContext(trace.SpanContextConfig{TraceID: tid, SpanID: sid}))
	log.InfoContext(ctx, "inside")
	log.Info("outside")
	lines := strings.Split(strings.TrimSpace(buf.String()), "\n")
	if len(lines) != 2 || !strings.Contains(lines[0], `"trace_id":"`+tid.String()+`","span_id":"`+sid.String()+`"`) || strings.Contains(lines[1], "trace_id") {
		t.Fatalf("log lines:\n%s", buf.String())
	}
}

// TestProtoActorHistogramsFitTheirUnit: Proto.Actor's message receive time (seconds)
// lands in buckets of microseconds to seconds, and its never-recorded thread-pool
// latency histogram is not served.
func TestProtoActorHistogramsFitTheirUnit(t *testing.T) {
	p, err := telemetry.Setup(context.Background(), telemetry.Config{})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Shutdown(context.Background())
	meter := p.MeterProvider.Meter("protoactor") // as Proto.Actor creates them
	h, err := meter.Float64Histogram("protoactor_actor_message_receive_duration_seconds")
	if err != nil {
		t.Fatal(err)
	}
	h.Record(context.Background(), 0.00003) // a 30 µs receive
	pool, err := meter.Int64Histogram("protoactor_thread_pool_latency_duration_seconds", metric.WithUnit("ms"))
	if err != nil {
		t.Fatal(err)
	}
	pool.Record(context.Background(), 1)
	rec := httptest.NewRecorder()
	p.MetricsHandler().ServeHTTP(rec, httptest.NewRequest("GET", "/metrics", nil))
	body := rec.Body.String()
	if !strings.Contains(body, `protoactor_actor_message_receive_duration_seconds_bucket{le="1e-05"} 0`) ||
		!strings.Contains(body, `protoactor_actor_message_receive_duration_seconds_bucket{le="5e-05"} 1`) {
		t.Errorf("the receive time is not in buckets that fit seconds:\n%s", grepLines(body, "protoactor"))
	}
	if strings.Contains(body, "protoactor_thread_pool_latency") {
		t.Errorf("the thread-pool latency histogram is served:\n%s", grepLines(body, "protoactor"))
	}
}

func grepLines(s, sub string) string {
	var out []string
	for _, l := range strings.Split(s, "\n") {
		if strings.Contains(l, sub) {
			out = append(out, l)
		}
	}
	return strings.Join(out, "\n")
}

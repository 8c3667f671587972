package node_test

import (
	"context"
	"encoding/json"
	"log/slog"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/fathom-agents/fathom/actors/session"
	"github.com/fathom-agents/fathom/internal/node"
	"github.com/fathom-agents/fathom/internal/telemetry"
	"github.com/fathom-agents/fathom/internal/testenv"
	"github.com/fathom-agents/fathom/llm/mock"
	mcptool "github.com/fathom-agents/fathom/tools/mcp"
	"github.com/fathom-agents/fathom/tools/mcp/mcptest"
)

// startTracedNode starts a node on the embedded journal whose model is script, whose
// MCP servers are servers and whose finished spans go to spans.
func startTracedNode(t *testing.T, script mock.Script, spans *tracetest.InMemoryExporter, servers ...mcptool.ServerConfig) *node.Node {
	t.Helper()
	llmSrv := httptest.NewServer(mock.New(mock.Config{Script: script}).Handler())
	t.Cleanup(llmSrv.Close)
	cfg := node.Config{DataDir: t.TempDir(), Session: session.DefaultConfig(), Logger: slog.New(slog.NewTextHandler(&testenv.Buffer{}, nil)),
		MCPServers: servers, Telemetry: telemetry.Config{SpanExporter: spans}}
	cfg.LLM.BaseURL, cfg.LLM.APIKey = llmSrv.URL+"/v1", "k"
	cfg.Cluster.Provider, cfg.Cluster.Name = "local", "trace-e2e"
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	n, err := node.Start(ctx, cfg)
	if err != nil {
		t.Fatalf("start node: %v", err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer cancel()
		if err := n.Stop(ctx); err != nil {
			t.Errorf("stop node: %v", err)
		}
	})
	return n
}

// waitSpan waits for the first span called name.
func waitSpan(t *testing.T, spans *tracetest.InMemoryExporter, name string) tracetest.SpanStub {
	t.Helper()
	var found tracetest.SpanStub
	testenv.Eventually(t, 10*time.Second, func() bool {
		for _, s := range spans.GetSpans() {
			if s.Name == name {
				found = s
				return true
			}
		}
		return false
	}, "no %s span", name)
	return found
}

// TestMCPCallCarriesTraceContext: a session's call of an MCP tool reaches the TypeScript
// SDK's server with the execute_tool span's W3C trace context in _meta.traceparent, in
// the session's trace.
func TestMCPCallCarriesTraceContext(t *testing.T) {
	script := mock.Script{Rules: []mock.Rule{
		{SystemMatch: "FATHOM-ROLE: orchestrator", Response: `{"steps":[{"id":"step-1","type":"custom","description":"show the trace","dependencies":[]}]}`},
		{SystemMatch: "FATHOM-ROLE: executor", ToolMatch: `traceparent`, Response: "shown"},
		{SystemMatch: "FATHOM-ROLE: executor", ToolCalls: []mock.ToolCallRule{{Name: "orders__trace_context", Arguments: `{}`}}},
	}, Default: "done"}
	spans := tracetest.NewInMemoryExporter()
	n := startTracedNode(t, script, spans, mcptest.Stdio(t, "orders"))
	evs := runSession(t, n, "s-mcp-trace", "show the trace")
	var got struct{ Traceparent string }
	for _, ev := range evs {
		if r := ev.GetToolResult(); r.GetTool() == "orders__trace_context" {
			if r.GetError() != nil {
				t.Fatalf("the call failed: %v", r.GetError())
			}
			if err := json.Unmarshal([]byte(r.GetResult()), &got); err != nil {
				t.Fatalf("result %q: %v", r.GetResult(), err)
			}
		}
	}
	tool := waitSpan(t, spans, "execute_tool orders__trace_context")
	root := waitSpan(t, spans, "invoke_agent orchestrator")
	want := "00-" + tool.SpanContext.TraceID().String() + "-" + tool.SpanContext.SpanID().String() + "-01"
	if got.Traceparent != want {
		t.Fatalf("the server got traceparent %q, want the execute_tool span's %q", got.Traceparent, want)
	}
	if tool.SpanContext.TraceID() != root.SpanContext.TraceID() {
		t.Fatalf("the tool call is in trace %v, the session in %v", tool.SpanContext.TraceID(), root.SpanContext.TraceID())
	}
}

// TestNodeHonoursOTELServiceName: the standard variables name the service of a
// session's spans.
func TestNodeHonoursOTELServiceName(t *testing.T) {
	t.Setenv("OTEL_SERVICE_NAME", "fathom-eu-west")
	t.Setenv("OTEL_RESOURCE_ATTRIBUTES", "deployment.environment=staging")
	spans := tracetest.NewInMemoryExporter()
	n := startTracedNode(t, mock.DemoScript(), spans)
	runSession(t, n, "s-svc", "anything")
	root := waitSpan(t, spans, "invoke_agent orchestrator")
	attrs := map[string]string{}
	for _, kv := range root.Resource.Attributes() {
		attrs[string(kv.Key)] = kv.Value.String()
	}
	if attrs["service.name"] != "fathom-eu-west" || attrs["deployment.environment"] != "staging" {
		t.Fatalf("resource of the session's root span: %v", attrs)
	}
}

// TestSessionRootDecidesSampling: with OTEL_TRACES_SAMPLER=parentbased_traceidratio the
// session's root decides and every other span of the session follows it: at ratio 0 no
// span is exported (none orphaned by a dropped root), at ratio 1 every span is, the root
// among them, and each span's parent is in the trace.
func TestSessionRootDecidesSampling(t *testing.T) {
	t.Setenv("OTEL_TRACES_SAMPLER", "parentbased_traceidratio")
	for _, ratio := range []string{"0", "1"} {
		t.Run("ratio="+ratio, func(t *testing.T) {
			t.Setenv("OTEL_TRACES_SAMPLER_ARG", ratio)
			spans := tracetest.NewInMemoryExporter()
			n := startTracedNode(t, mock.DemoScript(), spans)
			id := "s-sampled-" + ratio
			runSession(t, n, id, "anything")
			if ratio == "1" {
				waitSpan(t, spans, "invoke_agent orchestrator")
			}
			got := spans.GetSpans()
			if ratio == "0" {
				if len(got) != 0 {
					names := make([]string, 0, len(got))
					for _, s := range got {
						names = append(names, s.Name)
					}
					t.Fatalf("ratio 0 exported %d spans: %v", len(got), names)
				}
				return
			}
			ids := map[string]bool{}
			for _, s := range got {
				ids[s.SpanContext.SpanID().String()] = true
			}
			for _, s := range got {
				if p := s.Parent; p.IsValid() && !ids[p.SpanID().String()] {
					t.Errorf("span %q has a parent %s that was not exported", s.Name, p.SpanID())
				}
			}
		})
	}
}

// TestSessionLogLinesCarryTraceIDs: a line a session's activation logs is written inside
// its span (session.activation) and carries the session trace's trace_id and a span_id.
func TestSessionLogLinesCarryTraceIDs(t *testing.T) {
	llmSrv := httptest.NewServer(mock.New(mock.Config{Script: mock.DemoScript()}).Handler())
	t.Cleanup(llmSrv.Close)
	logs := &testenv.Buffer{}
	spans := tracetest.NewInMemoryExporter()
	cfg := node.Config{DataDir: t.TempDir(), Session: session.DefaultConfig(),
		Logger:    slog.New(slog.NewJSONHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug})),
		Telemetry: telemetry.Config{SpanExporter: spans}}
	cfg.LLM.BaseURL, cfg.LLM.APIKey = llmSrv.URL+"/v1", "k"
	cfg.Cluster.Provider, cfg.Cluster.Name = "local", "trace-logs"
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	n, err := node.Start(ctx, cfg)
	if err != nil {
		t.Fatalf("start node: %v", err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer cancel()
		if err := n.Stop(ctx); err != nil {
			t.Errorf("stop node: %v", err)
		}
	})
	runSession(t, n, "s-logs", "anything")
	root := waitSpan(t, spans, "invoke_agent orchestrator")
	var found bool
	for _, line := range strings.Split(logs.String(), "\n") {
		var rec map[string]any
		if json.Unmarshal([]byte(line), &rec) != nil || rec["session_id"] != "s-logs" || rec["msg"] != "session activated" {
			continue
		}
		found = true
		if sid, _ := rec["span_id"].(string); rec["trace_id"] != root.SpanContext.TraceID().String() || len(sid) != 16 {
			t.Fatalf("log line %s: want trace_id %s and the activation's span_id", line, root.SpanContext.TraceID())
		}
	}
	if !found {
		t.Fatalf("no \"session activated\" line in the log:\n%s", logs.String())
	}
}

package node_test

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/asynkron/protoactor-go/cluster"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	"github.com/fathom-agents/fathom/actors/session"
	"github.com/fathom-agents/fathom/internal/node"
	"github.com/fathom-agents/fathom/internal/telemetry"
	"github.com/fathom-agents/fathom/internal/testenv"
	"github.com/fathom-agents/fathom/llm/mock"
	"github.com/fathom-agents/fathom/messages"
	mcptool "github.com/fathom-agents/fathom/tools/mcp"
	"github.com/fathom-agents/fathom/tools/mcp/mcptest"
)

// startTracedNode starts a node on the embedded journal whose model is script, whose
// MCP servers are servers and whose finished spans go to spans.
func startTracedNode(t *testing.T, script mock.Script, spans *tracetest.InMemoryExporter, servers ...mcptool.ServerConfig) *node.Node {
	t.Helper()
	return startLocalNode(t, mock.New(mock.Config{Script: script}).Handler(), "trace-e2e",
		node.Config{Session: session.DefaultConfig(), Logger: slog.New(slog.NewTextHandler(&testenv.Buffer{}, nil)),
			MCPServers: servers, Telemetry: telemetry.Config{SpanExporter: spans}})
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
	logs := &testenv.Buffer{}
	spans := tracetest.NewInMemoryExporter()
	n := startLocalNode(t, mock.New(mock.Config{Script: mock.DemoScript()}).Handler(), "trace-logs",
		node.Config{Session: session.DefaultConfig(),
			Logger:    slog.New(slog.NewJSONHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug})),
			Telemetry: telemetry.Config{SpanExporter: spans}})
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

// runTraces returns the traces of session id's runs, the first run's first: for each
// root span of the session (an invoke_agent orchestrator span without a parent), every
// exported span of its trace.
func runTraces(spans tracetest.SpanStubs, id string) (roots tracetest.SpanStubs, traces map[trace.TraceID]tracetest.SpanStubs) {
	traces = map[trace.TraceID]tracetest.SpanStubs{}
	for _, s := range spans {
		if s.Name == "invoke_agent orchestrator" && !s.Parent.IsValid() && spanAttr(s, "gen_ai.conversation.id") == id {
			roots = append(roots, s)
		}
	}
	sort.Slice(roots, func(i, j int) bool { return roots[i].StartTime.Before(roots[j].StartTime) })
	for _, r := range roots {
		traces[r.SpanContext.TraceID()] = nil
	}
	for _, s := range spans {
		if _, ok := traces[s.SpanContext.TraceID()]; ok {
			traces[s.SpanContext.TraceID()] = append(traces[s.SpanContext.TraceID()], s)
		}
	}
	return roots, traces
}

func spanAttr(s tracetest.SpanStub, key string) string {
	for _, kv := range s.Attributes {
		if string(kv.Key) == key {
			return kv.Value.String()
		}
	}
	return ""
}

// checkRunTrace reports what is wrong with the trace of one run whose root is root: a
// second root, a span whose parent is not in the trace, a span ending after the root
// (a child outliving its ended root), an invoke_agent span with no span under it.
func checkRunTrace(root tracetest.SpanStub, spans tracetest.SpanStubs) error {
	ids := map[trace.SpanID]bool{}
	children := map[trace.SpanID]int{}
	for _, s := range spans {
		ids[s.SpanContext.SpanID()] = true
		children[s.Parent.SpanID()]++
	}
	for _, s := range spans {
		switch {
		case s.SpanContext.SpanID() == root.SpanContext.SpanID():
		case !s.Parent.IsValid():
			return fmt.Errorf("a second root %q in the trace", s.Name)
		case !ids[s.Parent.SpanID()]:
			return fmt.Errorf("span %q has a parent %v that is not in the trace", s.Name, s.Parent.SpanID())
		case s.EndTime.After(root.EndTime):
			return fmt.Errorf("span %q ends at %v, after its root (%v)", s.Name, s.EndTime, root.EndTime)
		}
		if strings.HasPrefix(s.Name, "invoke_agent ") && children[s.SpanContext.SpanID()] == 0 {
			return fmt.Errorf("span %q (%s) has no span under it", s.Name, spanAttr(s, "fathom.run.ended_by"))
		}
	}
	return nil
}

// TestResumedRunIsItsOwnTrace: a session that waits for a human's answer and is resumed
// is two traces, one per run: each has one invoke_agent root, and no span outlives its
// root nor points at a parent outside it; no invoke_agent span is empty; the second
// run's root links to the first's; and the human step, cut by the wait, is a
// session.step span in each (the first marked fathom.split_by=awaiting_human). Before,
// the run after the answer hung under the root that ended at the wait, and so did the
// step and the activation's spans.
func TestResumedRunIsItsOwnTrace(t *testing.T) {
	script := mock.Script{Rules: []mock.Rule{
		{SystemMatch: "FATHOM-ROLE: orchestrator", Response: `{"steps":[{"id":"ask","type":"human_input","description":"How many copies?",` +
			`"input_schema":{"type":"object","properties":{"n":{"type":"integer"}},"required":["n"]}},` +
			`{"id":"use","type":"custom","description":"print them","dependencies":["ask"]}]}`},
		{SystemMatch: "FATHOM-ROLE: executor", Response: "printed"},
	}, Default: "done"}
	spans := tracetest.NewInMemoryExporter()
	n := startTracedNode(t, script, spans)
	const id = "s-resumed"
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	sub := n.Feed().Subscribe(id, 0)
	defer sub.Close()
	if _, err := n.Session(id).Start(&messages.StartRequest{CommandId: "c1", Goal: "print copies"}, cluster.WithTimeout(30*time.Second)); err != nil {
		t.Fatalf("start session: %v", err)
	}
	for answered := false; ; {
		ev, err := sub.Next(ctx)
		if err != nil {
			t.Fatalf("events: %v", err)
		}
		if ev.GetHitlRequested() != nil && !answered {
			answered = true
			if _, err := n.Session(id).ProvideInput(&messages.ProvideInputRequest{CommandId: "in", StepId: "ask", Input: `{"n":3}`}, cluster.WithTimeout(30*time.Second)); err != nil {
				t.Fatalf("answer: %v", err)
			}
		}
		if f := ev.GetSessionFailed(); f != nil {
			t.Fatalf("session failed: %s", f.GetError())
		}
		if ev.GetSessionCompleted() != nil {
			if !answered {
				t.Fatal("the session completed without waiting for the human")
			}
			break
		}
	}
	var problem error
	check := func() bool {
		roots, traces := runTraces(spans.GetSpans(), id)
		switch {
		case len(roots) != 2:
			problem = fmt.Errorf("%d run roots, want 2 (one per run): %v", len(roots), roots)
			return false
		case spanAttr(roots[0], "fathom.run.ended_by") != "awaiting_human" || spanAttr(roots[1], "fathom.status") != "SESSION_STATUS_COMPLETED":
			problem = fmt.Errorf("the runs ended by %q then with status %q", spanAttr(roots[0], "fathom.run.ended_by"), spanAttr(roots[1], "fathom.status"))
			return false
		case len(traces) != 2:
			problem = fmt.Errorf("the runs are in %d traces, want 2", len(traces))
			return false
		case len(roots[1].Links) != 1 || roots[1].Links[0].SpanContext.SpanID() != roots[0].SpanContext.SpanID() ||
			roots[1].Links[0].SpanContext.TraceID() != roots[0].SpanContext.TraceID():
			problem = fmt.Errorf("the second run's root links to %v, want the first run's root", roots[1].Links)
			return false
		}
		asks := 0
		for i, r := range roots {
			if err := checkRunTrace(r, traces[r.SpanContext.TraceID()]); err != nil {
				problem = fmt.Errorf("run %d: %w", i+1, err)
				return false
			}
			for _, s := range traces[r.SpanContext.TraceID()] {
				if s.Name == "session.step" && spanAttr(s, "fathom.step_id") == "ask" {
					asks++
					if split := spanAttr(s, "fathom.split_by"); (i == 0) != (split == "awaiting_human") {
						problem = fmt.Errorf("run %d: step ask has fathom.split_by %q", i+1, split)
						return false
					}
				}
			}
		}
		if asks != 2 {
			problem = fmt.Errorf("%d session.step spans of step ask, want one per run", asks)
			return false
		}
		return true
	}
	for deadline := time.Now().Add(10 * time.Second); !check(); time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			for _, s := range spans.GetSpans() {
				t.Logf("span %s trace=%v id=%v parent=%v %v-%v %v", s.Name, s.SpanContext.TraceID(), s.SpanContext.SpanID(), s.Parent.SpanID(), s.StartTime.Format("15:04:05.000000"), s.EndTime.Format("15:04:05.000000"), s.Attributes)
			}
			t.Fatalf("the traces of session %s: %v", id, problem)
		}
	}
}

package sandbox_test

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/asynkron/protoactor-go/cluster"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/fathom-agents/fathom/internal/node"
	"github.com/fathom-agents/fathom/internal/telemetry"
	"github.com/fathom-agents/fathom/internal/testenv"
	"github.com/fathom-agents/fathom/llm/mock"
	"github.com/fathom-agents/fathom/messages"
)

// TestTraceParentReachesTheSandbox: code a session runs through code_execute, in the
// node's local sandbox under bubblewrap, sees TRACEPARENT naming the execute_tool span
// of its call, in the session's trace.
func TestTraceParentReachesTheSandbox(t *testing.T) {
	script := mock.Script{Rules: []mock.Rule{
		{SystemMatch: "FATHOM-ROLE: orchestrator", Response: `{"steps":[{"id":"step-1","type":"custom","description":"show the trace","dependencies":[]}]}`},
		{SystemMatch: "FATHOM-ROLE: executor", ToolMatch: `TP=`, Response: "shown"},
		{SystemMatch: "FATHOM-ROLE: executor", ToolCalls: []mock.ToolCallRule{{Name: "code_execute",
			Arguments: `{"language":"shell","code":"echo TP=$TRACEPARENT"}`}}},
	}, Default: "done"}
	spans := tracetest.NewInMemoryExporter()
	n := startSandboxNode(t, script, "sandbox-trace", func(cfg *node.Config) { cfg.Telemetry = telemetry.Config{SpanExporter: spans} })
	sub := n.Feed().Subscribe("s-tp", 0)
	defer sub.Close()
	if _, err := n.Session("s-tp").Start(&messages.StartRequest{CommandId: "c1", Goal: "show the trace"}, cluster.WithTimeout(30*time.Second)); err != nil {
		t.Fatalf("start session: %v", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	var stdout string
	for stdout == "" {
		ev, err := sub.Next(ctx)
		if err != nil {
			t.Fatalf("events: %v", err)
		}
		if r := ev.GetToolResult(); r != nil {
			if r.GetError() != nil {
				t.Fatalf("code_execute failed: %v", r.GetError())
			}
			var out struct{ Stdout string }
			if err := json.Unmarshal([]byte(r.GetResult()), &out); err != nil {
				t.Fatalf("tool result %q: %v", r.GetResult(), err)
			}
			stdout = out.Stdout
		}
		if ev.GetSessionFailed() != nil {
			t.Fatalf("session failed: %s", ev.GetSessionFailed().GetError())
		}
	}
	tp := strings.TrimSpace(strings.TrimPrefix(strings.TrimSpace(stdout), "TP="))
	var tool tracetest.SpanStub
	testenv.Eventually(t, 10*time.Second, func() bool {
		for _, s := range spans.GetSpans() {
			if s.Name == "execute_tool code_execute" {
				tool = s
				return true
			}
		}
		return false
	}, "no execute_tool code_execute span")
	want := "00-" + tool.SpanContext.TraceID().String() + "-" + tool.SpanContext.SpanID().String() + "-01"
	if tp != want {
		t.Fatalf("TRACEPARENT in the sandbox = %q (stdout %q), want the execute_tool span's %q", tp, stdout, want)
	}
	for _, kv := range tool.Attributes {
		if kv.Key == "gen_ai.conversation.id" && kv.Value.String() != "s-tp" {
			t.Fatalf("execute_tool span of another session: %v", tool.Attributes)
		}
	}
}

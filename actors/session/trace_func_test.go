package session_test

import (
	"context"
	"testing"
	"time"

	"go.opentelemetry.io/otel/trace"

	"github.com/fathom-agents/fathom/actors/session"
	"github.com/fathom-agents/fathom/actors/session/core"
	"github.com/fathom-agents/fathom/internal/telemetry"
	"github.com/fathom-agents/fathom/llm/mock"
	"github.com/fathom-agents/fathom/messages"
)

// TestFuncAgentCallIsInTheSessionTrace: a Go-function agent's call gets the trace parent
// a model agent's call gets: it runs in a session.llm_call span under the invoke_agent
// span of its sub-agent run, in the session's one trace, and the function's context
// carries that span (so the program's own spans join the session's trace).
func TestFuncAgentCallIsInTheSessionTrace(t *testing.T) {
	log := newSpanLog()
	got := make(chan trace.SpanContext, 1)
	auditor := core.AgentSpec{Name: "auditor", Description: "Checks the goal, in Go",
		Run: func(ctx context.Context, b core.Brief) (*messages.SubagentResult, error) {
			select {
			case got <- trace.SpanContextFromContext(ctx):
			default:
			}
			return &messages.SubagentResult{Status: "completed", Summary: "checked", Confidence: 1}, nil
		}}
	script := &mock.Script{Rules: []mock.Rule{
		{SystemMatch: "FATHOM-PHASE: plan", Response: `{"steps":[{"id":"a","type":"auditor","description":"check it"}]}`},
	}, Default: "done"}
	h := startHarness(t, harnessOpts{script: script, cfg: func(c *session.Config) { c.Agents = append(c.Agents, auditor) },
		telemetry: telemetry.Config{SpanExporter: log}})
	if _, err := h.start("traced-func", "c1", "check the goal"); err != nil {
		t.Fatal(err)
	}
	mustComplete(t, waitTerminal(t, h.j, "traced-func", 20*time.Second))
	stopNode(t, h)
	tr := waitSessionTrace(t, log, "traced-func")

	var sc trace.SpanContext
	select {
	case sc = <-got:
	default:
		t.Fatal("the agent function did not run")
	}
	agents := tr.named("invoke_agent auditor")
	if len(agents) != 1 {
		t.Fatalf("%d auditor spans in %v", len(agents), names(tr.spans))
	}
	if !sc.IsValid() || sc.TraceID() != tr.root.SpanContext.TraceID() {
		t.Fatalf("the function's context carries span %v, not one of the session's trace %v", sc, tr.root.SpanContext.TraceID())
	}
	call, ok := tr.byID[sc.SpanID()]
	if !ok || call.Name != "session.llm_call" || call.Parent.SpanID() != agents[0].SpanContext.SpanID() {
		t.Fatalf("the function's span is %q under %q, want session.llm_call under invoke_agent auditor", call.Name, tr.parent(call).Name)
	}
	if attr(call, "fathom.session_id") != "traced-func" || attr(call, "gen_ai.agent.name") != "auditor" {
		t.Fatalf("the call span's attributes: %v", call.Attributes)
	}
}

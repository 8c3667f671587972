package core

import (
	"strings"
	"testing"

	"google.golang.org/protobuf/proto"

	"github.com/fathom-agents/fathom/messages"
)

// subAgentWaiting folds the recorded demo journal up to its first sub-agent's first LLM
// call and returns the state (that sub-agent waits for the model) and the sub-agent.
func subAgentWaiting(t *testing.T) (*messages.SessionState, *messages.SubagentState) {
	t.Helper()
	_, evs := readDemo(t)
	s := NewState(evs[0].GetSessionId())
	for _, ev := range evs {
		fold(t, s, []*messages.Event{ev})
		if r := ev.GetLlmRequested(); r.GetSubAgentId() != "" {
			return s, s.GetSubAgents()[r.GetSubAgentId()]
		}
	}
	t.Fatal("the demo journal has no sub-agent call")
	return nil, nil
}

// shape is an event's type and, for a tool result, its error message: what both agents'
// turns must agree on.
func shape(evs []*messages.Event) []string {
	var out []string
	for _, ev := range evs {
		sh := ev.Type()
		if tr := ev.GetToolResult(); tr != nil {
			sh += ": " + tr.GetError().GetMessage()
		}
		out = append(out, sh)
	}
	return out
}

// TestOneTurnLoopForOrchestratorAndSubAgents: the orchestrator's step and a sub-agent
// answer through one turn loop: the same answer gives the same events (llm_responded,
// tool_called each, the tool-call cap's validation errors, the next call when every call
// was refused), the sub-agent's tagged with its id and limited to its tools.
func TestOneTurnLoopForOrchestratorAndSubAgents(t *testing.T) {
	cfg := DefaultConfig()
	cfg.MaxToolCallsPerTurn = 2
	orch := planned(t, nil, plan1)
	sub, sa := subAgentWaiting(t)
	tool := sa.GetTools()[0]
	answer := func(callID string, specs ...string) *LLMResult {
		return &LLMResult{CallID: callID, Content: "working", ToolCalls: calls(specs...)}
	}

	t.Run("the cap answers the calls past it at once", func(t *testing.T) {
		specs := []string{"x:" + tool, "y:" + tool, "z:" + tool}
		o := DecideLLMResult(orch, answer("a/llm-1", specs...), cfg, t0)
		u := DecideLLMResult(sub, answer(sa.GetPending().GetCallId(), specs...), cfg, t0)
		if got, want := strings.Join(shape(u), "|"), strings.Join(shape(o), "|"); got != want {
			t.Fatalf("sub-agent turn:\n%s\norchestrator turn:\n%s", got, want)
		}
		if got := strings.Join(shape(o), "|"); !strings.Contains(got, "tool_result: too many tool calls in one turn: at most 2 run per turn") {
			t.Fatalf("no cap refusal in %s", got)
		}
		for _, ev := range u {
			if id := subAgentOfEvent(ev); id != sa.GetId() {
				t.Errorf("%s of the sub-agent's turn carries sub_agent_id %q", ev.Type(), id)
			}
		}
		if r := u[0].GetLlmResponded(); r.GetStepId() != sa.GetStepId() || r.GetContent() != "working" {
			t.Errorf("sub-agent llm_responded %v", r)
		}
		if k := u[1].GetToolCalled().GetIdempotencyKey(); k != IdempotencyKey(sub.GetSessionId(), sa.GetId(), sa.GetToolCalls()+1) {
			t.Errorf("sub-agent idempotency key %q", k)
		}
		if k := o[1].GetToolCalled().GetIdempotencyKey(); k != "s1/a/tool-1" {
			t.Errorf("orchestrator idempotency key %q", k)
		}
	})

	t.Run("every call refused asks the model again", func(t *testing.T) {
		c := cfg
		c.MaxToolCallsPerTurn = 1
		// One call within the cap of a tool the sub-agent lacks, one past the cap.
		o := DecideLLMResult(orch, answer("a/llm-1", "x:"+tool, "y:"+tool), c, t0)
		u := DecideLLMResult(sub, answer(sa.GetPending().GetCallId(), "x:no_such_tool", "y:"+tool), c, t0)
		if got := types(u); got != "llm_responded,tool_called,tool_result,tool_called,tool_result,llm_requested" {
			t.Fatalf("sub-agent events %s", got)
		}
		if msg := u[2].GetToolResult().GetError().GetMessage(); !strings.Contains(msg, `tool "no_such_tool" is not available to the `+sa.GetAgentType()) {
			t.Fatalf("refusal %q", msg)
		}
		if got := types(o); got != "llm_responded,tool_called,tool_called,tool_result" {
			t.Fatalf("orchestrator events %s", got)
		}
		next := u[len(u)-1].GetLlmRequested()
		if next.GetSubAgentId() != sa.GetId() || next.GetIteration() != sa.GetIterations()+1 {
			t.Fatalf("next sub-agent call %v", next)
		}
	})

	t.Run("a tool breakpoint holds the turn after its calls", func(t *testing.T) {
		bp := &messages.Breakpoint{Id: "bp", Tool: tool, Position: positionBefore, DefaultAction: actionContinue}
		for name, s := range map[string]*messages.SessionState{"orchestrator": orch, "sub-agent": sub} {
			s := proto.Clone(s).(*messages.SessionState)
			s.Breakpoints = append(s.Breakpoints, bp)
			callID := "a/llm-1"
			if name == "sub-agent" {
				callID = sa.GetPending().GetCallId()
			}
			evs := DecideLLMResult(s, answer(callID, "x:"+tool, "y:"+tool), cfg, t0)
			if got := types(evs); got != "llm_responded,tool_called,tool_called,interrupt_triggered" {
				t.Fatalf("%s: events %s", name, got)
			}
			fold(t, s, evs)
			if s.GetInterrupt().GetReason() != ReasonTool || len(s.GetPendingTools())+pendingOf(s, sa.GetId()) != 2 {
				t.Fatalf("%s: interrupt %v", name, s.GetInterrupt())
			}
		}
	})
}

// pendingOf counts sub-agent id's pending tool calls in s.
func pendingOf(s *messages.SessionState, id string) int {
	return len(s.GetSubAgents()[id].GetPendingTools())
}

// subAgentOfEvent is the sub_agent_id of the events a turn records.
func subAgentOfEvent(ev *messages.Event) string {
	switch {
	case ev.GetLlmResponded() != nil:
		return ev.GetLlmResponded().GetSubAgentId()
	case ev.GetToolCalled() != nil:
		return ev.GetToolCalled().GetSubAgentId()
	case ev.GetToolResult() != nil:
		return ev.GetToolResult().GetSubAgentId()
	case ev.GetLlmRequested() != nil:
		return ev.GetLlmRequested().GetSubAgentId()
	}
	return "?"
}

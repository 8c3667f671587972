package core

import (
	"fmt"
	"slices"
	"strings"

	"github.com/fathom-agents/fathom/messages"
	"github.com/fathom-agents/fathom/tools"
	"github.com/fathom-agents/fathom/tools/builtin"
)

// agentTurn is whose model answered a turn: the orchestrator running its current step,
// or a sub-agent running the step it was given. The two differ only in this data; one
// loop (decideTurn) records every answer.
type agentTurn struct {
	// stepID and stepIndex are the plan step the turn belongs to; step is its plan entry.
	stepID    string
	stepIndex uint32
	step      *messages.PlanStep
	// subAgentID is the sub-agent's id, "" for the orchestrator.
	subAgentID string
	// agentType names the agent in errors (researcher, coder, ...).
	agentType string
	// tools are the tools the agent may call; nil means every tool of the node (the
	// orchestrator's steps).
	tools []string
	// toolCalls counts the agent's tool calls before this turn (the base of their index).
	toolCalls uint32
	// keyScope is the middle part of the turn's idempotency keys: the step id of the
	// orchestrator's calls, the sub-agent id of a sub-agent's.
	keyScope string
	// next asks the model again (every call of the turn was answered at once).
	next func(b *EventBuilder)
}

// allows reports whether the agent may call tool name.
func (a *agentTurn) allows(name string) bool {
	return a.tools == nil || slices.Contains(a.tools, name)
}

// orchestratorTurn is the orchestrator's turn in its current step, whose pending call
// is p.
func orchestratorTurn(s *messages.SessionState, p *messages.PendingCall) *agentTurn {
	idx := s.GetCurrentStepIndex()
	st := s.GetSteps()[idx]
	return &agentTurn{
		stepID: p.GetStepId(), stepIndex: idx, step: st.GetStep(), toolCalls: st.GetToolCalls(), keyScope: p.GetStepId(),
		next: func(b *EventBuilder) { nextTurn(b, s) },
	}
}

// subAgentTurn is sub-agent sa's turn.
func subAgentTurn(s *messages.SessionState, sa *messages.SubagentState, cfg Config) *agentTurn {
	idx, _ := StepIndexByID(s, sa.GetStepId())
	return &agentTurn{
		stepID: sa.GetStepId(), stepIndex: idx, step: stepOfID(s, sa.GetStepId()), subAgentID: sa.GetId(),
		agentType: sa.GetAgentType(), tools: sa.GetTools(), toolCalls: sa.GetToolCalls(), keyScope: sa.GetId(),
		next: func(b *EventBuilder) { requestSubAgentCall(b, cfg, sa.GetId()) },
	}
}

// respond records agent a's answer r (llm_responded, with its cost) and returns its
// tool calls, normalised. No tool calls means the answer is final: the caller decides
// what it ends (a step, a hand-off, a plan).
func respond(b *EventBuilder, s *messages.SessionState, a *agentTurn, r *LLMResult, cfg Config) []*messages.ToolCallRequest {
	cost := cfg.Prices.CostOf(firstNonEmpty(r.Model, s.GetConfig().GetModel()), UsageOf(r.Usage))
	calls := NormaliseToolCalls(r.ToolCalls)
	b.Add(func(e *messages.Event) {
		e.Payload = &messages.Event_LlmResponded{LlmResponded: &messages.LlmResponded{
			CallId: r.CallID, StepId: a.stepID, Content: r.Content, Usage: r.Usage, FinishReason: r.FinishReason,
			DurationMs: r.Duration.Milliseconds(), Model: r.Model, ToolCalls: calls, CostUsd: cost, Tokens: r.Tokens,
			Context: r.CtxInfo, SubAgentId: a.subAgentID, Thinking: r.Thinking,
		}}
	})
	return calls
}

// decideToolCalls records the tool calls of agent a's turn (tool_called each, with its
// idempotency key and index) and what follows them: a call past MaxToolCallsPerTurn, or
// of a tool the agent may not call, gets its validation error as its result at once
// (the model learns and calls again next turn); an ask_human call opens a human-input
// request; a call of a tool in Config.ApprovalTools opens an approval request and waits
// for a human's decision (hitl_approval.go); a call matching a tool breakpoint stops the session before the turn's calls
// run (the first match, once every call is recorded). When every call already has its
// result, the model is asked again.
func decideToolCalls(b *EventBuilder, s *messages.SessionState, a *agentTurn, calls []*messages.ToolCallRequest, cfg Config) {
	pending := 0
	var hold *messages.Breakpoint
	next := a.toolCalls
	for i, c := range calls {
		next++
		index := next
		key := IdempotencyKey(s.GetSessionId(), a.keyScope, index)
		b.Add(func(e *messages.Event) {
			e.Payload = &messages.Event_ToolCalled{ToolCalled: &messages.ToolCalled{
				StepId: a.stepID, CallId: c.GetId(), Tool: c.GetName(), Args: c.GetArguments(), IdempotencyKey: key, Index: index,
				SubAgentId: a.subAgentID,
			}}
		})
		var terr *tools.ToolError
		switch {
		case i < int(cfg.MaxToolCallsPerTurn) && c.GetName() == builtin.AskHumanName && a.allows(c.GetName()):
			// Answered by a human (ProvideInput), never run: the call waits in state.
			if askHuman(b, cfg, a.step, c, key, a.subAgentID) {
				pending++
			}
			continue
		case i >= int(cfg.MaxToolCallsPerTurn):
			// Recorded so the transcript stays well-formed (every call gets an answer), but
			// not run.
			terr = tools.ValidationError(c.GetName(), fmt.Sprintf("too many tool calls in one turn: at most %d run per turn; call it again in the next turn", cfg.MaxToolCallsPerTurn))
		case !a.allows(c.GetName()):
			terr = tools.ValidationError(c.GetName(), fmt.Sprintf("tool %q is not available to the %s; available tools: %s", c.GetName(), a.agentType, strings.Join(a.tools, ", ")))
		}
		if terr == nil {
			pending++
			if cfg.needsApproval(c.GetName()) {
				// Held until a human decides (ProvideInput): approve, edit or reject.
				requestApproval(b, cfg, a, c, key)
			}
			if hold == nil && s.GetInterrupt() == nil {
				hold = matchToolBreakpoint(s, a.step, c.GetName())
			}
			continue
		}
		res := tools.Result{CallID: c.GetId(), Err: terr}
		tokens := cfg.CountMessage(s.GetConfig().GetModel(), ToolMessage(c.GetId(), res))
		b.Add(func(e *messages.Event) {
			tr := toolResultEvent(a.stepID, c.GetId(), c.GetName(), key, res, tokens)
			tr.SubAgentId = a.subAgentID
			e.Payload = &messages.Event_ToolResult{ToolResult: tr}
		})
	}
	switch {
	case pending == 0:
		a.next(b)
	case hold != nil:
		interrupt(b, hold, a.stepIndex, a.stepID)
	}
}

package session

import (
	"fmt"
	"strings"

	"github.com/fathom-agents/fathom/llm"
	"github.com/fathom-agents/fathom/messages"
	"github.com/fathom-agents/fathom/prompts"
	"github.com/fathom-agents/fathom/tools"
)

// maxPriorOutputBytes bounds how much of each earlier step's output a step call sees.
// The memory issue replaces this with the token-budgeted context builder.
const maxPriorOutputBytes = 4 << 10

// buildRequest assembles the LLM request of the pending call from the state alone, so a
// call resumed after a crash asks exactly what the lost one asked.
func buildRequest(s *messages.SessionState, p *prompts.Set, specs []llm.ToolSpec) (llm.Request, error) {
	pending := s.GetPending()
	if pending == nil {
		return llm.Request{}, fmt.Errorf("session %s has no pending call", s.GetSessionId())
	}
	req := llm.Request{Model: s.GetConfig().GetModel()}
	switch pending.GetPurpose() {
	case purposePlan:
		sys, err := p.Render(prompts.Planner, prompts.PlannerData{MaxSteps: s.GetConfig().GetMaxSteps()})
		if err != nil {
			return llm.Request{}, err
		}
		req.Messages = []llm.Message{
			{Role: "system", Content: sys},
			{Role: "user", Content: "Goal: " + s.GetGoal() + "\n"},
		}
	case purposeStep:
		idx := int(s.GetCurrentStepIndex())
		if idx >= len(s.GetSteps()) {
			return llm.Request{}, fmt.Errorf("session %s: step index %d out of range", s.GetSessionId(), idx)
		}
		step := s.GetSteps()[idx].GetStep()
		sys, err := p.Render(prompts.Executor, prompts.ExecutorData{StepType: step.GetType()})
		if err != nil {
			return llm.Request{}, err
		}
		var user strings.Builder
		fmt.Fprintf(&user, "Goal: %s\nStep: %s\n", s.GetGoal(), step.GetDescription())
		header := false
		for _, st := range s.GetSteps()[:idx] {
			if st.GetStatus() != messages.StepStatus_STEP_STATUS_COMPLETED {
				continue
			}
			if !header {
				user.WriteString("\nResults of earlier steps:\n")
				header = true
			}
			fmt.Fprintf(&user, "- %s (%s): %s\n", st.GetStep().GetId(), st.GetStep().GetDescription(), truncate(st.GetOutput(), maxPriorOutputBytes))
		}
		req.Messages = []llm.Message{{Role: "system", Content: sys}, {Role: "user", Content: user.String()}}
		for _, m := range s.GetSteps()[idx].GetTranscript() {
			msg := llm.Message{Role: m.GetRole(), Content: m.GetContent(), ToolCallID: m.GetToolCallId()}
			for _, c := range m.GetToolCalls() {
				msg.ToolCalls = append(msg.ToolCalls, llm.ToolCall{ID: c.GetId(), Name: c.GetName(), Arguments: c.GetArguments()})
			}
			req.Messages = append(req.Messages, msg)
		}
		req.Tools = specs
	default:
		return llm.Request{}, fmt.Errorf("session %s: unknown call purpose %q", s.GetSessionId(), pending.GetPurpose())
	}
	return req, nil
}

// toolSpecs describes the registry's tools for the model.
func toolSpecs(e *tools.Executor) []llm.ToolSpec {
	if e == nil || e.Registry == nil {
		return nil
	}
	ts := e.Registry.Tools()
	specs := make([]llm.ToolSpec, 0, len(ts))
	for _, t := range ts {
		specs = append(specs, llm.ToolSpec{Name: t.Name(), Description: t.Description(), Parameters: t.Schema()})
	}
	return specs
}

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	cut := n
	for cut > 0 && !utf8RuneStart(s[cut]) {
		cut--
	}
	return s[:cut] + " …"
}

func utf8RuneStart(b byte) bool { return b&0xC0 != 0x80 }
